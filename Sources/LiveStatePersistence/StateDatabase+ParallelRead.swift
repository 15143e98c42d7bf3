import Dispatch
import Foundation
import LiveState
import Synchronization

extension StateDatabase {
    /// Reads every stored location of the file at `path` on a thread of its own, in batches,
    /// turns each record (its row and bytes) into what `body` needs with the function
    /// `preparer` makes (on that thread too, once), and hands the batches to `body` on the
    /// calling thread: reading and preparing one batch overlaps with using the one before,
    /// which on two cores takes about half the time of doing both in turn.
    ///
    /// What is prepared is moved, never copied: into the batch on the reading thread, out of
    /// it by `body` (``MovingBatch/moveAll(_:)``). A copy retains every reference it
    /// holds and its end releases them, and the references are to memory the other thread
    /// just wrote: costly on the thread that fills the store, once for every location.
    ///
    /// Once `shouldStop` says so (it is asked once a batch), the rest is neither prepared nor
    /// handed to `body`: a stop asked for during a long restore ends it within a batch.
    /// - Returns: how many records could not be decoded (and were skipped).
    /// - Throws: ``Failure`` when the file cannot be opened or read.
    @discardableResult
    public static func readAll<Prepared: Sendable>(
        path: String, batchSize: Int = 8192,
        preparing preparer: @escaping @Sendable () -> (_ row: Int64, _ record: UnsafeRawBufferPointer) throws -> Prepared,
        shouldStop: @escaping @Sendable () -> Bool = { false },
        _ body: (MovingBatch<Prepared>) -> Void
    ) throws(Failure) -> Int {
        let channel = BatchChannel<Prepared>(capacity: 4)
        let reader = Thread {
            do {
                let database = try StateDatabase(path: path)
                let prepare = preparer()
                var batch = MovingBatch<Prepared>(capacity: batchSize)
                var stopped = false
                let unreadable = try database.forEachStoredRecord { row, bytes in
                    // The rows left are stepped over, not decoded.
                    if stopped { return true }
                    do {
                        batch.append(try prepare(row, bytes))
                    } catch {
                        return false
                    }
                    if batch.isFull {
                        channel.send(batch)
                        batch = channel.takeEmptied() ?? MovingBatch(capacity: batchSize)
                        stopped = shouldStop()
                    }
                    return true
                }
                if !batch.isEmpty { channel.send(batch) }
                channel.finish(unreadable: unreadable, failure: nil)
            } catch {
                channel.finish(unreadable: 0, failure: error as? Failure)
            }
        }
        reader.name = "livedata state reader"
        reader.start()
        // A batch's storage goes back to the reader once used: a fresh one each time would be
        // memory the kernel hands out (and clears) page by page, over and over.
        while let batch = channel.receive() {
            if !shouldStop() { body(batch) }
            // Empty before the reader fills it again, whatever `body` left in it.
            batch.removeAll()
            channel.giveBack(batch)
        }
        let (unreadable, failure) = channel.result
        if let failure { throw failure }
        return unreadable
    }
}

/// A batch of values handed from one thread to another, which moves them in and out of
/// storage that it keeps for the next batch: no copy of a value, so no retain and release
/// of what it holds. One thread uses it at a time (the channel hands it over).
public final class MovingBatch<Element: Sendable>: @unchecked Sendable {
    private let elements: UnsafeMutablePointer<Element>
    public let capacity: Int
    /// How many elements it holds, from the first place.
    public private(set) var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        elements = .allocate(capacity: capacity)
    }

    deinit {
        removeAll()
        elements.deallocate()
    }

    var isFull: Bool { count == capacity }
    var isEmpty: Bool { count == 0 }

    func append(_ element: consuming Element) {
        precondition(count < capacity, "a moving batch is full")
        (elements + count).initialize(to: element)
        count += 1
    }

    /// Ends the elements it still holds.
    func removeAll() {
        elements.deinitialize(count: count)
        count = 0
    }

    /// Hands `body` the elements to move out, every one of them: the batch is empty after,
    /// and ready to fill again.
    public func moveAll(_ body: (UnsafeMutableBufferPointer<Element>) -> Void) {
        let elements = UnsafeMutableBufferPointer(start: elements, count: count)
        count = 0
        body(elements)
    }
}

/// A bounded queue of batches from one reading thread to one consumer.
private final class BatchChannel<Element: Sendable>: Sendable {
    private struct State {
        var batches: [MovingBatch<Element>] = []
        var emptied: [MovingBatch<Element>] = []
        var finished = false
        var unreadable = 0
        var failure: StateDatabase.Failure?
    }

    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)
    private let space: DispatchSemaphore

    init(capacity: Int) {
        space = DispatchSemaphore(value: capacity)
    }

    func send(_ batch: MovingBatch<Element>) {
        space.wait()
        state.withLock { $0.batches.append(batch) }
        available.signal()
    }

    func finish(unreadable: Int, failure: StateDatabase.Failure?) {
        state.withLock {
            $0.finished = true
            $0.unreadable = unreadable
            $0.failure = failure
        }
        available.signal()
    }

    /// A used batch's storage, for the reader to fill again.
    func giveBack(_ batch: MovingBatch<Element>) {
        state.withLock { $0.emptied.append(batch) }
    }

    /// Storage given back by the consumer, if any.
    func takeEmptied() -> MovingBatch<Element>? {
        state.withLock { $0.emptied.popLast() }
    }

    /// The next batch, or `nil` when the reader is done.
    func receive() -> MovingBatch<Element>? {
        while true {
            available.wait()
            let (batch, finished) = state.withLock { state -> (MovingBatch<Element>?, Bool) in
                if !state.batches.isEmpty { return (state.batches.removeFirst(), false) }
                return (nil, state.finished)
            }
            if let batch {
                space.signal()
                return batch
            }
            if finished { return nil }
        }
    }

    var result: (unreadable: Int, failure: StateDatabase.Failure?) {
        state.withLock { ($0.unreadable, $0.failure) }
    }
}
