import Dispatch
import LiveTopics
import Testing

@testable import LiveDataServer

/// The hand-off from the network thread to the pipeline, without a broker.
@Suite("Intake queue")
struct IntakeQueueTests {
    static func messages(_ range: Range<Int>) -> [IntakeMessage] {
        range.map { IntakeMessage(topic: "ds1/hq/B/F1/R1/loc-\($0)/occupancy", payload: Array("{\"n\": \($0)}".utf8)) }
    }

    @Test("a pass moved into an empty queue comes out whole, in order; what follows while it waits goes behind it")
    func moving() async throws {
        let queue = IntakeQueue(capacity: 100, byteCapacity: 1 << 20)
        var pass = Self.messages(0..<10)
        #expect(queue.push(moving: &pass))
        #expect(pass.isEmpty)
        var next = Self.messages(10..<15)
        #expect(queue.push(moving: &next))
        #expect(next.isEmpty)
        #expect(queue.statistics.depth == 15)
        let batch = try #require(await queue.next())
        #expect(batch.map(\.topic) == Self.messages(0..<15).map(\.topic))
        #expect(batch.map(\.payload) == Self.messages(0..<15).map(\.payload))
        #expect(queue.statistics.depth == 0)
        #expect(queue.statistics.peak == 15)
        queue.recycle(batch)
        // Storage given back is reused, and an empty pass hands over nothing.
        var empty: [IntakeMessage] = []
        #expect(queue.push(moving: &empty))
        var last = Self.messages(15..<16)
        #expect(queue.push(moving: &last))
        #expect(try #require(await queue.next()).map(\.topic) == Self.messages(15..<16).map(\.topic))
    }

    @Test("a consumer that asks for fewer than the batch limit gets at most that many, in order, whether they waited or it did")
    func limitedBatches() async throws {
        let queue = IntakeQueue(capacity: 100, byteCapacity: 1 << 20, batchLimit: 8)
        var pass = Self.messages(0..<20)
        #expect(queue.push(moving: &pass))
        var topics: [String] = []
        for (limit, expected) in [(3, 3), (3, 3), (Int.max, 8), (Int.max, 6)] {
            let batch = try #require(await queue.next(limit: limit))
            #expect(batch.count == expected)
            topics += batch.map(\.topic)
        }
        #expect(topics == Self.messages(0..<20).map(\.topic))
        // A consumer waiting with a limit when a pass arrives takes that many of it.
        let waiting = Task { await queue.next(limit: 2) }
        while !queue.isConsumerWaiting { await Task.yield() }
        var later = Self.messages(20..<25)
        #expect(queue.push(moving: &later))
        #expect(try #require(await waiting.value).map(\.topic) == Self.messages(20..<22).map(\.topic))
        #expect(try #require(await queue.next()).map(\.topic) == Self.messages(22..<25).map(\.topic))
    }

    @Test("batches taken from the front of a long queue, with passes arriving between them, come out in order, each message once, the depth and the room counted right")
    func longQueueInBatches() async throws {
        let queue = IntakeQueue(capacity: 40, byteCapacity: 1 << 20, batchLimit: 8)
        var sent = 0
        var received: [String] = []
        // Passes of 5 and 11 between takes of 8: the queue's front moves many times, and
        // is dropped once it is half the array, while passes land behind what waits.
        for round in 0..<30 {
            let count = round % 2 == 0 ? 5 : 11
            var pass = Self.messages(sent..<(sent + count))
            #expect(queue.push(moving: &pass) || pass.isEmpty)
            if !pass.isEmpty { #expect(queue.push(contentsOf: pass)) }
            sent += count
            let batch = try #require(await queue.next())
            #expect(batch.count <= 8)
            received += batch.map(\.topic)
            #expect(queue.statistics.depth == sent - received.count)
        }
        while queue.statistics.depth > 0 { received += try #require(await queue.next()).map(\.topic) }
        #expect(received == Self.messages(0..<sent).map(\.topic))
        // The bytes left count nothing taken: a full queue's worth fits again.
        #expect(queue.push(contentsOf: Self.messages(sent..<(sent + 40))))
        #expect(queue.statistics.depth == 40)
    }

    @Test("a pass larger than the queue's bounds goes in as it fits, as push(contentsOf:) does it")
    func overBounds() async throws {
        let queue = IntakeQueue(capacity: 4, byteCapacity: 1 << 20)
        let consumer = Task {
            var topics: [String] = []
            while topics.count < 10, let batch = await queue.next() {
                #expect(batch.count <= 4)
                topics += batch.map(\.topic)
            }
            return topics
        }
        // The network thread's side (a thread of its own): waits for room while the queue is full.
        let (taken, emptied) = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var pass = Self.messages(0..<10)
                let taken = queue.push(moving: &pass)
                continuation.resume(returning: (taken, pass.isEmpty))
            }
        }
        #expect(taken && emptied)
        #expect(await consumer.value == Self.messages(0..<10).map(\.topic))
    }

    @Test("a closed queue takes nothing")
    func closed() {
        let queue = IntakeQueue(capacity: 100, byteCapacity: 1 << 20)
        queue.close()
        var pass = Self.messages(0..<3)
        #expect(!queue.push(moving: &pass))
        #expect(pass.count == 3)
    }
}
