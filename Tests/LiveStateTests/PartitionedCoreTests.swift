import DisplayRules
import LiveState
import LiveTopics
import Testing

/// A daemon that owns a partition takes only its places' updates, and converges only them.
@Suite("Partitioned core")
struct PartitionedCoreTests {
    static let partition = Partition(name: "east", shares: [try! Partition.Share(dataset: "ds1", venue: "hq", building: "A")])

    static func core() throws -> LiveCore {
        let ruleSet = RuleSet(
            rules: [
                Rule(
                    name: "occupied", domain: "occupancy", condition: try CompiledExpression("nrOfPeople > 0", domain: "occupancy"),
                    style: try StyleTemplate(Style([.polygonFillColor: .color(Color("#D64545")!)]), domain: "occupancy"), legend: "Occupied",
                    priority: 0, order: 0)
            ],
            domains: ["position": DomainSettings(staleAfter: .seconds(60), moves: true)])
        return LiveCore(ruleSet: ruleSet, subscriptions: [try TopicCriteria(dataset: "ds1")], partition: partition)
    }

    static let now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    static func send(_ core: LiveCore, _ topic: String, _ payload: String = #"{"properties":{"nrOfPeople":"2"}}"#, at offset: Int64 = 0)
        -> LiveCore.Outcome
    {
        core.process(topic: topic, payload: Array(payload.utf8), receivedAt: LiveTimestamp(millisecondsSince1970: now.millisecondsSince1970 + offset))
    }

    @Test("an update inside is taken; one outside is refused as outside_partition and counted, again and again, never taken")
    func refusal() throws {
        let core = try Self.core()
        guard case .changed = Self.send(core, "ds1/hq/A/F1/R1/room-1/occupancy") else {
            Issue.record("an update of the partition's building was not taken")
            return
        }
        for attempt in 1...3 {
            guard case .rejected(.outsidePartition, let message) = Self.send(core, "ds1/hq/B/F1/R1/room-9/occupancy", at: Int64(attempt)) else {
                Issue.record("an update of another building was not refused")
                return
            }
            #expect(message.contains("east"))
        }
        #expect(core.counters.rejected[.outsidePartition] == 3)
        #expect(core.store.count == 1)
        // Not subscribed at all stays what it was: another dataset is not the partition's business.
        #expect(Self.send(core, "ds9/hq/A/F1/R1/room-1/occupancy") == .notSubscribed)
    }

    @Test("a location never moves out of the partition: the move is refused and the location stays where it was")
    func moves() throws {
        let core = try Self.core()
        let position = #"{"properties":{"latitude":"55.1","longitude":"12.1","floorIndex":"1"}}"#
        guard case .changed = Self.send(core, "ds1/hq/A/F1/R1/asset-1/position", position) else {
            Issue.record("the asset's first position was not taken")
            return
        }
        guard case .rejected(.outsidePartition, _) = Self.send(core, "ds1/hq/B/F1/R1/asset-1/position", position, at: 10) else {
            Issue.record("a move into another partition's building was not refused")
            return
        }
        #expect(core.store.records(id: "asset-1").map(\.address.building) == ["A"])
        // Within the partition it still moves.
        guard case .changed(let change) = Self.send(core, "ds1/hq/A/F2/R1/asset-1/position", position, at: 20) else {
            Issue.record("a move within the partition was not taken")
            return
        }
        #expect(change.movedFrom?.floor == "F1")
    }

    @Test("convergence leaves another partition's retained styles and summaries alone, and clears its own strays")
    func convergence() throws {
        let core = try Self.core()
        _ = Self.send(core, "ds1/hq/A/F1/R1/room-1/occupancy")
        let topics = OutputFormat(prefix: "livedata")
        var convergence = Convergence(core: core, topics: topics)
        let foreignStyle = ##"{"style": {"polygonFillColor": "#D64545"}, "version": 4}"##
        #expect(convergence.retained(topic: "livedata/style/ds1/hq/B/F1/R1/room-9", payload: Array(foreignStyle.utf8), now: Self.now).isEmpty)
        #expect(convergence.retained(topic: "livedata/summary/ds1/hq/B/F1", payload: Array(#"{"locations": 1}"#.utf8), now: Self.now).isEmpty)
        // A stray of its own building (no location there) is cleared.
        let stray = convergence.retained(topic: "livedata/style/ds1/hq/A/F1/R1/gone", payload: Array(foreignStyle.utf8), now: Self.now)
        #expect(stray.count == 1)
        let finished = convergence.finish(now: Self.now, retainedLegends: ["livedata/legend/ds7"], datasets: ["ds1"])
        // Its building's and floor's summaries, then its own location; another dataset's legend is left alone.
        #expect(convergence.counts.othersLeft == 2)
        #expect(finished.count == 2)
        var republication = convergence.takeRepublication()
        #expect(republication.next(now: Self.now)?.address.location == "room-1")
        #expect(republication.next(now: Self.now) == nil)
        #expect(convergence.counts.cleared == 1)
    }
}
