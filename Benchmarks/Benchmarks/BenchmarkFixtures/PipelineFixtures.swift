import DisplayRules
import LiveTopics

/// A venue of `locations` locations, 50 display rules over four domains, and a stream of
/// occupancy, availability, CO2 and temperature updates for random locations.
public enum PipelineFixtures {
    /// 50 rules: occupancy bands and thresholds, desk availability, CO2 and temperature
    /// levels, a few scoped to buildings or floors.
    public static func ruleSet() -> RuleSet {
        var rules: [Rule] = []
        func add(_ name: String, _ domain: String, _ condition: String, _ style: Style, priority: Int, scope: TopicCriteria? = nil) {
            rules.append(
                Rule(
                    name: name, domain: domain, condition: try! CompiledExpression(condition, domain: domain), scope: scope,
                    style: try! StyleTemplate(style, domain: domain), legend: name, layer: domain, priority: priority,
                    order: rules.count))
        }
        add("vacant", "occupancy", "nrOfPeople == 0", Style(polygonFillColor: Color("#4CAF50")), priority: 10)
        add("occupied", "occupancy", "nrOfPeople > 0", Style(label: "{nrOfPeople}/{capacity}", polygonFillColor: Color("#D64545")), priority: 10)
        for band in 1...18 {
            let low = Double(band) / 20
            add(
                "band-\(band)", "occupancy", "nrOfPeople / capacity >= \(low) and nrOfPeople / capacity < \(low + 0.05)",
                Style(polygonFillOpacity: 0.3 + low / 2), priority: 20 + band)
        }
        for people in stride(from: 2, through: 10, by: 2) {
            add("at-least-\(people)", "occupancy", "nrOfPeople >= \(people)", Style(iconSize: Double(16 + people)), priority: 15)
        }
        add("full", "occupancy", "nrOfPeople >= capacity", Style(badge: Badge(text: "full", backgroundColor: Color("#000000"))), priority: 50)
        add("crowded-b0", "occupancy", "nrOfPeople > 6", Style(icon: "crowded.svg"), priority: 40, scope: try! TopicCriteria(building: "b0"))
        add("booked-empty", "availability", "available == \"false\" and occupancy.nrOfPeople == 0", Style(badge: Badge(text: "no-show")), priority: 60)
        add("desk-free", "availability", "available == \"true\"", Style(polygonFillColor: Color("#2E7D32")), priority: 5)
        add("desk-booked", "availability", "available == \"false\"", Style(polygonFillColor: Color("#F9A825")), priority: 5)
        for level in 0..<8 {
            let from = 600 + level * 150
            add("co2-\(level)", "co2", "co2Level >= \(from) and co2Level < \(from + 150)", Style(polygonStrokeWidth: Double(level + 1)), priority: 30)
        }
        add("stuffy", "co2", "exists(co2Level) and co2Level > 1000", Style(polygonStrokeColor: Color("#FF6F00"), badge: Badge(text: "CO2 {co2Level}")), priority: 70)
        for level in 0..<10 {
            let from = 16 + level
            add("temp-\(level)", "temperature", "temperature >= \(from) and temperature < \(from + 1)", Style(displayRank: level), priority: 25)
        }
        add("too-warm", "temperature", "temperature > 26", Style(polygonStrokeColor: Color("#E65100")), priority: 80, scope: try! TopicCriteria(floor: "f1"))
        precondition(rules.count == 50, "the benchmark promises 50 rules, has \(rules.count)")
        return RuleSet(
            main: try! StyleTemplate(Style(visible: true, zoomFrom: 16, zoomTo: 22, polygonFillColor: Color("#E0E0E0")), domain: nil),
            rules: rules, domains: ["occupancy": DomainSettings(staleAfter: .seconds(900))])
    }

    public static let subscriptions: [TopicCriteria] = [
        try! TopicCriteria(dataset: "ds1", domain: "occupancy"), try! TopicCriteria(dataset: "ds1", domain: "availability"),
        try! TopicCriteria(dataset: "ds1", domain: "co2"), try! TopicCriteria(dataset: "ds1", domain: "temperature"),
    ]

    /// The topic of location `number` (of 4 buildings × 10 floors × 25 rooms × N locations).
    public static func topic(_ number: Int, domain: String) -> String {
        "ds1/hq/b\(number % 4)/f\(number / 4 % 10)/r\(number / 40 % 25)/loc-\(number)/\(domain)"
    }

    /// `count` updates spread over `locations` locations: mostly occupancy, some of each other domain.
    public static func updates(count: Int, locations: Int, seed: UInt64 = 11) -> [(topic: String, payload: [UInt8])] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let location = Int(random.next() % UInt64(locations))
            switch random.next() % 10 {
            case 0..<6:
                let capacity = 4 + Int(random.next() % 8)
                let people = Int(random.next() % UInt64(capacity + 2))
                return (topic(location, domain: "occupancy"), Array(#"{"id":"loc-\#(location)","properties":{"nrOfPeople":"\#(people)","capacity":"\#(capacity)"}}"#.utf8))
            case 6, 7:
                return (topic(location, domain: "availability"), Array(#"{"properties":{"available":"\#(random.next() % 2 == 0)"}}"#.utf8))
            case 8:
                return (topic(location, domain: "co2"), Array(#"{"properties":{"co2Level":"\#(500 + random.next() % 900)"}}"#.utf8))
            default:
                return (topic(location, domain: "temperature"), Array(#"{"properties":{"temperature":"\#(17 + Double(random.next() % 100) / 10)"}}"#.utf8))
            }
        }
    }
}
