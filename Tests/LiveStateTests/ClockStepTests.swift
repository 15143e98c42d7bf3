import DisplayRules
import LiveState
import LiveTopics
import Testing

/// A step of the daemon's wall clock: values stamped on receipt keep their age and their
/// order; values their senders stamped are left as they are.
@Suite("Clock steps")
struct ClockStepTests {
    static let start = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
    static let hour: Int64 = 3_600_000

    static func core(staleAfter: Duration = .seconds(60)) throws -> LiveCore {
        let rules = RuleSet(
            rules: [
                Rule(
                    name: "occupied", domain: "occupancy", condition: try CompiledExpression("nrOfPeople > 0", domain: "occupancy"),
                    style: try StyleTemplate(Style([.polygonFillColor: .color(Color("#D64545")!)]), domain: "occupancy"),
                    legend: "Occupied", priority: 0, order: 0)
            ],
            domains: ["occupancy": DomainSettings(staleAfter: staleAfter)])
        return LiveCore(ruleSet: rules, subscriptions: [try TopicCriteria(dataset: "ds1")])
    }

    static func at(_ offset: Int64) -> LiveTimestamp {
        LiveTimestamp(millisecondsSince1970: start.millisecondsSince1970 + offset)
    }

    static func send(_ core: LiveCore, _ location: String, people: Int, receivedAt: LiveTimestamp, timestamp: LiveTimestamp? = nil)
        -> LiveCore.Outcome
    {
        let stamp = timestamp.map { #""timestamp": \#($0.millisecondsSince1970), "# } ?? ""
        return core.process(
            topic: "ds1/hq/B/F3/R7/\(location)/occupancy",
            payload: Array(#"{\#(stamp)"properties": {"nrOfPeople": "\#(people)"}}"#.utf8), receivedAt: receivedAt)
    }

    static func people(_ core: LiveCore, _ location: String) -> String? {
        core.records.first { $0.address.location == location }?.values.first { $0.domain == "occupancy" && !$0.stale }?
            .properties["nrOfPeople"]
    }

    @Test("after a step back, updates without a timestamp still apply, in the order they arrive")
    func stepBackKeepsReceiptStampedUpdates() throws {
        let core = try Self.core()
        _ = Self.send(core, "room-1", people: 1, receivedAt: Self.at(0))
        // The clock goes back an hour: each later receipt time is older than the stored one.
        guard case .changed = Self.send(core, "room-1", people: 0, receivedAt: Self.at(-Self.hour + 1_000)) else {
            Issue.record("an update without a timestamp, received after a step back, was not applied")
            return
        }
        #expect(Self.people(core, "room-1") == "0")
        guard case .changed = Self.send(core, "room-1", people: 3, receivedAt: Self.at(-Self.hour + 2_000)) else {
            Issue.record("the next one was not applied")
            return
        }
        #expect(Self.people(core, "room-1") == "3")
        #expect(core.storeCounters.ignoredOutOfOrder == 0)
        // A sender's own timestamp is still judged by its time.
        _ = Self.send(core, "room-2", people: 1, receivedAt: Self.at(0), timestamp: Self.at(0))
        guard case .ignoredOutOfOrder = Self.send(core, "room-2", people: 0, receivedAt: Self.at(1_000), timestamp: Self.at(-1_000)) else {
            Issue.record("an update with an older timestamp of its own was applied")
            return
        }
        #expect(Self.people(core, "room-2") == "1")
    }

    @Test("a step forward moves receipt-stamped values with it: they expire when their time is up, not at once")
    func stepForwardKeepsAges() throws {
        let core = try Self.core(staleAfter: .seconds(60))
        _ = Self.send(core, "room-1", people: 1, receivedAt: Self.at(0))
        // The sender's clock and the daemon's agreed before the step.
        _ = Self.send(core, "room-2", people: 1, receivedAt: Self.at(0), timestamp: Self.at(0))
        #expect(core.clockStepped(by: Self.hour) == 1)
        // Ten seconds later on the new clock: the receipt-stamped value is ten seconds old.
        #expect(core.expire(now: Self.at(Self.hour + 10_000)).count == 1)
        #expect(Self.people(core, "room-1") == "1")
        #expect(Self.people(core, "room-2") == nil)
        #expect(core.records.first { $0.address.location == "room-1" }?.values.first?.timestamp == Self.at(Self.hour))
        // Its own time comes a minute after it arrived.
        #expect(core.expire(now: Self.at(Self.hour + 60_000)).count == 1)
        #expect(Self.people(core, "room-1") == nil)
    }

    @Test("a step back moves receipt-stamped values with it: they expire a minute after they arrived, not an hour later")
    func stepBackKeepsExpiry() throws {
        let core = try Self.core(staleAfter: .seconds(60))
        _ = Self.send(core, "room-1", people: 1, receivedAt: Self.at(0))
        #expect(core.clockStepped(by: -Self.hour) == 1)
        #expect(core.expire(now: Self.at(-Self.hour + 30_000)).isEmpty)
        #expect(Self.people(core, "room-1") == "1")
        #expect(core.expire(now: Self.at(-Self.hour + 60_000)).count == 1)
        #expect(Self.people(core, "room-1") == nil)
    }

    @Test("summaries keep coming after a step back of the clock")
    func summariesAfterStepBack() throws {
        let core = try Self.core()
        _ = Self.send(core, "room-1", people: 1, receivedAt: Self.at(0))
        #expect(!core.takeDueSummaries(now: Self.at(0)).isEmpty)
        _ = Self.send(core, "room-1", people: 0, receivedAt: Self.at(-Self.hour))
        #expect(!core.takeDueSummaries(now: Self.at(-Self.hour)).isEmpty, "a summary held back until the clock is where it was")
    }

    @Test("the watch tells a step from the clock running, and a slew from a step")
    func watch() {
        var watch = ClockStepWatch()
        let monotonic = MonotonicInstant(nanoseconds: 5_000_000_000)
        #expect(watch.step(wall: Self.at(0), monotonic: monotonic) == nil)
        #expect(watch.step(wall: Self.at(100), monotonic: monotonic + .milliseconds(100)) == nil)
        // Half a millisecond a second over an hour is a slew.
        #expect(watch.step(wall: Self.at(100 + Self.hour + 1_800), monotonic: monotonic + .milliseconds(100 + Self.hour)) == nil)
        let base = monotonic + .milliseconds(100 + Self.hour)
        let forward = watch.step(wall: Self.at(100 + 2 * Self.hour + 1_800 + 200), monotonic: base + .milliseconds(200))
        #expect(forward?.milliseconds == Self.hour)
        // What was received since the last reading (200 ms), on the stepped clock.
        #expect(forward?.stampedAfter == Self.at(100 + 2 * Self.hour + 1_800 - 100)...Self.at(100 + 2 * Self.hour + 1_800 + 300))
        #expect(watch.step(wall: Self.at(100 + Self.hour + 1_800 + 500), monotonic: base + .milliseconds(500))?.milliseconds == -Self.hour)
    }

    @Test("values received between a step and the look that sees it are on the stepped clock: they stay as they are")
    func receivedAfterTheStep() throws {
        let core = try Self.core(staleAfter: .seconds(60))
        _ = Self.send(core, "room-1", people: 1, receivedAt: Self.at(0))
        // The clock goes back an hour; room-2's update arrives 50 ms later, before the look.
        _ = Self.send(core, "room-2", people: 1, receivedAt: Self.at(-Self.hour + 50))
        #expect(core.clockStepped(by: -Self.hour, stampedAfter: Self.at(-Self.hour - 100)...Self.at(-Self.hour + 200)) == 1)
        #expect(core.records.first { $0.address.location == "room-2" }?.values.first?.timestamp == Self.at(-Self.hour + 50))
        #expect(core.records.first { $0.address.location == "room-1" }?.values.first?.timestamp == Self.at(-Self.hour))
        #expect(core.expire(now: Self.at(-Self.hour + 30_000)).isEmpty)
    }
}
