import DisplayRules
import LiveTopics
import Testing

@Suite("Rule engine")
struct RuleEngineTests {
    let room = LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: "room-7")

    func occupancy(_ people: String, capacity: String? = "8") -> LiveValues {
        var properties: LiveProperties = ["nrOfPeople": people]
        if let capacity { properties["capacity"] = capacity }
        return LiveValues(domains: [DomainValue(domain: "occupancy", properties: properties, timestamp: .init(millisecondsSince1970: 0))])
    }

    func rule(
        _ name: String, _ condition: String, _ style: Style, priority: Int = 0, order: Int, scope: TopicCriteria? = nil,
        layer: String? = nil, legend: String? = nil
    ) throws -> Rule {
        Rule(
            name: name, domain: "occupancy", condition: try CompiledExpression(condition, domain: "occupancy"),
            scope: scope, style: try StyleTemplate(style, domain: "occupancy"), legend: legend, layer: layer,
            priority: priority, order: order)
    }

    @Test("layers override field by field: main, type, location, live rules")
    func layering() throws {
        let ruleSet = RuleSet(
            main: try StyleTemplate(Style([.visible: .flag(true), .zoomFrom: .number(16), .zoomTo: .number(22), .polygonFillColor: .color(Color("#E0E0E0")!)]), domain: nil),
            types: ["meetingroom": try StyleTemplate(Style([.icon: .text("room.svg"), .polygonFillColor: .color(Color("#C0C0FF")!)]), domain: nil)],
            locations: ["room-7": try StyleTemplate(Style([.label: .text("Boardroom")]), domain: nil)],
            rules: [try rule("occupied", "nrOfPeople > 0", Style([.label: .text("{nrOfPeople}/{capacity}"), .polygonFillColor: .color(Color("#D64545")!)]), order: 0)],
            catalog: LocationCatalog([.init(id: "room-7", name: "Boardroom", type: "meetingroom", capacity: 10)]))
        let engine = RuleEngine(ruleSet)

        let empty = engine.derive(room, values: occupancy("0"))
        #expect(empty.style == Style([.visible: .flag(true), .zoomFrom: .number(16), .zoomTo: .number(22), .icon: .text("room.svg"), .label: .text("Boardroom"), .polygonFillColor: .color(Color("#C0C0FF")!)]))
        #expect(empty.rules == [])

        let busy = engine.derive(room, values: occupancy("3"))
        #expect(busy.style[text: .label] == "3/8")
        #expect(busy.style[color: .polygonFillColor] == Color("#D64545"))
        #expect(busy.style[text: .icon] == "room.svg")
        #expect(busy.rules == ["occupied"])
        #expect(busy.style.changedFields(from: empty.style) == [.label, .polygonFillColor])

        // The catalog's capacity stands in when the update has none.
        #expect(engine.derive(room, values: occupancy("3", capacity: nil)).style[text: .label] == "3/10")
    }

    @Test("higher priority wins; equal priorities apply in file order")
    func priority() throws {
        let ruleSet = RuleSet(rules: [
            try rule("busy", "nrOfPeople > 0", Style([.polygonFillColor: .color(Color("#FF0000")!), .displayRank: .integer(1)]), priority: 10, order: 0),
            try rule("full", "nrOfPeople >= capacity", Style([.polygonFillColor: .color(Color("#800000")!)]), priority: 20, order: 1),
            try rule("any", "nrOfPeople >= 0", Style([.polygonFillColor: .color(Color("#00FF00")!), .displayRank: .integer(9)]), priority: 10, order: 2),
        ])
        let engine = RuleEngine(ruleSet)
        let full = engine.derive(room, values: occupancy("8"))
        #expect(full.style[color: .polygonFillColor] == Color("#800000"))
        #expect(full.rules == ["busy", "any", "full"])
        #expect(full.style[integer: .displayRank] == 9)  // "any" comes after "busy" in the file
        let some = engine.derive(room, values: occupancy("2"))
        #expect(some.style[color: .polygonFillColor] == Color("#00FF00"))
        #expect(some.legendState == "any")
    }

    @Test("a rule's where scope limits it to matching locations")
    func scope() throws {
        let engine = RuleEngine(RuleSet(rules: [
            try rule("b-only", "nrOfPeople > 0", Style([.icon: .text("b.svg")]), order: 0, scope: try TopicCriteria(building: "B")),
            try rule("c-only", "nrOfPeople > 0", Style([.icon: .text("c.svg")]), order: 1, scope: try TopicCriteria(building: "C")),
        ]))
        #expect(engine.derive(room, values: occupancy("1")).style[text: .icon] == "b.svg")
        let other = LocationAddress(dataset: "ds1", venue: "hq", building: "C", floor: "F3", room: "R7", location: "room-7")
        #expect(engine.derive(other, values: occupancy("1")).style[text: .icon] == "c.svg")
    }

    @Test("a rule needs its domain to have a value")
    func domainPresence() throws {
        let engine = RuleEngine(RuleSet(rules: [try rule("idle", "not exists(nrOfPeople)", Style([.icon: .text("idle.svg")]), order: 0)]))
        #expect(engine.derive(room, values: LiveValues(domains: [])).rules == [])
    }

    @Test("zoom-range visibility")
    func zoom() {
        let style = Style([.visible: .flag(true), .zoomFrom: .number(16), .zoomTo: .number(20)])
        #expect(!style.isVisible(atZoom: 15.9))
        #expect(style.isVisible(atZoom: 16))
        #expect(style.isVisible(atZoom: 20))
        #expect(!style.isVisible(atZoom: 20.5))
        #expect(!Style([.visible: .flag(false)]).isVisible(atZoom: 18))
        #expect(Style().isVisible(atZoom: 1))
    }

    @Test("a hidden layer makes its locations invisible")
    func hiddenLayers() throws {
        let engine = RuleEngine(RuleSet(
            main: try StyleTemplate(Style([.visible: .flag(true)]), domain: nil),
            rules: [try rule("occupied", "nrOfPeople > 0", Style([.polygonFillColor: .color(Color("#D64545")!)]), order: 0, layer: "occupancy")]))
        let shown = engine.derive(room, values: occupancy("1"))
        #expect(shown.style[flag: .visible] == true && shown.style[text: .layer] == "occupancy")
        let hidden = engine.derive(room, values: occupancy("1"), hiddenLayers: ["occupancy"])
        #expect(hidden.style[flag: .visible] == false)
        #expect(engine.derive(room, values: occupancy("0"), hiddenLayers: ["occupancy"]).style[flag: .visible] == true)
    }

    @Test("the legend comes from the rules, highest priority first, one entry per title")
    func legend() throws {
        let ruleSet = RuleSet(rules: [
            try rule("occupied", "nrOfPeople > 0", Style([.polygonFillColor: .color(Color("#D64545")!)]), priority: 10, order: 0, layer: "occupancy", legend: "Occupied"),
            try rule("full", "nrOfPeople >= capacity", Style([.badge: .badge(Badge(backgroundColor: Color("#000000")))]), priority: 20, order: 1, layer: "occupancy", legend: "Full"),
            try rule("crowded", "nrOfPeople > 20", Style([.polygonFillColor: .color(Color("#D64545")!)]), priority: 5, order: 2, legend: "Occupied"),
        ])
        let legend = ruleSet.legend()
        #expect(legend.entries.map(\.title) == ["Full", "Occupied"])
        #expect(legend.entries[0].swatch == Color("#000000"))
        #expect(legend.entries[1].rules == ["occupied", "crowded"])
        #expect(legend.json == ##"{"entries": [{"title": "Full", "swatch": "#000000", "layer": "occupancy", "rules": ["full"]}, {"title": "Occupied", "swatch": "#D64545", "layer": "occupancy", "rules": ["occupied", "crowded"]}], "format": 1}"##)
        #expect(ruleSet.layers == ["occupancy"])
    }

    @Test("styles print as JSON with the set fields only")
    func styleJSON() {
        let style = Style([.visible: .flag(true), .zoomFrom: .number(16), .label: .text("3/8"), .polygonFillColor: .color(Color("#d64545")!), .polygonFillOpacity: .number(0.5), .badge: .badge(Badge(text: "3", backgroundColor: Color("#000000")))])
        #expect(style.json == ##"{"visible": true, "zoomFrom": 16, "label": "3/8", "polygonFillColor": "#D64545", "polygonFillOpacity": 0.5, "badge": {"text": "3", "backgroundColor": "#000000"}}"##)
    }

    @Test("colors are #RRGGBB", arguments: [("#D64545", true), ("#d64545", true), ("D64545", false), ("#D6454", false), ("#GGGGGG", false), ("red", false)])
    func colors(text: String, valid: Bool) {
        #expect((Color(text) != nil) == valid)
    }

    @Test("the catalog reads id,name,type,capacity with quotes, in any column order")
    func catalog() throws {
        let catalog = try LocationCatalog(csv: #"""
            # comment
            type,id,capacity,name
            meetingroom,room-7,10,"Boardroom, east"
            desk,desk-1,,"Desk ""one"""
            """#)
        #expect(catalog["room-7"] == .init(id: "room-7", name: "Boardroom, east", type: "meetingroom", capacity: 10))
        #expect(catalog["desk-1"]?.name == "Desk \"one\"")
        #expect(catalog["desk-1"]?.capacity == nil)
        #expect(throws: LocationCatalog.ParseError(line: 2, message: "capacity \"many\" is not a whole number")) {
            try LocationCatalog(csv: "id,capacity\nroom,many")
        }
        #expect(throws: LocationCatalog.ParseError(line: 1, message: "the header needs an \"id\" column (id,name,type,capacity)")) {
            try LocationCatalog(csv: "name,type\nx,y")
        }
    }
}
