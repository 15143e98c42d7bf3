import Dispatch
import LiveTopics
import Mosquitto
import Synchronization

/// The bounded hand-off between the network thread and the pipeline: at most `capacity`
/// messages and `byteCapacity` bytes of topics and payloads wait. When it is full, the
/// network thread waits for room inside the message callback, so nothing more is read from
/// the socket and TCP pushes back on the broker, whose session queue holds the rest. The
/// pipeline takes everything that waits in one batch: one hop per batch, not per message.
final class IntakeQueue: Sendable {
    struct State {
        /// What waits is `pending[head...]`: a batch taken from the front moves `head`, not
        /// the rest down (a long read keeps thousands waiting, which would otherwise move at
        /// every batch). The front is dropped once it is half the array, so each message is
        /// moved once at most, and what it holds is never more than what waits.
        var pending: [IntakeMessage] = []
        var head = 0
        var waiting: Int { pending.count - head }
        var isEmpty: Bool { head == pending.count }
        /// Drops what was taken from the front.
        mutating func dropTaken() {
            guard head > 0 else { return }
            pending.removeFirst(head)
            head = 0
        }
        var bytes = 0
        var consumer: CheckedContinuation<[IntakeMessage], Never>?
        /// The most messages the waiting consumer takes (see ``next(limit:)``).
        var consumerLimit = Int.max
        var producerWaiting = false
        var closed = false
        /// An emptied batch's storage, for the next one.
        var spare: [IntakeMessage] = []
    }

    let capacity: Int
    let byteCapacity: Int
    private let state = Mutex(State())
    private let room = DispatchSemaphore(value: 0)
    private let blockedNanoseconds = Atomic<Int>(0)
    private let depthNow = Atomic<Int>(0)
    private let depthPeak = Atomic<Int>(0)

    /// The most messages ``next()`` hands out at once.
    let batchLimit: Int

    /// - Parameter batchLimit: the most messages a batch holds. The pipeline's actor is let
    ///   go between batches: what else waits for it (a `/metrics` or `/readyz` request, the
    ///   watchdog's look, a tick) waits for one batch at most, never for a backlog of ten
    ///   thousand.
    init(capacity: Int, byteCapacity: Int, batchLimit: Int = 1_024) {
        self.capacity = max(1, capacity)
        self.byteCapacity = max(1, byteCapacity)
        self.batchLimit = max(1, batchLimit)
    }

    /// Messages waiting now, the most that ever waited, and how long the network thread
    /// has waited for room in all.
    /// Whether the consumer waits in ``next(limit:)`` for something to arrive.
    var isConsumerWaiting: Bool { state.withLock { $0.consumer != nil } }

    var statistics: (depth: Int, peak: Int, blocked: Duration) {
        (depthNow.load(ordering: .relaxed), depthPeak.load(ordering: .relaxed),
         .nanoseconds(blockedNanoseconds.load(ordering: .relaxed)))
    }

    /// Hands messages over, in order, waiting while the queue is full (call it from the
    /// network thread, never from a task).
    /// - Returns: `false` when the queue is closed (the messages not handed over yet were
    ///   not taken).
    @discardableResult
    func push(contentsOf messages: [IntakeMessage]) -> Bool {
        var next = 0
        var waitedSince: MonotonicInstant?
        defer {
            if let waitedSince {
                blockedNanoseconds.add(Int(MonotonicInstant.now.nanoseconds(since: waitedSince)), ordering: .relaxed)
            }
        }
        while next < messages.count {
            enum Step { case closed, wait, moved(CheckedContinuation<[IntakeMessage], Never>?, [IntakeMessage]) }
            let step = state.withLock { state -> Step in
                if state.closed { return .closed }
                let before = next
                while next < messages.count {
                    let size = messages[next].size
                    // One message always fits, however large: the queue must never stall on it.
                    guard state.isEmpty || (state.waiting < capacity && state.bytes + size <= byteCapacity)
                    else { break }
                    state.pending.append(messages[next])
                    state.bytes += size
                    next += 1
                }
                if next == before {
                    state.producerWaiting = true
                    return .wait
                }
                let (consumer, batch) = handedOver(&state)
                return .moved(consumer, batch)
            }
            switch step {
            case .closed: return false
            case .moved(let consumer, let batch): consumer?.resume(returning: batch)
            case .wait:
                if waitedSince == nil { waitedSince = .now }
                room.wait()
            }
        }
        return true
    }

    /// After messages were added (under the lock): records the depth, and takes the batch
    /// for a consumer that waits, if one does.
    private func handedOver(_ state: inout State) -> (CheckedContinuation<[IntakeMessage], Never>?, [IntakeMessage]) {
        depthNow.store(state.waiting, ordering: .relaxed)
        if state.waiting > depthPeak.load(ordering: .relaxed) {
            depthPeak.store(state.waiting, ordering: .relaxed)
        }
        guard let consumer = state.consumer else { return (nil, []) }
        state.consumer = nil
        return (consumer, take(&state, limit: state.consumerLimit))
    }

    /// Hands a read pass's messages over, in order, as ``push(contentsOf:)`` does, leaving
    /// `messages` empty. While nothing waits and the whole pass fits (the pipeline keeps
    /// up), the array itself goes over, its storage swapped for the queue's empty one:
    /// nothing is copied, retained or released per message.
    /// - Returns: `false` when the queue is closed (`messages` are then left as they were
    ///   when nothing was handed over, else emptied of what was).
    @discardableResult
    func push(moving messages: inout [IntakeMessage]) -> Bool {
        guard !messages.isEmpty else { return true }
        var size = 0
        for index in messages.indices { size += messages[index].size }
        enum Step { case closed, copy, moved(CheckedContinuation<[IntakeMessage], Never>?, [IntakeMessage]) }
        let step = state.withLock { state -> Step in
            if state.closed { return .closed }
            // One message always fits, however large (as in `push(contentsOf:)`).
            guard state.isEmpty, messages.count == 1 || (messages.count <= capacity && size <= byteCapacity)
            else { return .copy }
            state.dropTaken()
            swap(&state.pending, &messages)
            state.bytes = size
            let (consumer, batch) = handedOver(&state)
            return .moved(consumer, batch)
        }
        switch step {
        case .closed: return false
        case .moved(let consumer, let batch):
            consumer?.resume(returning: batch)
            return true
        case .copy:
            let taken = push(contentsOf: messages)
            messages.removeAll(keepingCapacity: true)
            return taken
        }
    }

    /// Hands one message over; see ``push(contentsOf:)``.
    @discardableResult
    func push(_ message: IntakeMessage) -> Bool { push(contentsOf: [message]) }

    /// What waits, up to ``batchLimit`` messages at once (or `limit`, when fewer);
    /// suspends while nothing does.
    /// - Returns: `nil` once the queue is closed and empty.
    func next(limit: Int = .max) async -> [IntakeMessage]? {
        enum Next { case batch([IntakeMessage]), end, wait }
        let immediate = state.withLock { state -> Next in
            if !state.isEmpty { return .batch(take(&state, limit: limit)) }
            return state.closed ? .end : .wait
        }
        switch immediate {
        case .batch(let batch): return batch
        case .end: return nil
        case .wait: break
        }
        let batch = await withCheckedContinuation { (continuation: CheckedContinuation<[IntakeMessage], Never>) in
            let ready = state.withLock { state -> [IntakeMessage]? in
                if !state.isEmpty || state.closed { return take(&state, limit: limit) }
                state.consumer = continuation
                state.consumerLimit = limit
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        return batch.isEmpty ? nil : batch
    }

    /// Gives an emptied batch's storage back for the next one (storage of more than twice
    /// the queue's capacity, left by a batch of oversize messages, goes).
    func recycle(_ batch: consuming [IntakeMessage]) {
        guard batch.capacity <= 2 * capacity else { return }
        batch.removeAll(keepingCapacity: true)
        state.withLock { state in
            if state.spare.capacity < batch.capacity { state.spare = batch }
        }
    }

    /// No more messages are taken; what waits is still handed out, then ``next()`` ends.
    func close() {
        let consumer = state.withLock { state -> CheckedContinuation<[IntakeMessage], Never>? in
            state.closed = true
            defer { state.consumer = nil }
            return state.isEmpty ? state.consumer : nil
        }
        consumer?.resume(returning: [])
        room.signal()
    }

    /// Takes what is pending, at most ``batchLimit`` messages (all of them: the pending array
    /// itself, the spare storage left in its place), and wakes a waiting producer. Call with
    /// the state locked.
    private func take(_ state: inout State, limit: Int) -> [IntakeMessage] {
        let batchLimit = min(self.batchLimit, max(limit, 1))
        var batch = state.spare
        state.spare = []
        if state.waiting > batchLimit {
            // The first `batchLimit` go; the rest wait for the next call.
            batch.removeAll(keepingCapacity: true)
            batch.append(contentsOf: state.pending[state.head..<(state.head + batchLimit)])
            state.head += batchLimit
            if state.head * 2 >= state.pending.count { state.dropTaken() }
            for message in batch { state.bytes -= message.size }
        } else if state.head > 0 {
            batch.removeAll(keepingCapacity: true)
            batch.append(contentsOf: state.pending[state.head...])
            state.pending.removeAll(keepingCapacity: true)
            state.head = 0
            state.bytes = 0
        } else {
            swap(&batch, &state.pending)
            state.bytes = 0
        }
        depthNow.store(state.waiting, ordering: .relaxed)
        if state.producerWaiting {
            state.producerWaiting = false
            room.signal()
        }
        return batch
    }
}
