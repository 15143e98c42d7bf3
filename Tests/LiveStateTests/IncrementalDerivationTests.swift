import DisplayRules
import LiveTopics
import LiveDataTestSupport
import Testing

@testable import LiveState

@Suite("Incremental derivation")
struct IncrementalDerivationTests {
    /// Rules that read their own domain, other domains, nothing domain-specific, and scopes;
    /// labels and badges that read their own domain and another.
    static func engine() throws -> RuleEngine {
        var rules: [Rule] = []
        func add(_ name: String, _ domain: String?, _ condition: String, _ style: Style, priority: Int, scope: TopicCriteria? = nil) throws {
            rules.append(
                Rule(
                    name: name, domain: domain, condition: try CompiledExpression(condition, domain: domain), scope: scope,
                    style: try StyleTemplate(style, domain: domain), legend: name, layer: domain, priority: priority,
                    order: rules.count))
        }
        try add("occupied", "occupancy", "nrOfPeople > 0", Style([.label: .text("{nrOfPeople}/{capacity}"), .polygonFillColor: .color(Color("#D64545")!)]), priority: 1)
        try add("full", "occupancy", "nrOfPeople >= capacity", Style([.badge: .badge(Badge(text: "full"))]), priority: 5)
        try add("booked-empty", "availability", "available == \"false\" and occupancy.nrOfPeople == 0", Style([.icon: .text("noshow.svg")]), priority: 9)
        try add("free", "availability", "available", Style([.label: .text("{occupancy.nrOfPeople} here"), .polygonFillColor: .color(Color("#00FF00")!)]), priority: 2)
        try add("hot-busy", "temperature", "temperature > 25 and occupancy.nrOfPeople > 2", Style([.badge: .badge(Badge(text: "{temperature}"))]), priority: 8)
        try add("stuffy", "co2", "co2Level > 1000", Style([.polygonStrokeWidth: .number(3)]), priority: 3, scope: try TopicCriteria(building: "b1"))
        try add("anything", nil, "exists(nrOfPeople) or exists(co2.co2Level)", Style([.displayRank: .integer(7)]), priority: 4)
        return RuleEngine(RuleSet(rules: rules, domains: ["co2": DomainSettings(staleAfter: .seconds(30))]))
    }

    @Test("after every update the style equals a full derivation from all values", arguments: [1, 2, 3])
    func matchesFullDerivation(seed: UInt64) throws {
        let engine = try Self.engine()
        let store = LiveStore(ruleEngine: engine)
        var random = SplitMix64(seed: seed)
        var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
        for step in 0..<3000 {
            now = now.adding(.milliseconds(Int64(random.next() % 3000)))
            // A location is its dataset and id: each stays in its building.
            let number = random.next() % 10
            let location = "loc-\(number)"
            let building = "b\(number % 2)"
            let topicPrefix = "ds1/hq/\(building)/f1/r1/\(location)"
            var update: LiveUpdate
            switch random.next() % 5 {
            case 0:
                update = LiveUpdate(topic: try LiveTopic(parsing: "\(topicPrefix)/occupancy"), timestamp: now, properties: ["nrOfPeople": "\(random.next() % 6)", "capacity": "4"])
            case 1:
                update = LiveUpdate(topic: try LiveTopic(parsing: "\(topicPrefix)/availability"), timestamp: now, properties: ["available": random.next() % 2 == 0 ? "true" : "false"])
            case 2:
                update = LiveUpdate(topic: try LiveTopic(parsing: "\(topicPrefix)/temperature"), timestamp: now, properties: ["temperature": "\(20 + random.next() % 10)"])
            case 3:
                update = LiveUpdate(topic: try LiveTopic(parsing: "\(topicPrefix)/co2"), timestamp: now, properties: ["co2Level": "\(800 + random.next() % 500)"])
            default:
                let domains = ["occupancy", "availability", "temperature", "co2"]
                update = LiveUpdate(topic: try LiveTopic(parsing: "\(topicPrefix)/\(domains[Int(random.next() % 4)])"), timestamp: now, properties: [:], isRemoval: true)
            }
            _ = store.apply(update, now: now)
            if step % 7 == 0 { _ = store.expire(now: now) }
            let address = LocationAddress(update.topic)
            let record = try #require(store[address])
            let full = engine.derive(address, values: LiveValues(domains: record.values))
            if let published = record.published {
                #expect(published.style == full.style, "step \(step)")
                #expect(published.rules == full.rules, "step \(step)")
            }
        }
    }
}
