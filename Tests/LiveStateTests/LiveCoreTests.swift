import DisplayRules
import LiveState
import LiveTopics
import Testing

/// The in-process path of one update, without a broker.
@Suite("Live core")
struct LiveCoreTests {
    static func ruleSet() throws -> RuleSet {
        RuleSet(rules: [
            Rule(
                name: "occupied", domain: "occupancy", condition: try CompiledExpression("nrOfPeople > 0", domain: "occupancy"),
                style: try StyleTemplate(Style([.polygonFillColor: .color(Color("#D64545")!)]), domain: "occupancy"), legend: "Occupied",
                priority: 0, order: 0)
        ])
    }

    static let topic = "ds1/hq/B/F3/R7/room-7/occupancy"

    var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    mutating func process(_ engine: LiveCore, _ topic: String, people: Int) -> LiveCore.Outcome {
        now.millisecondsSince1970 += 1
        return engine.process(topic: topic, payload: Array(#"{"properties":{"nrOfPeople":"\#(people)"}}"#.utf8), receivedAt: now)
    }

    @Test("a timestamp far ahead of the clock is refused, and later updates still apply")
    func futureTimestamps() throws {
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        let now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
        func send(_ timestamp: String, people: Int, at: LiveTimestamp = now) -> LiveCore.Outcome {
            core.process(
                topic: Self.topic, payload: Array(#"{"timestamp": \#(timestamp), "properties": {"nrOfPeople": "\#(people)"}}"#.utf8),
                receivedAt: at)
        }
        // A sensor with a broken clock, once.
        guard case .rejected(.futureTimestamp, let message) = send(#""9999-12-31T23:59:59Z""#, people: 5) else {
            Issue.record("a year-9999 timestamp was not refused")
            return
        }
        #expect(message.contains("limits.futureSkew"))
        #expect(core.counters.rejected[.futureTimestamp] == 1)
        // Every later update still applies: nothing from year 9999 was stored.
        guard case .changed = send("\(now.millisecondsSince1970 + 1)", people: 1) else {
            Issue.record("the next update did not apply")
            return
        }
        // Within the skew (5 minutes by default): accepted.
        guard case .changed = send("\(now.millisecondsSince1970 + 4 * 60_000)", people: 0) else {
            Issue.record("an update 4 minutes ahead was refused")
            return
        }
        let strict = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")], limits: LiveLimits(futureSkew: .zero))
        guard case .rejected(.futureTimestamp, _) = strict.process(
            topic: Self.topic, payload: Array(#"{"timestamp": \#(now.millisecondsSince1970 + 1), "properties": {}}"#.utf8),
            receivedAt: now)
        else {
            Issue.record("limits.futureSkew 0 let a later timestamp through")
            return
        }
    }

    @Test("each bound refuses with its own reason and counts it: locations, domains, properties, name and value length, payload size")
    func limits() throws {
        let limits = LiveLimits(payload: PayloadLimits(size: 4_096, properties: 8, nameLength: 16, valueLength: 32), locations: 3, domains: 2)
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")], limits: limits)
        let now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
        func send(_ location: String, _ domain: String = "occupancy", _ properties: String = #""nrOfPeople": "1""#) -> LiveCore.Outcome {
            core.process(topic: "ds1/v/b/f/r/\(location)/\(domain)", payload: Array(#"{"properties": {\#(properties)}}"#.utf8), receivedAt: now)
        }
        func reason(_ outcome: LiveCore.Outcome) -> LiveCore.RejectReason? {
            if case .rejected(let reason, _) = outcome { return reason }
            return nil
        }
        for location in ["a", "b", "c"] { #expect(reason(send(location)) == nil) }
        #expect(reason(send("d")) == .tooManyLocations)
        // A tracked one still takes updates.
        #expect(reason(send("a", "occupancy", #""nrOfPeople": "2""#)) == nil)
        #expect(reason(send("a", "co2", #""co2Level": "500""#)) == nil)
        #expect(reason(send("a", "humidity", #""relativeHumidity": "40""#)) == .tooManyDomains)
        // Its existing domains still update.
        #expect(reason(send("a", "co2", #""co2Level": "600""#)) == nil)
        let many = (0..<9).map { #""p\#($0)": "1""# }.joined(separator: ",")
        #expect(reason(send("b", "occupancy", many)) == .tooManyProperties)
        #expect(reason(send("b", "occupancy", #""\#(String(repeating: "n", count: 17))": "1""#)) == .propertyTooLong)
        #expect(reason(send("b", "occupancy", #""note": "\#(String(repeating: "v", count: 33))""#)) == .propertyTooLong)
        #expect(reason(send("b", "occupancy", #""note": "\#(String(repeating: "v", count: 4_100))""#)) == .oversize)
        // 5,000 names in one payload stop at the ninth: refused, not inserted one by one.
        let flood = (0..<5_000).map { #""n\#($0)": 1"# }.joined(separator: ",")
        let wide = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        guard case .rejected(.tooManyProperties, let message) = wide.process(
            topic: Self.topic, payload: Array(#"{"properties": {\#(flood)}}"#.utf8), receivedAt: now)
        else {
            Issue.record("5,000 properties were not refused")
            return
        }
        #expect(message.contains("limits.properties"))
        #expect(core.counters.rejected == [.tooManyLocations: 1, .tooManyDomains: 1, .tooManyProperties: 1, .propertyTooLong: 2, .oversize: 1])
    }

    @Test("a retained message without a timestamp only fills a value the location lacks; with one, the ordering rule decides")
    func retainedInput() throws {
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        let now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
        func send(_ people: Int, timestamp: Int64? = nil, retained: Bool) -> LiveCore.Outcome {
            let time = timestamp.map { #""timestamp": \#($0), "# } ?? ""
            return core.process(
                topic: Self.topic, payload: Array(#"{\#(time)"properties": {"nrOfPeople": "\#(people)"}}"#.utf8),
                receivedAt: now, retained: retained)
        }
        // Nothing known yet: the retained value fills the gap.
        guard case .changed = send(2, retained: true) else {
            Issue.record("a retained value did not fill an empty location")
            return
        }
        // Known now: the same retained message again (a re-subscription) changes nothing,
        // even with another value in it.
        #expect(send(0, retained: true) == .unchanged)
        #expect(core.counters.retainedNotNew == 1)
        #expect(core.store.records(id: "room-7").first?.values.first?.properties["nrOfPeople"] == "2")
        // A live update still applies, and a retained one with a later timestamp too.
        guard case .changed = send(0, retained: false) else {
            Issue.record("a live update after a retained one did not apply")
            return
        }
        guard case .changed = send(4, timestamp: now.millisecondsSince1970 + 10, retained: true) else {
            Issue.record("a retained update with a later timestamp did not apply")
            return
        }
        #expect(send(1, timestamp: now.millisecondsSince1970 + 5, retained: true) == .ignoredOutOfOrder)
    }

    @Test("a topic accepted before is checked again against reloaded subscriptions")
    mutating func reloadedSubscriptions() throws {
        let occupancy = try TopicCriteria(dataset: "ds1", domain: "occupancy")
        let engine = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [occupancy])
        #expect(process(engine, Self.topic, people: 1) != .notSubscribed)
        #expect(process(engine, Self.topic, people: 0) != .notSubscribed)
        // The location and its occupancy value are known: only the subscriptions changed.
        _ = engine.reload(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds2")], now: now)
        #expect(process(engine, Self.topic, people: 2) == .notSubscribed)
        #expect(engine.counters.notSubscribed == 1)
        _ = engine.reload(ruleSet: try Self.ruleSet(), subscriptions: [occupancy], now: now)
        #expect(process(engine, Self.topic, people: 3) != .notSubscribed)
        #expect(engine.store.counters.applied == 3)
    }

    @Test("a tracked location's topics are still refused when they are not valid topic names")
    mutating func invalidTopicsOfTrackedLocations() throws {
        let engine = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        #expect(process(engine, Self.topic, people: 1) != .notSubscribed)
        for topic in ["ds1/hq/B/F3/R7/room-7/+", "ds1/hq/B/F3/R7/room-7/occ\u{0}upancy"] {
            guard case .rejected(.badTopic, _) = process(engine, topic, people: 1) else {
                Issue.record("\(topic.debugDescription) was not refused")
                continue
            }
        }
        // A domain the location has no value for yet goes through the index.
        #expect(process(engine, "ds1/hq/B/F3/R7/room-7/co2", people: 1) != .notSubscribed)
        #expect(process(engine, "ds2/hq/B/F3/R7/room-7/occupancy", people: 1) == .notSubscribed)
    }

    @Test("what is wrong with the topic is told before what is wrong with the payload")
    mutating func topicFaultsComeFirst() throws {
        let engine = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        #expect(process(engine, Self.topic, people: 1) != .notSubscribed)
        func send(_ topic: String, _ payload: String) -> LiveCore.Outcome {
            now.millisecondsSince1970 += 1
            return engine.process(topic: topic, payload: Array(payload.utf8), receivedAt: now)
        }
        // Tracked and untracked locations, valid and invalid topics, each with a payload
        // that is not JSON.
        #expect(send("ds2/hq/B/F3/R7/room-7/occupancy", "{nope") == .notSubscribed)
        #expect(send("ds2/hq/B/F3/R7/room-9/occupancy", "{nope") == .notSubscribed)
        #expect(send("ds1/hq/B", "{nope") == .notSubscribed)
        for topic in ["ds1/hq/B/F3/R7/room-7/+", "ds1/hq/B/F3/R7/room-9/#"] {
            guard case .rejected(.badTopic, _) = send(topic, "{nope") else {
                Issue.record("\(topic.debugDescription) was not refused for its topic")
                continue
            }
        }
        for topic in [Self.topic, "ds1/hq/B/F3/R7/room-9/occupancy"] {
            guard case .rejected(.badPayload, _) = send(topic, "{nope") else {
                Issue.record("the payload sent to \(topic.debugDescription) was not refused")
                continue
            }
        }
        #expect(engine.counters.notSubscribed == 3)
        #expect(engine.counters.rejected == [.badTopic: 2, .badPayload: 2])
        // Good updates after bad ones are applied as before.
        #expect(process(engine, Self.topic, people: 0) != .notSubscribed)
        #expect(engine.store.counters.applied == 2)
    }

    @Test("topics read as bytes: a new location's ASCII topic, a non-ASCII one and one of invalid UTF-8 each make one location, found again by their next update")
    mutating func topicBytes() throws {
        let engine = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        func send(_ topic: [UInt8], people: Int) -> LiveCore.Outcome {
            now.millisecondsSince1970 += 1
            let payload = Array(#"{"properties":{"nrOfPeople":"\#(people)"}}"#.utf8)
            return topic.withUnsafeBytes { topic in
                payload.withUnsafeBytes { engine.process(topicBytes: topic, payload: $0, receivedAt: now) }
            }
        }
        let topics: [[UInt8]] = [
            Array("ds1/hq/B/F3/R7/room-7/occupancy".utf8),
            Array("ds1/hq/B/F3/R7/café/occupancy".utf8),
            // Not UTF-8 (a lone continuation byte): read as the string it decodes to, with
            // the replacement character, as a string made of it would be.
            Array("ds1/hq/B/F3/R7/room-".utf8) + [0x80] + Array("/occupancy".utf8),
        ]
        for topic in topics {
            guard case .changed(let change) = send(topic, people: 1) else {
                Issue.record("the first update of \(String(decoding: topic, as: UTF8.self)) changed nothing")
                continue
            }
            #expect(change.address.path + "/occupancy" == String(decoding: topic, as: UTF8.self))
            guard case .changed(let again) = send(topic, people: 0) else {
                Issue.record("the second update of \(String(decoding: topic, as: UTF8.self)) changed nothing")
                continue
            }
            #expect(again.address == change.address)
            #expect(again.version == change.version + 1)
        }
        #expect(engine.store.count == 3)
        #expect(engine.store.records.map(\.address.location).sorted() == ["café", "room-7", "room-\u{FFFD}"])
        // Refusals name what is wrong with the bytes as with a string.
        guard case .rejected(.badTopic, _) = send(Array("ds1/hq/B/F3/R7/room-7/+".utf8), people: 1) else {
            Issue.record("a topic with a wildcard was not refused")
            return
        }
        #expect(send(Array("ds1/hq/B/F3/R7".utf8), people: 1) == .notSubscribed)
        #expect(engine.store.count == 3)
    }
}
