import DisplayRules
import LiveState
import LiveTopics

/// A venue of `locations` locations, 50 display rules over four domains, and a stream of
/// occupancy, availability, CO2 and temperature updates for random locations.
public enum PipelineFixtures {
    /// 50 rules over seven domains, as a building operator would write them: occupancy
    /// states and thresholds, desk availability (one rule reading occupancy too), CO2,
    /// temperature and humidity bands, people counters and asset positions; some scoped to a
    /// building or floor, labels and badges with templates.
    public static func ruleSet() -> RuleSet {
        var rules: [Rule] = []
        func add(_ name: String, _ domain: String, _ condition: String, _ style: Style, priority: Int, scope: TopicCriteria? = nil) {
            rules.append(
                Rule(
                    name: name, domain: domain, condition: try! CompiledExpression(condition, domain: domain), scope: scope,
                    style: try! StyleTemplate(style, domain: domain), legend: name, layer: domain, priority: priority,
                    order: rules.count))
        }
        // Occupancy: 12.
        add("vacant", "occupancy", "nrOfPeople == 0", Style([.polygonFillColor: .color(Color("#4CAF50")!)]), priority: 10)
        add("occupied", "occupancy", "nrOfPeople > 0", Style([.label: .text("{nrOfPeople}/{capacity}"), .polygonFillColor: .color(Color("#D64545")!)]), priority: 10)
        add("small-group", "occupancy", "nrOfPeople > 0 and nrOfPeople <= 2", Style([.polygonFillOpacity: .number(0.4)]), priority: 15)
        add("meeting", "occupancy", "nrOfPeople > 2 and nrOfPeople <= 6", Style([.polygonFillOpacity: .number(0.6)]), priority: 15)
        add("crowd", "occupancy", "nrOfPeople > 6", Style([.polygonFillOpacity: .number(0.8)]), priority: 15)
        add("nearly-full", "occupancy", "nrOfPeople / capacity >= 0.8", Style([.polygonFillColor: .color(Color("#8E0000")!)]), priority: 20)
        add("full", "occupancy", "nrOfPeople >= capacity", Style([.badge: .badge(Badge(text: "full", backgroundColor: Color("#000000")))]), priority: 30)
        add("over-capacity", "occupancy", "nrOfPeople > capacity", Style([.badge: .badge(Badge(text: "{nrOfPeople}/{capacity}!", backgroundColor: Color("#FF0000")))]), priority: 40)
        for building in 0..<4 {
            add("busy-b\(building)", "occupancy", "nrOfPeople >= 5", Style([.icon: .text("busy-\(building).svg")]), priority: 25, scope: try! TopicCriteria(building: "b\(building)"))
        }
        // Availability: 6.
        add("desk-free", "availability", "available == \"true\"", Style([.polygonFillColor: .color(Color("#2E7D32")!)]), priority: 5)
        add("desk-booked", "availability", "available == \"false\"", Style([.polygonFillColor: .color(Color("#F9A825")!)]), priority: 5)
        add("booked-empty", "availability", "available == \"false\" and occupancy.nrOfPeople == 0", Style([.badge: .badge(Badge(text: "no-show"))]), priority: 60)
        add("desk-pending", "availability", "available == \"pending\"", Style([.polygonFillColor: .color(Color("#90CAF9")!)]), priority: 6)
        add("desk-disabled", "availability", "available == \"disabled\"", Style([.visible: .flag(false)]), priority: 90)
        add("quiet-floor-free", "availability", "available", Style([.icon: .text("quiet.svg")]), priority: 7, scope: try! TopicCriteria(floor: "f0"))
        // CO2: 8.
        for band in 0..<5 {
            let from = 600 + band * 150
            add("co2-\(band)", "co2", "co2Level >= \(from) and co2Level < \(from + 150)", Style([.polygonStrokeWidth: .number(Double(band + 1))]), priority: 30)
        }
        add("co2-high", "co2", "co2Level >= 1350", Style([.polygonStrokeWidth: .number(8)]), priority: 30)
        add("stuffy", "co2", "exists(co2Level) and co2Level > 1000", Style([.polygonStrokeColor: .color(Color("#FF6F00")!), .badge: .badge(Badge(text: "CO2 {co2Level}"))]), priority: 70)
        add("stuffy-f1", "co2", "co2Level > 900", Style([.polygonStrokeColor: .color(Color("#E65100")!)]), priority: 71, scope: try! TopicCriteria(floor: "f1"))
        // Temperature: 8.
        add("cold", "temperature", "temperature < 18", Style([.polygonStrokeColor: .color(Color("#1565C0")!)]), priority: 35)
        add("cool", "temperature", "temperature >= 18 and temperature < 20", Style([.displayRank: .integer(1)]), priority: 35)
        add("comfortable", "temperature", "temperature >= 20 and temperature < 24", Style([.displayRank: .integer(2)]), priority: 35)
        add("warm", "temperature", "temperature >= 24 and temperature <= 26", Style([.displayRank: .integer(3)]), priority: 35)
        add("hot", "temperature", "temperature > 26", Style([.polygonStrokeColor: .color(Color("#E65100")!)]), priority: 35)
        add("hot-and-busy", "temperature", "temperature > 25 and occupancy.nrOfPeople > 4", Style([.badge: .badge(Badge(text: "{temperature}°"))]), priority: 75)
        add("server-room", "temperature", "temperature > 22", Style([.icon: .text("server.svg")]), priority: 36, scope: try! TopicCriteria(floor: "f2"))
        add("freezing", "temperature", "temperature < 12", Style([.badge: .badge(Badge(text: "cold"))]), priority: 80)
        // Humidity: 6.
        add("dry", "humidity", "relativeHumidity < 30", Style([.iconSize: .number(20)]), priority: 20)
        add("humidity-ok", "humidity", "relativeHumidity >= 30 and relativeHumidity <= 60", Style([.iconSize: .number(16)]), priority: 20)
        add("humid", "humidity", "relativeHumidity > 60 and relativeHumidity <= 70", Style([.iconSize: .number(22)]), priority: 20)
        add("wet", "humidity", "relativeHumidity > 70", Style([.badge: .badge(Badge(text: "{relativeHumidity}%"))]), priority: 50)
        add("mould-risk", "humidity", "relativeHumidity > 65 and temperature.temperature > 22", Style([.polygonStrokeColor: .color(Color("#6D4C41")!)]), priority: 55)
        add("lab-humidity", "humidity", "relativeHumidity > 50", Style([.icon: .text("lab.svg")]), priority: 21, scope: try! TopicCriteria(building: "b3"))
        // Counters: 5.
        add("count-zero", "count", "count == 0", Style([.labelVisible: .flag(false)]), priority: 10)
        add("count-some", "count", "count > 0", Style([.label: .text("{count}"), .labelVisible: .flag(true)]), priority: 10)
        add("count-10", "count", "count > 10", Style([.iconSize: .number(24)]), priority: 11)
        add("count-50", "count", "count > 50", Style([.iconSize: .number(28)]), priority: 12)
        add("count-100", "count", "count > 100", Style([.badge: .badge(Badge(text: "100+"))]), priority: 13)
        // Positions: 5.
        add("on-floor-0", "position", "floorIndex == 0", Style([.displayRank: .integer(10)]), priority: 10)
        add("on-floor-1", "position", "floorIndex == 1", Style([.displayRank: .integer(11)]), priority: 10)
        add("upper-floors", "position", "floorIndex > 1", Style([.displayRank: .integer(12)]), priority: 10)
        add("located", "position", "exists(latitude) and exists(longitude)", Style([.iconVisible: .flag(true)]), priority: 5)
        add("lost", "position", "not exists(latitude)", Style([.iconVisible: .flag(false), .badge: .badge(Badge(text: "?"))]), priority: 90)
        precondition(rules.count == 50, "the benchmark promises 50 rules, has \(rules.count)")
        return RuleSet(
            main: try! StyleTemplate(Style([.visible: .flag(true), .zoomFrom: .number(16), .zoomTo: .number(22), .polygonFillColor: .color(Color("#E0E0E0")!)]), domain: nil),
            rules: rules, domains: ["occupancy": DomainSettings(staleAfter: .seconds(900)), "position": DomainSettings(staleAfter: .seconds(120))])
    }

    public static let subscriptions: [TopicCriteria] =
        ["occupancy", "availability", "co2", "temperature", "humidity", "count", "position"].map {
            try! TopicCriteria(dataset: "ds1", domain: $0)
        }

    /// The topic of location `number` (of 4 buildings × 10 floors × 25 rooms × N locations).
    public static func topic(_ number: Int, domain: String) -> String {
        "ds1/hq/b\(number % 4)/f\(number / 4 % 10)/r\(number / 40 % 25)/loc-\(number)/\(domain)"
    }

    /// `count` updates spread over `locations` locations: 40 % occupancy, 20 % availability,
    /// 10 % each CO2, temperature and humidity, 5 % each counters and positions.
    public static func updates(count: Int, locations: Int, seed: UInt64 = 11) -> [(topic: String, payload: [UInt8])] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let location = Int(random.next() % UInt64(locations))
            let roll = random.next() % 20
            func update(_ domain: String, _ properties: String) -> (String, [UInt8]) {
                (topic(location, domain: domain), Array(#"{"id":"loc-\#(location)","properties":{\#(properties)}}"#.utf8))
            }
            switch roll {
            case 0..<8:
                let capacity = 4 + Int(random.next() % 8)
                let people = Int(random.next() % UInt64(capacity + 2))
                return update("occupancy", #""nrOfPeople":"\#(people)","capacity":"\#(capacity)""#)
            case 8..<12:
                return update("availability", #""available":"\#(random.next() % 2 == 0)""#)
            case 12, 13:
                return update("co2", #""co2Level":"\#(500 + random.next() % 1000)""#)
            case 14, 15:
                return update("temperature", #""temperature":"\#(15 + Double(random.next() % 140) / 10)""#)
            case 16, 17:
                return update("humidity", #""relativeHumidity":"\#(20 + random.next() % 60)""#)
            case 18:
                return update("count", #""count":"\#(random.next() % 150)""#)
            default:
                return update(
                    "position",
                    #""latitude":"55.6\#(random.next() % 1000)","longitude":"12.5\#(random.next() % 1000)","floorIndex":"\#(random.next() % 4)""#)
            }
        }
    }

    /// An engine tracking `count` locations, each with one occupancy value.
    public static func filledEngine(_ count: Int) -> LiveCore {
        let engine = LiveCore(ruleSet: ruleSet(), subscriptions: subscriptions)
        var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
        for number in 0..<count {
            now.millisecondsSince1970 += 1
            let payload = Array(#"{"properties":{"nrOfPeople":"\#(number % 9)","capacity":"8"}}"#.utf8)
            _ = engine.process(topic: topic(number, domain: "occupancy"), payload: payload, receivedAt: now)
        }
        return engine
    }
}

/// What the daemon publishes for the pipeline's updates: the derived changes, and each
/// change's new style with the one it replaces at its location.
public struct PublicationFixtures: Sendable {
    /// The changes of the measured stream, in order.
    public let changes: [DerivedChange]
    /// Each change's new style and the location's style before it (empty the first time).
    public let styles: [(new: Style, old: Style)]

    /// The pipeline's venue of `locations` locations, each warmed up with `warmUp` updates,
    /// then `updates` more: the changes these make (about four in five updates make one).
    public init(locations: Int, warmUp: Int = 20, updates: Int) {
        let engine = LiveCore(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
        var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
        var last: [LocationAddress: Style] = [:]
        var changes: [DerivedChange] = []
        var styles: [(new: Style, old: Style)] = []
        for (index, update) in PipelineFixtures.updates(count: locations * warmUp + updates, locations: locations, seed: 3).enumerated() {
            now.millisecondsSince1970 += 1
            guard case .changed(let change) = engine.process(topic: update.topic, payload: update.payload, receivedAt: now) else { continue }
            let style = change.style
            let old = last.updateValue(style, forKey: change.address) ?? Style()
            guard index >= locations * warmUp else { continue }
            changes.append(change)
            styles.append((style, old))
        }
        self.changes = changes
        self.styles = styles
    }
}
