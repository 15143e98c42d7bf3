@testable import DisplayRules
import Foundation
import LiveTopics
import Testing

@testable import LiveState
@testable import LiveStatePersistence

@Suite("State store")
struct LiveStoreTests {
    static let start = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    static func engine(staleAfter: Duration? = .seconds(60)) throws -> RuleEngine {
        RuleEngine(
            RuleSet(
                main: try StyleTemplate(Style([.visible: .flag(true), .polygonFillColor: .color(Color("#E0E0E0")!)]), domain: nil),
                rules: [
                    Rule(
                        name: "occupied", domain: "occupancy", condition: try CompiledExpression("nrOfPeople > 0", domain: "occupancy"),
                        style: try StyleTemplate(Style([.label: .text("{nrOfPeople}/{capacity}"), .polygonFillColor: .color(Color("#D64545")!)]), domain: "occupancy"),
                        legend: "Occupied", layer: "occupancy", priority: 10, order: 0),
                    Rule(
                        name: "vacant", domain: "occupancy", condition: try CompiledExpression("nrOfPeople == 0", domain: "occupancy"),
                        style: try StyleTemplate(Style([.polygonFillColor: .color(Color("#4CAF50")!)]), domain: "occupancy"),
                        legend: "Vacant", layer: "occupancy", priority: 10, order: 1),
                    Rule(
                        name: "booked", domain: "availability", condition: try CompiledExpression("available == \"false\"", domain: "availability"),
                        style: try StyleTemplate(Style([.icon: .text("booked.svg")]), domain: "availability"), priority: 5, order: 2),
                ],
                domains: ["occupancy": DomainSettings(staleAfter: staleAfter)],
                catalog: LocationCatalog([.init(id: "room-7", type: "meetingroom", capacity: 8)])))
    }

    func update(
        _ properties: LiveProperties, location: String = "room-7", domain: String = "occupancy",
        at offset: Int64 = 0, floor: String = "F3"
    ) throws -> LiveUpdate {
        LiveUpdate(
            topic: try LiveTopic(parsing: "ds1/hq/B/\(floor)/R7/\(location)/\(domain)"),
            timestamp: LiveTimestamp(millisecondsSince1970: Self.start.millisecondsSince1970 + offset),
            properties: properties)
    }

    func at(_ offset: Int64) -> LiveTimestamp {
        LiveTimestamp(millisecondsSince1970: Self.start.millisecondsSince1970 + offset)
    }

    func changeOf(_ outcome: LiveStore.Outcome) -> DerivedChange? {
        if case .changed(let change) = outcome { return change }
        return nil
    }

    @Test("queries by id and by floor read the index: every holder of an id, only the floor's locations")
    func queriesByIdAndFloor() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        for (location, floor) in [("room-7", "F3"), ("room-8", "F3"), ("desk-1", "F4")] {
            _ = store.apply(try update(["nrOfPeople": "1"], location: location, floor: floor), now: at(1))
        }
        // The same id in other datasets: other locations.
        for dataset in ["aaa", "zzz"] {
            _ = store.apply(
                LiveUpdate(
                    topic: try LiveTopic(parsing: "\(dataset)/x/x/x/x/room-7/occupancy"), timestamp: at(1), properties: ["nrOfPeople": "1"]),
                now: at(1))
        }
        #expect(store.records(id: "room-7").map(\.address.description) == [
            "aaa/x/x/x/x/room-7", "ds1/hq/B/F3/R7/room-7", "zzz/x/x/x/x/room-7",
        ])
        #expect(store.records(id: "room-8").map(\.address.floor) == ["F3"])
        #expect(store.records(id: "nowhere").isEmpty)
        let f3 = Place(dataset: "ds1", venue: "hq", building: "B", floor: "F3")
        let f4 = Place(dataset: "ds1", venue: "hq", building: "B", floor: "F4")
        #expect(store.records(floor: f3).map(\.address.location) == ["room-7", "room-8"])
        #expect(store.records(floor: f4).map(\.address.location) == ["desk-1"])
        // Updating a known location adds nothing to the index.
        _ = store.apply(try update(["nrOfPeople": "2"], location: "desk-1", at: 5, floor: "F4"), now: at(6))
        #expect(store.records(floor: f4).count == 1)
    }

    @Test("a location with many domains, some with the same tag, finds each one's value")
    func manyDomains() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        // "axxd", "abcd", "ayyd": one tag (length, first and last byte); more than eight in all.
        let domains = ["axxd", "abcd", "occupancy", "ayyd", "d4", "d5", "availability", "d7", "d8", "abzd", "d10"]
        func value(_ domain: String) -> String? { store[LocationAddress(try! update([:]).topic)]?.values.first { $0.domain == domain }?.properties["v"] }
        for (round, offset) in [(0, Int64(0)), (1, 10)] {
            for (number, domain) in domains.enumerated() {
                _ = store.apply(try update(["v": "\(domain)-\(round)"], domain: domain, at: offset + Int64(number)), now: at(100))
            }
            for domain in domains { #expect(value(domain) == "\(domain)-\(round)") }
        }
        // Removing values moves the later ones down; each is still found.
        _ = store.apply(LiveUpdate(topic: try update([:], domain: "abcd").topic, timestamp: at(50), properties: [:], isRemoval: true), now: at(100))
        _ = store.apply(LiveUpdate(topic: try update([:], domain: "d4").topic, timestamp: at(50), properties: [:], isRemoval: true), now: at(100))
        for (number, domain) in domains.enumerated() where domain != "abcd" && domain != "d4" {
            _ = store.apply(try update(["v": "\(domain)-2"], domain: domain, at: 100 + Int64(number)), now: at(200))
        }
        for domain in domains { #expect(value(domain) == (["abcd", "d4"].contains(domain) ? nil : "\(domain)-2")) }
        #expect(store[LocationAddress(try update([:]).topic)]?.values.count == domains.count - 2)
        // The rules still read occupancy and availability where they are now.
        _ = store.apply(try update(["nrOfPeople": "2", "capacity": "4"], at: 300), now: at(300))
        #expect(store[LocationAddress(try update([:]).topic)]?.published?.rules == ["occupied"])
    }

    @Test("a value written in place leaves earlier changes and payloads as they were")
    func inPlaceValues() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        let first = try #require(changeOf(store.apply(try update(["nrOfPeople": "3", "capacity": "8"]), now: at(0))))
        let payload = LivePayload(id: nil, timestamp: at(1), originSourceId: nil, properties: ["nrOfPeople": "0"], isRemoval: false)
        let second = try #require(changeOf(store.apply(try update(payload.properties, at: 1), now: at(1))))
        #expect(first.live.first?.properties == ["nrOfPeople": "3", "capacity": "8"])
        #expect(second.live.first?.properties == ["nrOfPeople": "0"])
        #expect(payload.properties == ["nrOfPeople": "0"])
        var kept: LiveProperties = ["a": "1", "b": "2"]
        let copy = kept
        kept.replace(with: ["c": "3"])
        #expect(kept == ["c": "3"] && copy == ["a": "1", "b": "2"])
        kept.replace(with: ["d": "4"])
        #expect(kept == ["d": "4"] && copy == ["a": "1", "b": "2"])
    }

    @Test("only a real style difference produces a derived change")
    func changeOnly() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        let first = try #require(changeOf(store.apply(try update(["nrOfPeople": "3", "capacity": "8"]), now: at(0))))
        #expect(first.version == 1)
        #expect(first.derived.style[text: .label] == "3/8")
        #expect(first.changed == [.visible, .label, .polygonFillColor, .layer])
        #expect(first.derived.rules == ["occupied"])

        // Same people: nothing to publish.
        #expect(store.apply(try update(["nrOfPeople": "3", "capacity": "8"], at: 1000), now: at(1000)) == .unchanged)
        // The label changes.
        let second = try #require(changeOf(store.apply(try update(["nrOfPeople": "4", "capacity": "8"], at: 2000), now: at(2000))))
        #expect(second.changed == [.label])
        #expect(second.version == 2)
        // Vacant: color and label change.
        let third = try #require(changeOf(store.apply(try update(["nrOfPeople": "0", "capacity": "8"], at: 3000), now: at(3000))))
        #expect(third.changed == [.label, .polygonFillColor])
        #expect(third.derived.style[text: .label] == nil)
        #expect(third.derived.rules == ["vacant"])
        #expect(store.counters.changes == 3)
        #expect(store.counters.applied == 4)
    }

    @Test("the same values again move the timestamp and the expiry on, and change nothing else")
    func repeatedValues() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: .seconds(60)))
        _ = store.apply(try update(["nrOfPeople": "3"]), now: at(0))
        #expect(store.apply(try update(["nrOfPeople": "3"], at: 50_000), now: at(50_000)) == .unchanged)
        let address = LocationAddress(try update(["x": "y"]).topic)
        #expect(store[address]?.values.first?.timestamp == at(50_000))
        // Not stale at the first deadline: the repeat moved it to 110 s.
        #expect(store.expire(now: at(60_000)).isEmpty)
        #expect(store.expire(now: at(110_000)).count == 1)
        #expect(store.counters.applied == 2)
    }

    @Test("an older update for the same location and domain is ignored and counted")
    func outOfOrder() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        _ = store.apply(try update(["nrOfPeople": "3"], at: 5000), now: at(5000))
        #expect(store.apply(try update(["nrOfPeople": "9"], at: 4000), now: at(5001)) == .ignoredOutOfOrder)
        #expect(store.counters.ignoredOutOfOrder == 1)
        #expect(store[LocationAddress(try update(["x": "y"]).topic)]?.values.first?.properties["nrOfPeople"] == "3")
        // Another domain has its own order.
        #expect(store.apply(try update(["available": "false"], location: "room-7", domain: "availability", at: 1000), now: at(5002)) != .ignoredOutOfOrder)
    }

    @Test("an empty payload removes the domain's value and re-derives")
    func removal() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        _ = store.apply(try update(["nrOfPeople": "3"]), now: at(0))
        var removal = try update([:], at: 10)
        removal.isRemoval = true
        let change = try #require(changeOf(store.apply(removal, now: at(10))))
        #expect(change.derived.rules == [])
        #expect(change.derived.style[color: .polygonFillColor] == Color("#E0E0E0"))
        #expect(change.live.isEmpty)
        #expect(store.counters.removals == 1)
        #expect(store.apply(removal, now: at(20)) == .unchanged)
    }

    @Test("a stale value counts as absent, and expiry re-derives on time without a new message")
    func staleness() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: .seconds(60)))
        _ = store.apply(try update(["nrOfPeople": "3"]), now: at(0))
        #expect(store.nextExpiry == at(60_000))
        #expect(store.expire(now: at(59_999)).isEmpty)
        let expired = store.expire(now: at(60_000))
        #expect(expired.count == 1)
        #expect(expired.first?.derived.rules == [])
        #expect(expired.first?.live.isEmpty == true)
        #expect(store.counters.expired == 1)
        // A newer value makes an old deadline moot.
        _ = store.apply(try update(["nrOfPeople": "2"], at: 70_000), now: at(70_000))
        _ = store.apply(try update(["nrOfPeople": "2"], at: 100_000), now: at(100_000))
        #expect(store.expire(now: at(130_000)).isEmpty)
        #expect(store.expire(now: at(160_000)).count == 1)
        // An update that is already too old arrives stale.
        let late = store.apply(try update(["nrOfPeople": "5"], location: "room-8", domain: "occupancy", at: 0), now: at(200_000))
        #expect(changeOf(late)?.derived.rules == [])
    }

    @Test("many values due at once (a start after a long stop) expire exactly the due ones, and later ones stay in order")
    func manyExpiries() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: .seconds(1)))
        // Deadlines 1,000 … 5,999 ms, inserted out of order.
        let offsets = (0..<5_000).map { Int64($0 * 7_919 % 5_000) }
        for offset in offsets {
            _ = store.apply(try update(["nrOfPeople": "1"], location: "desk-\(offset)", at: offset), now: at(offset))
        }
        // Few due: popped one by one; then most of the rest in one pass.
        #expect(store.expire(now: at(1_009)).count == 10)
        #expect(store.expire(now: at(4_999)).count == 3_990)
        #expect(store.nextExpiry == at(5_000))
        #expect(store.expire(now: at(5_000)).map(\.address.location) == ["desk-4000"])
        #expect(store.expire(now: at(5_001)).map(\.address.location) == ["desk-4001"])
        #expect(store.counters.expired == 4_002)
        #expect(store.expire(now: at(10_000)).count == 998)
        #expect(store.nextExpiry == nil)
    }

    @Test("hiding a layer re-publishes its locations as not visible")
    func layers() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        _ = store.apply(try update(["nrOfPeople": "3"]), now: at(0))
        _ = store.apply(try update(["available": "false"], location: "desk-1", domain: "availability"), now: at(0))
        let hidden = store.setLayer("occupancy", hidden: true, now: at(10))
        #expect(hidden.map(\.address.location) == ["room-7"])
        #expect(hidden.first?.derived.style[flag: .visible] == false)
        #expect(hidden.first?.changed == [.visible])
        #expect(store.setLayer("occupancy", hidden: true, now: at(20)).isEmpty)
        let shown = store.setLayer("occupancy", hidden: false, now: at(30))
        #expect(shown.first?.derived.style[flag: .visible] == true)
    }

    @Test("summaries per floor and building, coalesced to one per interval")
    func summaries() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil), summaryInterval: .seconds(1))
        _ = store.apply(try update(["nrOfPeople": "3"]), now: at(0))  // capacity 8 from the catalog
        _ = store.apply(try update(["nrOfPeople": "0", "capacity": "4"], location: "room-9", domain: "occupancy"), now: at(0))
        _ = store.apply(try update(["nrOfPeople": "2", "capacity": "6"], location: "room-5", domain: "occupancy", floor: "F4"), now: at(0))
        let first = store.takeDueSummaries(now: at(0))
        #expect(first.map { OutputFormat(prefix: "p").summary($0.key) } == ["p/summary/ds1/hq/B", "p/summary/ds1/hq/B/F3", "p/summary/ds1/hq/B/F4"])
        let floor = try #require(first.first { $0.key.floor == "F3" })
        #expect(floor.locations == 2 && floor.people == 3 && floor.capacity == 12)
        #expect(floor.states == ["Occupied": 1, "Vacant": 1])
        let building = try #require(first.first { $0.key.floor == nil })
        #expect(building.locations == 3 && building.people == 5 && building.capacity == 18)
        #expect(building.json(updatedAt: at(0)).hasPrefix(#"{"dataset": "ds1", "venue": "hq", "building": "B", "locations": 3, "states": {"Occupied": 2, "Vacant": 1}, "people": 5, "capacity": 18"#))

        // Two changes within the interval: nothing now, one summary when it has passed.
        _ = store.apply(try update(["nrOfPeople": "4"], at: 100), now: at(100))
        _ = store.apply(try update(["nrOfPeople": "5"], at: 200), now: at(200))
        #expect(store.takeDueSummaries(now: at(300)).isEmpty)
        #expect(store.summaries.nextDue(now: at(300)) == at(1000))
        let later = store.takeDueSummaries(now: at(1000))
        #expect(later.count == 2)
        #expect(later.first { $0.key.floor == "F3" }?.people == 5)

        // A clean stop takes every changed one, its interval passed or not.
        _ = store.apply(try update(["nrOfPeople": "6"], at: 1100), now: at(1100))
        #expect(store.takeDueSummaries(now: at(1200)).isEmpty)
        let last = store.takeDueSummaries(now: at(1200), all: true)
        #expect(last.count == 2 && last.first { $0.key.floor == "F3" }?.people == 6)
        #expect(store.takeDueSummaries(now: at(5000)).isEmpty)
    }

    @Test("locations from many floors in turn each reach their own floor's aggregate, as the floors' table grows")
    func manyFloors() {
        var tracker = SummaryTracker(interval: .seconds(1))
        // 300 floors over 7 buildings, visited in turn three times: a floor never comes
        // right after itself, and the table grows past its first size several times.
        func address(_ floor: Int, _ visit: Int) -> LocationAddress {
            LocationAddress(
                dataset: "ds1", venue: "hq", building: "b\(floor % 7)", floor: "f\(floor)", room: "r", location: "loc-\(floor)-\(visit)")
        }
        var first: [ObjectIdentifier] = []
        for visit in 0..<3 {
            for floor in 0..<300 {
                let aggregate = tracker.floorAggregate(for: address(floor, visit))
                #expect(aggregate.key == Place(dataset: "ds1", venue: "hq", building: "b\(floor % 7)", floor: "f\(floor)"))
                if visit == 0 { first.append(ObjectIdentifier(aggregate)) } else { #expect(ObjectIdentifier(aggregate) == first[floor]) }
            }
        }
        // Found by their prefixes on the later visits, never made again the slow way.
        #expect(tracker.indexedFloors == 300)
        // A floor whose name extends another's, in the same building, is another floor.
        let f1 = tracker.floorAggregate(for: address(1, 0))
        let f15 = tracker.floorAggregate(for: address(15, 0))
        #expect(f1 !== f15)
        #expect(tracker.aggregate(Place(dataset: "ds1", venue: "hq", building: "b1", floor: "f15")) === f15)
    }

    @Test("a floor named in two Unicode forms taking turns is one floor, and its spellings add no entries to the floors' table")
    func floorSpellings() {
        var tracker = SummaryTracker(interval: .seconds(1))
        let composed = "caf\u{E9}"  // é as one code point
        let decomposed = "cafe\u{301}"  // e and a combining accent: equal as strings, not as bytes
        #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
        let first = tracker.floorAggregate(
            for: LocationAddress(dataset: "ds1", venue: "hq", building: "b", floor: composed, room: "r", location: "loc-0"))
        for number in 1...200 {
            let floor = number % 2 == 0 ? composed : decomposed
            let aggregate = tracker.floorAggregate(
                for: LocationAddress(dataset: "ds1", venue: "hq", building: "b", floor: floor, room: "r", location: "loc-\(number)"))
            #expect(aggregate === first)
        }
        #expect(tracker.indexedFloors == 1)
    }

    @Test("the floors' table tells apart floors whose prefixes hash alike, and finds none for a prefix it does not hold")
    func floorTableCollisions() {
        var table = SummaryTracker.FloorTable()
        func floor(_ prefix: String) -> SummaryTracker.Aggregate {
            let aggregate = SummaryTracker.Aggregate(Place(dataset: "d", venue: "v", building: "b", floor: prefix))
            Array(prefix.utf8).withUnsafeBytes { aggregate.setFloorPrefix($0) }
            return aggregate
        }
        // 100 floors under two hashes (the worst case a seed prevents), and others spread.
        let crowded = (0..<100).map { floor("d/v/b/f\($0)") }
        for (index, aggregate) in crowded.enumerated() { table.insert(aggregate, hash: index % 2 == 0 ? 7 : 7 + 64) }
        let spread = (0..<100).map { floor("d/v/c/f\($0)") }
        for (index, aggregate) in spread.enumerated() { table.insert(aggregate, hash: UInt64(index) &* 0x9E37_79B9_7F4A_7C15 | 1) }
        #expect(table.count == 200)
        for (index, aggregate) in crowded.enumerated() {
            let found = Array("d/v/b/f\(index)".utf8).withUnsafeBytes { table.find($0, hash: index % 2 == 0 ? 7 : 7 + 64) }
            #expect(found === aggregate)
        }
        for (index, aggregate) in spread.enumerated() {
            let found = Array("d/v/c/f\(index)".utf8).withUnsafeBytes { table.find($0, hash: UInt64(index) &* 0x9E37_79B9_7F4A_7C15 | 1) }
            #expect(found === aggregate)
        }
        #expect(Array("d/v/b/f1".utf8).withUnsafeBytes { table.find($0, hash: 7) } == nil)  // f1 is under the other hash
        #expect(Array("d/v/b/f100".utf8).withUnsafeBytes { table.find($0, hash: 7) } == nil)
    }

    @Test("new rules re-derive every location and publish only what changed")
    func replaceRules() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        _ = store.apply(try update(["nrOfPeople": "3"]), now: at(0))
        _ = store.apply(try update(["available": "true"], location: "desk-1", domain: "availability"), now: at(0))
        #expect(store.replaceRuleEngine(try Self.engine(staleAfter: nil), now: at(1)).isEmpty)
        var ruleSet = try Self.engine(staleAfter: nil).ruleSet
        ruleSet.main = try StyleTemplate(Style([.visible: .flag(true), .polygonFillColor: .color(Color("#000000")!)]), domain: nil)
        let changes = store.replaceRuleEngine(RuleEngine(ruleSet), now: at(2))
        #expect(changes.map(\.address.location) == ["desk-1"])  // room-7's color comes from its rule
    }

    @Test("the derived change prints as documented")
    func derivedChangeJSON() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        let change = try #require(changeOf(store.apply(try update(["nrOfPeople": "3", "capacity": "8"]), now: at(5))))
        #expect(
            change.json
                == ##"{"location": "room-7", "topic": {"dataset": "ds1", "venue": "hq", "building": "B", "floor": "F3", "room": "R7", "location": "room-7"}, "style": {"visible": true, "label": "3/8", "polygonFillColor": "#D64545", "layer": "occupancy"}, "changed": ["visible", "label", "polygonFillColor", "layer"], "rules": ["occupied"], "live": {"occupancy": {"nrOfPeople": "3", "capacity": "8", "timestamp": "2025-11-21T10:13:20.000Z"}}, "version": 1, "updatedAt": "2025-11-21T10:13:20.005Z", "format": 1}"##)
        #expect(OutputFormat(prefix: "p").publication(change).topic == "p/style/ds1/hq/B/F3/R7/room-7")
    }

    @Test("a change's JSON, written in runs, is the layout written member by member: escapes, stale values, epoch, kept or derived style")
    func derivedChangeRuns() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        _ = store.apply(try update(["nrOfPeople": "3", "capacity": "8"]), now: at(5))
        let change = try #require(changeOf(store.apply(try update(["nrOfPeople": "0", "capacity": "8"], at: 1), now: at(6))))
        func memberByMember(_ change: DerivedChange, epoch: UInt64?) -> String {
            var stream = JSONStream(capacity: 8)
            stream.beginObject()
            stream.add("location", change.address.location)
            stream.key("topic")
            stream.beginObject()
            for component: LiveTopic.Component in [.dataset, .venue, .building, .floor, .room, .location] {
                stream.add(text: component.rawValue, change.address[component]!)
            }
            stream.endObject()
            stream.key("style")
            change.derived.style.write(to: &stream)
            stream.key("changed")
            stream.beginArray()
            for field in change.changed { stream.string(field.rawValue) }
            stream.endArray()
            stream.key("rules")
            stream.beginArray()
            for rule in change.derived.rules { stream.string(rule) }
            stream.endArray()
            stream.key("live")
            stream.beginObject()
            for value in change.values where !value.stale {
                stream.key(text: value.domain)
                stream.beginObject()
                for property in value.properties { stream.add(text: property.name, property.value) }
                stream.key("timestamp")
                stream.timestamp(value.timestamp)
                stream.endObject()
            }
            stream.endObject()
            if let epoch { stream.add("epoch", Int(epoch)) }
            stream.add("version", Int(change.version))
            stream.key("updatedAt")
            stream.timestamp(change.updatedAt)
            stream.add("format", WireFormat.version)
            stream.endObject()
            return stream.text
        }
        let plain = change.address
        let escaped = LocationAddress(dataset: "d\"s", venue: "h\\q", building: "B", floor: "F\t3", room: "é", location: "room\"7")
        let values = [
            DomainValue(domain: "occupancy", properties: ["nrOfPeople": "0", "note": "a \"quoted\"\nline"], timestamp: at(1)),
            DomainValue(domain: "old", properties: ["x": "1"], timestamp: at(-9), stale: true),
            DomainValue(domain: "temp\\erature", properties: ["temperature": "21"], timestamp: at(900_000)),
        ]
        // The probe's stream is reused: each change written after the last one, reset.
        var reused = JSONStream(capacity: 16)
        for address in [plain, escaped] {
            for values in [change.values, values] {
                for key in [change.shared, SharedStyleKey(change.key)] {
                    for before in [change.before, .none, .moved(.init(plain))] {
                        let variant = DerivedChange(
                            address: address, key: key, before: before, ruleEngine: change.ruleEngine, values: values,
                            version: change.version, updatedAt: change.updatedAt)
                        for epoch: UInt64? in [nil, 7] {
                            reused.reset()
                            variant.write(to: &reused, epoch: epoch)
                            #expect(reused.text == memberByMember(variant, epoch: epoch), "\(address) \(epoch.map(String.init) ?? "-")")
                            #expect(try JSONSerialization.jsonObject(with: Data(reused.bytes)) is [String: Any])
                        }
                    }
                }
            }
        }
    }

    @Test("a style's parts kept with its key write the same bytes as deriving them; new rules render them anew")
    func keptStyleParts() throws {
        let store = LiveStore(ruleEngine: try Self.engine(staleAfter: nil))
        var changes: [DerivedChange] = []
        // A first style, a change to another style and back, another location with the same style.
        for (people, location) in [("3", "room-7"), ("0", "room-7"), ("3", "room-7"), ("3", "room-8")] {
            changes.append(try #require(changeOf(store.apply(try update(["nrOfPeople": people, "capacity": "8"], location: location), now: at(5)))))
        }
        for change in changes {
            #expect(change.shared.pooled)
            // The same change with a key that keeps nothing: derived as it is written.
            let unkept = DerivedChange(
                address: change.address, key: SharedStyleKey(change.key), before: change.before, ruleEngine: change.ruleEngine,
                values: change.values, version: change.version, updatedAt: change.updatedAt)
            #expect(change.json == unkept.json)
        }
        // A key asked under other rules renders its parts under those (a reload makes a new engine).
        var ruleSet = try Self.engine(staleAfter: nil).ruleSet
        ruleSet.main = try StyleTemplate(Style([.visible: .flag(false), .polygonFillColor: .color(Color("#000000")!)]), domain: nil)
        let reloaded = RuleEngine(ruleSet)
        let key = changes[3].shared
        let before = try #require(key.rendered(under: changes[3].ruleEngine, at: changes[3].address))
        let after = try #require(key.rendered(under: reloaded, at: changes[3].address))
        #expect(String(decoding: before.styleJSON, as: UTF8.self).contains(#""visible": true"#))
        #expect(String(decoding: after.styleJSON, as: UTF8.self).contains(#""visible": false"#))
        // New rules: every location's change shows the new style.
        let renewed = store.replaceRuleEngine(reloaded, now: at(6))
        let room = try #require(renewed.first { $0.address.location == "room-8" })
        #expect(room.json.contains(#""visible": false"#))
    }
}

@Suite("Persistence")
struct PersistenceTests {
    /// Applies an occupancy update of `people` (capacity 8) to location `loc-{number}` of one room.
    static func occupy(_ store: LiveStore, _ number: Int, _ people: Int) throws {
        _ = store.apply(
            LiveUpdate(
                topic: try LiveTopic(parsing: "ds1/hq/B/F3/R7/loc-\(number)/occupancy"), timestamp: LiveStoreTests.start,
                properties: ["nrOfPeople": "\(people)", "capacity": "8"]),
            now: LiveStoreTests.start)
    }

    @Test("locations that show the same style share one key; keys no location shows any more are swept from the pool as it grows")
    func sharedStyleKeys() throws {
        let store = LiveStore(ruleEngine: try LiveStoreTests.engine(staleAfter: nil))
        func occupy(_ location: Int, _ people: Int) throws { try Self.occupy(store, location, people) }
        for location in 0..<200 { try occupy(location, location % 3 + 1) }
        #expect(store.styleKeys.count == 3)
        let states = (0..<200).map {
            store.locations.find(at: LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: "loc-\($0)"))!
        }
        #expect(states[0].published === states[3].published)
        #expect(states[0].published !== states[1].published)
        #expect(store[states[1].address]?.published?.style[text: .label] == "2/8")

        // 1,500 distinct labels, all held; then none of them is.
        for location in 0..<1_500 { try occupy(location, location + 1_000) }
        #expect(store.styleKeys.count >= 1_500)
        for location in 0..<1_500 { try occupy(location, 1) }
        // New keys past the next sweep's mark: the ones nobody holds go.
        for location in 1_500..<2_100 { try occupy(location, location + 10_000) }
        #expect(store.styleKeys.count <= 602, "\(store.styleKeys.count) keys pooled")
        #expect(store[states[5].address]?.published?.style[text: .label] == "1/8")
    }

    @Test("keys taking turns are found among the recent ones as the same objects the pool holds; keys that differ in any part are not")
    func recentStyleKeys() throws {
        var pool = StyleKeyPool()
        var selection = RuleSelection(ruleCount: 200)
        selection.insert(3)
        var other = selection
        other.insert(150)
        // Labels that share their first bytes and length, badges, hidden, and rules beyond
        // the first 128 (the selection's overflow).
        var keys: [StyleKey] = []
        for rules in [selection, other] {
            for label in ["12345678a", "12345678b", "3", "4", nil] as [String?] {
                for badge in [nil, "CO2 1200"] as [String?] {
                    for hidden in [false, true] { keys.append(StyleKey(selection: rules, label: label, badgeText: badge, hidden: hidden)) }
                }
            }
        }
        let first = keys.map { pool.share($0) }
        #expect(Set(first.map(ObjectIdentifier.init)).count == keys.count, "one object per distinct key")
        for (key, shared) in zip(keys, first) { #expect(shared.key == key) }
        // Taking turns, in another order: each time the object first made for that key.
        for round in 0..<3 {
            for index in keys.indices.reversed() where index % (round + 1) == 0 {
                #expect(pool.share(keys[index]) === first[index], "key \(index), round \(round)")
            }
        }
        #expect(pool.count == keys.count)
    }

    @Test("changed locations are taken once and made into records a part at a time, as they are then; one changed again meanwhile, or whose write failed, is taken again")
    func changedLocationsInParts() throws {
        let store = LiveStore(ruleEngine: try LiveStoreTests.engine(staleAfter: nil))
        func occupy(_ room: Int, _ people: Int) throws { try Self.occupy(store, room, people) }
        for room in 0..<10 { try occupy(room, 1) }
        let changed = store.takeChangedLocations()
        #expect(changed.count == 10)
        #expect(store.takeChangedLocations().count == 0)
        let first = store.records(changed, in: 0..<4)
        #expect(first.map(\.record.address.location) == (0..<4).map { "loc-\($0)" })
        // Rows in order of arrival, from 1.
        #expect(first.map(\.row) == [1, 2, 3, 4])
        // Location 7 changes before its part is made: its record is the newest, and the next
        // snapshot takes it again.
        try occupy(7, 5)
        let rest = store.records(changed, in: 4..<10)
        #expect(rest.first { $0.record.address.location == "loc-7" }?.record.values.first?.properties["nrOfPeople"] == "5")
        let again = store.takeChangedLocations()
        #expect(store.records(again, in: 0..<again.count).map(\.record.address.location) == ["loc-7"])
        // A failed part is marked for the next snapshot; a location is taken once however often marked.
        store.markDirty(changed, in: 8..<10)
        store.markDirty(changed, in: 9..<10)
        #expect(store.takeDirty().map(\.record.address.location) == ["loc-8", "loc-9"])
    }

    @Test("a restored store publishes nothing for locations whose style did not change")
    func restoreWithoutRepublishing() throws {
        let engine = try LiveStoreTests.engine(staleAfter: .seconds(60))
        let store = LiveStore(ruleEngine: engine)
        let now = LiveStoreTests.start
        for room in 0..<5 {
            _ = store.apply(
                LiveUpdate(topic: try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-\(room)/occupancy"), timestamp: now, properties: ["nrOfPeople": "\(room)"]),
                now: now)
        }
        let written = store.takeDirty()
        #expect(written.count == 5)
        #expect(store.takeDirty().isEmpty)

        let restored = LiveStore(ruleEngine: engine)
        restored.restore(written.map(\.record))
        #expect(restored.count == 5)
        #expect(restored.rederiveAll(now: now).isEmpty)
        // The same update again changes nothing; the version goes on from where it was.
        #expect(
            restored.apply(
                LiveUpdate(topic: try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-2/occupancy"), timestamp: now, properties: ["nrOfPeople": "2"]),
                now: now) == .unchanged)
        let next = restored.apply(
            LiveUpdate(topic: try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-2/occupancy"), timestamp: now, properties: ["nrOfPeople": "7"]), now: now)
        guard case .changed(let change) = next else {
            Issue.record("expected a change")
            return
        }
        #expect(change.version == 2)
        // Staleness was rescheduled from the restored values.
        #expect(restored.expire(now: now.adding(.seconds(61))).count == 5)
    }
}

@Suite("Location table")
struct LocationTableTests {
    static func state(_ address: LocationAddress) -> LocationState {
        let aggregate = SummaryTracker.Aggregate(Place(dataset: "d", venue: "v", building: "b"))
        var keys = StyleKeyPool()
        return LocationState(address, values: [], version: 0, published: .none, floor: aggregate, keys: &keys)
    }

    static func address(_ number: Int) -> LocationAddress {
        LocationAddress(
            dataset: "ds1", venue: "hq", building: "b\(number % 3)", floor: "f\(number % 7)", room: "r\(number % 11)",
            location: "loc-\(number)")
    }

    @Test("every location is found by its identity, at its address and by dataset and id, as the table grows; others are not")
    func findsWhatWasInserted() {
        var table = LocationTable()
        for number in 0..<5_000 {
            let address = Self.address(number)
            table.insert(Self.state(address), hash: LocationTable.hash(address))
        }
        #expect(table.count == 5_000)
        for number in 0..<5_000 {
            let address = Self.address(number)
            #expect(table.find(address)?.address == address)
            #expect(table.find(at: address)?.address == address)
            #expect(table.find(dataset: "ds1", id: "loc-\(number)")?.address == address)
        }
        #expect(table.find(Self.address(5_000)) == nil)
        #expect(table.find(dataset: "ds2", id: "loc-1") == nil)
        #expect(table.locations.count == 5_000)
    }

    @Test("a location that moves keeps its slot: found by its identity at any placement, at its address only where it is")
    func moves() {
        var table = LocationTable()
        let addresses = (0..<200).map(Self.address)
        var states: [LocationState] = []
        for address in addresses {
            let state = Self.state(address)
            states.append(state)
            table.insert(state, hash: LocationTable.hash(address))
        }
        let moved = LocationAddress(dataset: "ds1", venue: "hq", building: "b9", floor: "f9", room: "r9", location: "loc-5")
        #expect(LocationTable.hash(moved) == LocationTable.hash(addresses[5]), "a placement is not part of the identity")
        states[5].address = moved
        #expect(table.find(moved) === states[5])
        #expect(table.find(addresses[5]) === states[5], "the old placement names the same location")
        #expect(table.find(at: moved) === states[5])
        #expect(table.find(at: addresses[5]) == nil)
        for (number, address) in addresses.enumerated() where number != 5 {
            #expect(table.find(at: address) === states[number], "\(number)")
        }
    }

    @Test("locations whose paths hash alike are told apart by their addresses")
    func collisions() {
        var table = LocationTable()
        let addresses = (0..<40).map(Self.address)
        for address in addresses { table.insert(Self.state(address), hash: 42) }
        for address in addresses {
            let found = address.withPathBytes { table.find($0, hash: 42) }
            #expect(found?.address == address)
        }
        let missing = Self.address(99).withPathBytes { table.find($0, hash: 42) }
        #expect(missing == nil)
    }

    @Test("a path hashes the same from a topic slice and from an address; different identities differ")
    func hashing() {
        let address = Self.address(7)
        let topic = address.description + "/co2"
        #expect(LocationTable.hash(address) == LocationTable.hash(topic.dropLast(4)))
        let hashes = Set((0..<1_000).map { LocationTable.hash(Self.address($0)) })
        #expect(hashes.count == 1_000)
        #expect(!hashes.contains(0))
        // The dataset is part of the identity: the same id in two datasets hashes apart.
        let other = LocationAddress(dataset: "ds2", venue: "hq", building: "b1", floor: "f0", room: "r7", location: "loc-7")
        #expect(LocationTable.hash(other) != LocationTable.hash(address))
    }
}
