import Foundation
import LiveState
import LiveTopics
import NIOCore
import Synchronization

/// The floor view's live feed (`GET /v1/events`): Server-Sent Events per viewer.
///
/// The pipeline hands every derived change, removal and summary to ``publish(_:place:json:)``
/// as it publishes it; the hub frames it once (`id:`, `event:`, `data:`), keeps the last
/// ``history`` frames for viewers that reconnect, and gives the frame to every viewer whose
/// scope (``EventScope``) holds it. A change reaches the viewers of its floor through an
/// index by floor, so that it costs nothing per viewer of another floor. A viewer's buffer is bounded: one that falls behind is dropped (its
/// stream ends after what it has; EventSource reconnects with Last-Event-ID and is resumed
/// from the history, or given a fresh snapshot). The pipeline never waits for a viewer.
///
/// An event id is `{epoch}-{n}`: the epoch (the hub's start, in milliseconds) makes an id
/// from before a restart ask for a snapshot rather than resume in another numbering.
public final class EventHub: Sendable {
    /// A viewer's stream, and whether it started with a snapshot or resumed. Each element
    /// is every frame that waited since the last one, in one buffer: a viewer that keeps
    /// up writes a frame at a time, one that lags catches up in fewer, larger writes.
    public struct Subscription: Sendable {
        public let frames: Frames
        public let resumed: Bool
        let id: Int
    }

    public struct Statistics: Sendable, Equatable {
        public var viewers = 0
        /// Viewers dropped for falling behind.
        public var dropped = 0
        /// Viewers resumed from the history, and given a snapshot.
        public var resumed = 0
        public var snapshots = 0
    }

    private final class Viewer: Sendable {
        let scope: EventScope
        let mailbox: Mailbox

        init(scope: EventScope, mailbox: Mailbox) {
            self.scope = scope
            self.mailbox = mailbox
        }
    }

    private struct Frame {
        var number: UInt64
        var subject: EventScope.Subject
        var bytes: ByteBuffer
    }

    private struct State {
        var next: UInt64 = 1
        /// Frames `[first, next)` from `historyStart` on, oldest first: the history a viewer
        /// can resume from.
        var history: [Frame] = []
        var historyStart = 0
        var viewers: [Int: Viewer] = [:]
        /// The viewers of exactly one floor (``EventScope/oneFloor``), by that floor; the
        /// others are `wide`, asked one by one.
        var byFloor: [Place: [Int: Viewer]] = [:]
        var wide: [Int: Viewer] = [:]
        var nextViewer = 0
        /// No viewer watched since this number: frames were not kept.
        var unwatched = true
        var statistics = Statistics()

        /// Takes a viewer that left `viewers` out of the index too.
        mutating func forget(_ id: Int, _ scope: EventScope) {
            guard let floor = scope.oneFloor else {
                wide.removeValue(forKey: id)
                return
            }
            byFloor[floor]?.removeValue(forKey: id)
            if byFloor[floor]?.isEmpty == true { byFloor.removeValue(forKey: floor) }
        }

        /// The number of the oldest frame kept (`next` when none is).
        var first: UInt64 { historyStart < history.count ? history[historyStart].number : next }
    }

    /// Frames kept for viewers that reconnect.
    public let history: Int
    /// Frames a viewer may have waiting before it is dropped.
    public let viewerBuffer: Int
    private let epoch: Int64
    private let state = Mutex(State())
    private let viewerCount = Atomic<Int>(0)

    public init(history: Int = 4096, viewerBuffer: Int = 1024, epoch: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) {
        self.history = max(history, 1)
        self.viewerBuffer = max(viewerBuffer, 2)
        self.epoch = epoch
    }

    /// Whether anyone watches: when nobody does, publishing costs one atomic load.
    public var hasViewers: Bool { viewerCount.load(ordering: .relaxed) > 0 }

    public var statistics: Statistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.viewers = state.viewers.count
            return statistics
        }
    }

    /// Hands an event about a place (a summary) to the viewers whose scope holds it, and
    /// keeps it for those that reconnect. `kind` is the SSE event name (`summary`).
    public func publish(_ kind: StaticString, place: Place, json: [UInt8]) {
        publish(kind, subject: .place(place), json: json)
    }

    /// Hands an event about a location (`change`, `remove`) to the viewers whose scope holds
    /// it, and keeps it for those that reconnect.
    public func publish(_ kind: StaticString, address: LocationAddress, json: [UInt8]) {
        publish(kind, subject: .location(address), json: json)
    }

    private func publish(_ kind: StaticString, subject: EventScope.Subject, json: [UInt8]) {
        guard hasViewers else { return }
        let dropped = state.withLock { state -> [Viewer] in
            let number = state.next
            state.next += 1
            var bytes = ByteBuffer()
            bytes.reserveCapacity(json.count + 64)
            bytes.writeString("id: \(epoch)-\(number)\nevent: ")
            bytes.writeStaticString(kind)
            bytes.writeStaticString("\ndata: ")
            bytes.writeBytes(json)
            bytes.writeStaticString("\n\n")
            keep(Frame(number: number, subject: subject, bytes: bytes), in: &state)
            return deliver(bytes, to: subject, in: &state)
        }
        // Outside the lock: a reader woken now may end and take the lock.
        for viewer in dropped { viewer.mailbox.end() }
    }

    /// Sends a comment to every viewer, so that proxies keep idle streams open (and a
    /// viewer that went away is noticed).
    public func heartbeat() {
        guard hasViewers else { return }
        let dropped = state.withLock { deliver(ByteBuffer(staticString: ": heartbeat\n\n"), to: nil, in: &$0) }
        for viewer in dropped { viewer.mailbox.end() }
    }

    /// Puts `bytes` in the mailbox of every viewer whose scope holds `subject` (every viewer
    /// when `nil`); takes out the ones whose mailbox is full and returns them, for the
    /// caller to end outside the lock.
    private func deliver(_ bytes: ByteBuffer, to subject: EventScope.Subject?, in state: inout State) -> [Viewer] {
        var full: [Int] = []
        if let subject, case .location(let address) = subject {
            // A change: its floor's viewers, then the wide ones whose scope holds it.
            for (id, viewer) in state.byFloor[address.place] ?? [:] where !viewer.mailbox.put(bytes) { full.append(id) }
            for (id, viewer) in state.wide where viewer.scope.holds(subject) && !viewer.mailbox.put(bytes) { full.append(id) }
        } else {
            for (id, viewer) in state.viewers where subject.map(viewer.scope.holds) ?? true {
                if !viewer.mailbox.put(bytes) { full.append(id) }
            }
        }
        return full.compactMap { drop($0, in: &state) }
    }

    /// Opens a viewer's stream: the frames after `lastEventID` when the history still has
    /// them all and they fit in the viewer's buffer, else `snapshot()` (called under the hub's lock, so that no event falls
    /// between it and the stream: the caller makes sure no event is published meanwhile,
    /// as the pipeline's actor does).
    public func subscribe(_ scope: PlaceScope, lastEventID: String?, snapshot: () -> [UInt8]) -> Subscription {
        subscribe(EventScope(scope), lastEventID: lastEventID, snapshot: snapshot)
    }

    /// Opens a viewer's stream of any scope (see ``subscribe(_:lastEventID:snapshot:)-(PlaceScope,_,_)``).
    public func subscribe(_ scope: EventScope, lastEventID: String?, snapshot: () -> [UInt8]) -> Subscription {
        let mailbox = Mailbox(capacity: viewerBuffer)
        return state.withLock { state in
            if state.unwatched {
                // Frames were not kept while nobody watched: no id from before resumes.
                state.history.removeAll()
                state.historyStart = 0
                state.next += 1
                state.unwatched = false
            }
            // What it missed, if the history still has all of it and it fits the viewer's
            // buffer (more would be dropped at once: a snapshot is smaller then).
            var missed: [ByteBuffer]?
            if let after = resumePoint(lastEventID, state), after + 1 >= state.first {
                var frames: [ByteBuffer] = []
                for frame in state.history[state.historyStart...] where frame.number > after && scope.holds(frame.subject) {
                    frames.append(frame.bytes)
                    if frames.count >= viewerBuffer { break }
                }
                if frames.count < viewerBuffer { missed = frames }
            }
            let resumed: Bool
            if let missed {
                resumed = true
                state.statistics.resumed += 1
                for frame in missed { _ = mailbox.put(frame) }
            } else {
                resumed = false
                state.statistics.snapshots += 1
                var bytes = ByteBuffer()
                bytes.writeString("id: \(epoch)-\(state.next - 1)\nevent: snapshot\ndata: ")
                bytes.writeBytes(snapshot())
                bytes.writeStaticString("\n\n")
                _ = mailbox.put(bytes)
            }
            let id = state.nextViewer
            state.nextViewer += 1
            let viewer = Viewer(scope: scope, mailbox: mailbox)
            state.viewers[id] = viewer
            if let floor = scope.oneFloor { state.byFloor[floor, default: [:]][id] = viewer } else { state.wide[id] = viewer }
            viewerCount.store(state.viewers.count, ordering: .relaxed)
            mailbox.onTermination { [weak self] in self?.remove(id) }
            return Subscription(frames: Frames(mailbox: mailbox), resumed: resumed, id: id)
        }
    }

    /// Ends one viewer's stream (its connection is being shut down).
    public func end(_ subscription: Subscription) {
        remove(subscription.id)
        subscription.frames.mailbox.end()
    }

    private func remove(_ id: Int) {
        state.withLock { state in
            guard let viewer = state.viewers.removeValue(forKey: id) else { return }
            state.forget(id, viewer.scope)
            viewerCount.store(state.viewers.count, ordering: .relaxed)
            if state.viewers.isEmpty { state.unwatched = true }
        }
    }

    /// Takes a viewer that fell behind out; the caller ends its stream outside the lock.
    private func drop(_ id: Int, in state: inout State) -> Viewer? {
        guard let viewer = state.viewers.removeValue(forKey: id) else { return nil }
        state.forget(id, viewer.scope)
        state.statistics.dropped += 1
        viewerCount.store(state.viewers.count, ordering: .relaxed)
        if state.viewers.isEmpty { state.unwatched = true }
        return viewer
    }

    private func keep(_ frame: Frame, in state: inout State) {
        state.history.append(frame)
        if state.history.count - state.historyStart > history {
            state.historyStart += 1
            // Compact now and then rather than shift the array on every frame.
            if state.historyStart >= history {
                state.history.removeFirst(state.historyStart)
                state.historyStart = 0
            }
        }
    }

    /// The number after which to resume, if `lastEventID` is one of this hub's ids.
    private func resumePoint(_ lastEventID: String?, _ state: State) -> UInt64? {
        guard let lastEventID, let dash = lastEventID.firstIndex(of: "-"),
            Int64(lastEventID[..<dash]) == epoch, let number = UInt64(lastEventID[lastEventID.index(after: dash)...]),
            number < state.next
        else { return nil }
        return number
    }
}
