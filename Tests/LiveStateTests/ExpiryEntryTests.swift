import LiveTopics
import Testing

@testable import LiveState

@Suite("Expiry entries")
struct ExpiryEntryTests {
    @Test("an entry is 16 bytes and gives back its deadline and domain, before 1970 too; the queue pops them by deadline")
    func packed() throws {
        #expect(MemoryLayout<ExpiryQueue.Entry>.stride == 16)
        let state = try MovingLocationTests.oneLocation().state
        var queue = ExpiryQueue()
        let cases: [(Int64, Int32)] = [(1_763_720_000_123, 0), (-5, 63), (0, 7), (1_763_720_000_123, 5), (4_102_444_800_000, 1)]
        for (milliseconds, domain) in cases {
            let entry = ExpiryQueue.Entry(deadline: LiveTimestamp(millisecondsSince1970: milliseconds), location: state, domain: domain)
            #expect(entry.deadline.millisecondsSince1970 == milliseconds)
            #expect(entry.domain == domain)
            queue.push(entry)
        }
        let due = queue.popDue(LiveTimestamp(millisecondsSince1970: 2_000_000_000_000))
        #expect(due.map(\.deadline.millisecondsSince1970) == [-5, 0, 1_763_720_000_123, 1_763_720_000_123])
        #expect(queue.count == 1)
        queue.removeAll(keepingCapacity: true)
        #expect(queue.count == 0)
    }
}
