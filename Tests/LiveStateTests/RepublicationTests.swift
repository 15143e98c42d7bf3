import DisplayRules
import LiveState
import LiveTopics
import Testing

/// The walk that publishes again, a few at a time, the styles a convergence's read did not see.
@Suite("Republication")
struct RepublicationTests {
    static let now = ConvergenceTests.now

    /// A core with `count` locations, each with a published style; their addresses.
    static func core(_ count: Int) throws -> (LiveCore, [LocationAddress]) {
        let core = LiveCore(ruleSet: try LiveCoreTests.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        var addresses: [LocationAddress] = []
        for index in 0..<count {
            let outcome = core.process(
                topic: "ds1/hq/B/F1/R1/loc-\(index)/occupancy", payload: Array(#"{"properties":{"nrOfPeople":"2"}}"#.utf8), receivedAt: now)
            guard case .changed(let change) = outcome else { throw Failure.noChange(index) }
            addresses.append(change.address)
        }
        return (core, addresses)
    }

    enum Failure: Error { case noChange(Int) }

    @Test("the walk yields each location the read did not see once, in order, under its next version; seen ones and ones published meanwhile are skipped")
    func walk() throws {
        let (core, addresses) = try Self.core(10)
        let topics = OutputFormat(prefix: "livedata")
        var convergence = Convergence(core: core, topics: topics)
        // The read returns the first two as the state has them.
        for address in addresses[0..<2] {
            guard let change = core.republication(at: address, now: Self.now) else { throw Failure.noChange(0) }
            #expect(convergence.retained(topic: topics.style(address), payload: topics.payload(change), now: Self.now).isEmpty)
        }
        #expect(convergence.counts.agreed == 2)
        #expect(convergence.finish(now: Self.now, retainedLegends: [], datasets: ["ds1"]).count == 2)  // floor and building summaries
        var walk = convergence.takeRepublication()
        #expect(walk.remaining == 10)
        // A live change of the last one goes out before the walk gets there.
        walk.published(addresses[9])
        var yielded: [LocationAddress] = []
        while let change = walk.next(now: Self.now) {
            #expect(change.isFirst)
            #expect(change.version == 2, "\(change.address): version \(change.version)")
            yielded.append(change.address)
        }
        #expect(yielded == Array(addresses[2..<9]))
        #expect(walk.remaining == 0 && walk.isFinished && walk.republished == 7)
        #expect(walk.next(now: Self.now) == nil)
    }

    @Test("a style the read found differing and left for later is published by the walk, not lost")
    func leftForLater() throws {
        let (core, addresses) = try Self.core(3)
        let topics = OutputFormat(prefix: "livedata")
        var convergence = Convergence(core: core, topics: topics)
        for address in addresses {
            guard let change = core.republication(at: address, now: Self.now) else { throw Failure.noChange(0) }
            var older = change
            older.version = 0
            let items = convergence.retained(topic: topics.style(address), payload: topics.payload(older), now: Self.now)
            guard case .change(let again)? = items.first else {
                Issue.record("\(address): an older retained style was not published again")
                continue
            }
            // The output was behind: this one waits for the walk.
            if address == addresses[1] { convergence.leaveForLater(again.address) }
        }
        #expect(convergence.counts.republished == 2)
        _ = convergence.finish(now: Self.now, retainedLegends: [], datasets: ["ds1"])
        var walk = convergence.takeRepublication()
        #expect(walk.next(now: Self.now)?.address == addresses[1])
        #expect(walk.next(now: Self.now) == nil)
    }
}
