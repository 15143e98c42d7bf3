import DisplayRules
import LiveState
import LiveTopics
import Testing

/// What the convergence makes of the retained styles a read returns, read from their bytes.
@Suite("Convergence")
struct ConvergenceTests {
    static let now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    @Test("a retained style that is the state's agrees, an older one is published again, one at a place the state does not hold is cleared: ASCII and other topics alike")
    func verdicts() throws {
        let core = LiveCore(ruleSet: try LiveCoreTests.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        let topics = OutputFormat(prefix: "livedata")
        var published: [String: [UInt8]] = [:]
        for location in ["room-7", "café"] {
            let outcome = core.process(
                topic: "ds1/hq/B/F3/R7/\(location)/occupancy", payload: Array(#"{"properties":{"nrOfPeople":"2"}}"#.utf8), receivedAt: Self.now)
            guard case .changed(let change) = outcome else {
                Issue.record("\(location): no change")
                continue
            }
            published[topics.style(change.address)] = topics.payload(change)
        }
        #expect(published.count == 2)
        var convergence = Convergence(core: core, topics: topics)
        for (topic, payload) in published {
            let items = topic.utf8.withContiguousStorageIfAvailable { topicBytes in
                payload.withUnsafeBytes { convergence.retained(topicBytes: UnsafeRawBufferPointer(topicBytes), payload: $0, now: Self.now) }
            }
            #expect(items?.isEmpty == true, "\(topic) did not agree")
        }
        #expect(convergence.counts.agreed == 2)
        // An older version of the first: published again, above it.
        let older = String(decoding: published["livedata/style/ds1/hq/B/F3/R7/room-7"]!, as: UTF8.self)
            .replacingOccurrences(of: #""version": 1"#, with: #""version": 0"#)
        #expect(older.contains(#""version": 0"#))
        let again = convergence.retained(topic: "livedata/style/ds1/hq/B/F3/R7/room-7", payload: Array(older.utf8), now: Self.now)
        guard case .change(let change)? = again.first else {
            Issue.record("an older retained style was not published again: \(again)")
            return
        }
        #expect(change.version == 2)
        // Places the state does not hold, ASCII or not: cleared at their own topics.
        for topic in ["livedata/style/ds1/hq/B/F3/R7/gone", "livedata/style/ds1/hq/B/F3/R7/gône"] {
            let items = convergence.retained(topic: topic, payload: published.values.first!, now: Self.now)
            guard case .publication(let clearing)? = items.first else {
                Issue.record("\(topic) was not cleared: \(items)")
                continue
            }
            #expect(clearing.topic == topic && clearing.payload.isEmpty && clearing.retain)
        }
        // Not a location's path: neither cleared nor counted as agreeing.
        #expect(convergence.retained(topic: "livedata/style/ds1/hq/B", payload: published.values.first!, now: Self.now).isEmpty)
        #expect(convergence.counts.cleared == 2)
        #expect(convergence.counts.styles == 6)
    }
}
