import Dispatch
import Foundation
import LiveState
import Synchronization

extension StateDatabase {
    /// Reads every stored location of the file at `path` on a thread of its own, in batches,
    /// turns each into what `body` needs with `prepare` (on that thread too), and hands the
    /// batches to `body` on the calling thread: reading and preparing one batch overlaps
    /// with using the one before, which on two cores takes about half the time of doing both
    /// in turn.
    /// - Returns: how many records could not be decoded (and were skipped).
    /// - Throws: ``Failure`` when the file cannot be opened or read.
    @discardableResult
    public static func readAll<Prepared: Sendable>(
        path: String, batchSize: Int = 8192, preparing prepare: @escaping @Sendable (LocationRow) -> Prepared,
        _ body: ([Prepared]) -> Void
    ) throws(Failure) -> Int {
        let channel = BatchChannel<Prepared>(capacity: 4)
        let reader = Thread {
            do {
                let database = try StateDatabase(path: path)
                var batch: [Prepared] = []
                batch.reserveCapacity(batchSize)
                let unreadable = try database.forEachRecord { row in
                    batch.append(prepare(row))
                    if batch.count == batchSize {
                        channel.send(batch)
                        batch = channel.takeEmptied() ?? []
                        batch.reserveCapacity(batchSize)
                    }
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
        while var batch = channel.receive() {
            body(batch)
            batch.removeAll(keepingCapacity: true)
            channel.giveBack(batch)
        }
        let (unreadable, failure) = channel.result
        if let failure { throw failure }
        return unreadable
    }
}

/// A bounded queue of batches from one reading thread to one consumer.
private final class BatchChannel<Batch: Sendable>: Sendable {
    private struct State {
        var batches: [[Batch]] = []
        var emptied: [[Batch]] = []
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

    func send(_ batch: [Batch]) {
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
    func giveBack(_ batch: [Batch]) {
        state.withLock { $0.emptied.append(batch) }
    }

    /// Storage given back by the consumer, if any.
    func takeEmptied() -> [Batch]? {
        state.withLock { $0.emptied.popLast() }
    }

    /// The next batch, or `nil` when the reader is done.
    func receive() -> [Batch]? {
        while true {
            available.wait()
            let (batch, finished) = state.withLock { state -> ([Batch]?, Bool) in
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
