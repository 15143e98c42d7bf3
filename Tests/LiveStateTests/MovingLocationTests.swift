import DisplayRules
import Foundation
import LiveDataTestSupport
import LiveTopics
import Testing

@testable import LiveState
@testable import LiveStatePersistence

/// A location is its dataset and id; venue, building, floor and room are where it is now.
@Suite("Moving locations")
struct MovingLocationTests {
    static let start = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    static func ruleSet(domains: [String: DomainSettings] = ["position": DomainSettings(staleAfter: .seconds(60))]) throws -> RuleSet {
        RuleSet(
            main: try StyleTemplate(Style([.visible: .flag(true), .icon: .text("asset.svg")]), domain: nil),
            rules: [
                Rule(
                    name: "occupied", domain: "occupancy", condition: try CompiledExpression("nrOfPeople > 0", domain: "occupancy"),
                    style: try StyleTemplate(Style([.polygonFillColor: .color(Color("#D64545")!)]), domain: "occupancy"), legend: "Occupied",
                    priority: 1, order: 0)
            ],
            domains: domains)
    }

    static func store(_ domains: [String: DomainSettings]? = nil) throws -> LiveStore {
        LiveStore(ruleEngine: RuleEngine(try domains.map { try ruleSet(domains: $0) } ?? ruleSet()))
    }

    static func at(_ offset: Int64) -> LiveTimestamp { start.adding(milliseconds: offset) }

    /// A store holding one location, at ``f1``, and that location.
    static func oneLocation() throws -> (store: LiveStore, state: LocationState) {
        let store = try store()
        _ = store.apply(try occupancy(floor: "F1", people: 2, at: 0), now: at(0))
        return (store, try #require(store.locations.find(at: f1)))
    }

    static func position(floor: String, room: String = "R1", index: Int, at offset: Int64, latitude: String = "55.1") throws -> LiveUpdate {
        LiveUpdate(
            topic: try LiveTopic(parsing: "ds1/v/B/\(floor)/\(room)/asset-1/position"), timestamp: at(offset),
            properties: ["latitude": latitude, "longitude": "12.1", "floorIndex": "\(index)"])
    }

    static func occupancy(floor: String, people: Int, at offset: Int64) throws -> LiveUpdate {
        LiveUpdate(
            topic: try LiveTopic(parsing: "ds1/v/B/\(floor)/R1/asset-1/occupancy"), timestamp: at(offset),
            properties: ["nrOfPeople": "\(people)"])
    }

    static func change(_ outcome: LiveStore.Outcome) -> DerivedChange? {
        if case .changed(let change) = outcome { return change }
        return nil
    }

    static func json(_ change: DerivedChange?) throws -> [String: Any] {
        let change = try #require(change)
        return try #require(try JSONSerialization.jsonObject(with: Data(change.json.utf8)) as? [String: Any])
    }

    static let f1 = LocationAddress(dataset: "ds1", venue: "v", building: "B", floor: "F1", room: "R1", location: "asset-1")
    static let f2 = LocationAddress(dataset: "ds1", venue: "v", building: "B", floor: "F2", room: "R9", location: "asset-1")

    @Test("a position update naming another floor moves the one location, its summaries, index and key")
    func moves() throws {
        let store = try Self.store()
        _ = store.apply(try Self.occupancy(floor: "F1", people: 2, at: 0), now: Self.at(0))
        _ = store.apply(try Self.position(floor: "F1", index: 1, at: 1), now: Self.at(1))
        _ = store.takeVacated()
        let moved = Self.change(store.apply(try Self.position(floor: "F2", room: "R9", index: 2, at: 2), now: Self.at(2)))
        #expect(moved?.movedFrom == Self.f1)
        #expect(moved?.address == Self.f2)
        #expect(store.count == 1)
        #expect(store.counters.moves == 1)
        // The new topic gets the whole style, and the position to place the marker by.
        let json = try Self.json(moved)
        #expect(json["changed"] as? [String] == ["visible", "icon", "polygonFillColor"])
        let position = try #require(json["position"] as? [String: Any])
        #expect(position["floorIndex"] as? Int == 2)
        #expect(position["latitude"] as? Double == 55.1)
        // Other domains travel with it.
        #expect(store[Self.f2]?.values.map(\.domain) == ["occupancy", "position"])
        // Indexes and summaries follow it.
        let floor1 = Place(dataset: "ds1", venue: "v", building: "B", floor: "F1")
        let floor2 = Place(dataset: "ds1", venue: "v", building: "B", floor: "F2")
        #expect(store.records(floor: floor1).isEmpty)
        #expect(store.records(floor: floor2).map(\.address) == [Self.f2])
        #expect(store.records(id: "asset-1").map(\.address) == [Self.f2])
        #expect(store.summaries.summary(floor1)?.locations == 0)
        #expect(store.summaries.summary(floor2)?.locations == 1)
        #expect(store.summaries.summary(floor2)?.people == 2)
        #expect(store.summaries.summary(Place(dataset: "ds1", venue: "v", building: "B"))?.locations == 1)
        // Persistence rewrites its row, which stays the one it had: nothing to delete.
        #expect(store.takeVacated().isEmpty)
        #expect(store.takeDirty().map(\.row) == [1])
        #expect(store.takeDirty().isEmpty)
    }

    @Test("a snapshot takes its changed locations in the order of their rows, whatever order they changed in")
    func changedInRowOrder() throws {
        let store = try Self.store()
        func occupancy(_ id: String, _ people: Int, at offset: Int64) throws -> LiveUpdate {
            LiveUpdate(
                topic: try LiveTopic(parsing: "ds1/v/B/F1/R1/\(id)/occupancy"), timestamp: Self.at(offset),
                properties: ["nrOfPeople": "\(people)"])
        }
        for (index, id) in ["a", "b", "c", "d", "e"].enumerated() {
            _ = store.apply(try occupancy(id, 1, at: Int64(index)), now: Self.at(Int64(index)))
        }
        #expect(store.takeDirty().map(\.row) == [1, 2, 3, 4, 5])
        for (index, id) in ["d", "b", "e", "a"].enumerated() {
            _ = store.apply(try occupancy(id, 2, at: Int64(10 + index)), now: Self.at(Int64(10 + index)))
        }
        let changed = store.takeChangedLocations()
        #expect(store.records(changed, in: 0..<changed.count).map(\.row) == [1, 2, 4, 5])
    }

    @Test("an older update from the old placement does not move it back")
    func orderAcrossPlacements() throws {
        let store = try Self.store()
        _ = store.apply(try Self.position(floor: "F1", index: 1, at: 10), now: Self.at(10))
        _ = store.apply(try Self.position(floor: "F2", room: "R9", index: 2, at: 20), now: Self.at(20))
        #expect(store.apply(try Self.position(floor: "F1", index: 1, at: 15), now: Self.at(21)) == .ignoredOutOfOrder)
        #expect(store.records(id: "asset-1").map(\.address) == [Self.f2])
        // A newer one does.
        #expect(Self.change(store.apply(try Self.position(floor: "F1", index: 1, at: 30), now: Self.at(30)))?.movedFrom == Self.f2)
        #expect(store.records(id: "asset-1").map(\.address) == [Self.f1])
    }

    @Test("a domain that does not move locations, naming another placement, is refused with where the location is")
    func placementConflict() throws {
        let store = try Self.store()
        _ = store.apply(try Self.position(floor: "F2", room: "R9", index: 2, at: 0), now: Self.at(0))
        #expect(store.apply(try Self.occupancy(floor: "F1", people: 3, at: 1), now: Self.at(1)) == .placementConflict)
        #expect(store.lastPlacementConflict == Self.f2)
        #expect(store.counters.placementConflicts == 1)
        #expect(store[Self.f2]?.values.map(\.domain) == ["position"])

        // Through the core: counted by reason, with a message that names the setting.
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        _ = core.process(
            topic: "ds1/v/B/F2/R9/asset-1/position", payload: Array(#"{"properties": {"latitude": "1"}}"#.utf8),
            receivedAt: Self.at(0))
        guard
            case .rejected(.placementConflict, let message) = core.process(
                topic: "ds1/v/B/F1/R1/asset-1/occupancy", payload: Array(#"{"properties": {"nrOfPeople": "1"}}"#.utf8),
                receivedAt: Self.at(1))
        else {
            Issue.record("not refused as a placement conflict")
            return
        }
        #expect(message.contains("ds1/v/B/F2/R9/asset-1") && message.contains("domains.occupancy.moves"))
        #expect(core.counters.rejected[.placementConflict] == 1)
        // The core's fast path for tracked locations hands a new placement to the store, which moves it.
        guard
            case .changed(let change) = core.process(
                topic: "ds1/v/B/F3/R1/asset-1/position", payload: Array(#"{"properties": {"latitude": "2"}}"#.utf8),
                receivedAt: Self.at(2))
        else {
            Issue.record("the position at F3 did not move the location")
            return
        }
        #expect(change.movedFrom == Self.f2)
        #expect(change.address.floor == "F3")
    }

    @Test("domains.X.moves decides which domains move locations", arguments: [true, false])
    func movesSetting(occupancyMoves: Bool) throws {
        let store = try Self.store([
            "occupancy": DomainSettings(moves: occupancyMoves), "position": DomainSettings(moves: !occupancyMoves),
        ])
        _ = store.apply(try Self.occupancy(floor: "F1", people: 1, at: 0), now: Self.at(0))
        let occupancy = store.apply(try Self.occupancy(floor: "F2", people: 1, at: 1), now: Self.at(1))
        let position = store.apply(try Self.position(floor: "F3", index: 3, at: 2), now: Self.at(2))
        if occupancyMoves {
            #expect(Self.change(occupancy)?.address.floor == "F2")
            #expect(position == .placementConflict)
            #expect(store.lastPlacementConflict == LocationAddress(path: "ds1/v/B/F2/R1/asset-1")!)
        } else {
            #expect(occupancy == .placementConflict)
            #expect(store.lastPlacementConflict == LocationAddress(path: "ds1/v/B/F1/R1/asset-1")!)
            #expect(Self.change(position)?.address.floor == "F3")
        }
    }

    @Test("a new position publishes even when the style stays; a stale one removes the field")
    func positionInChanges() throws {
        let store = try Self.store()
        let first = Self.change(store.apply(try Self.position(floor: "F1", index: 1, at: 0), now: Self.at(0)))
        #expect(try Self.json(first)["position"] != nil)
        // The marker moves on the floor: the style is the same, the change still goes out.
        let next = Self.change(store.apply(try Self.position(floor: "F1", index: 1, at: 1_000, latitude: "55.2"), now: Self.at(1_000)))
        #expect(next?.changedFields.isEmpty == true)
        let position = try #require(try Self.json(next)["position"] as? [String: Any])
        #expect(position["latitude"] as? Double == 55.2)
        // The same values again: nothing to publish.
        #expect(store.apply(try Self.position(floor: "F1", index: 1, at: 2_000, latitude: "55.2"), now: Self.at(2_000)) == .unchanged)
        // Stale after 60 s: a change without the position.
        let expired = store.expire(now: Self.at(62_001))
        #expect(expired.count == 1)
        #expect(try Self.json(expired.first)["position"] == nil)
        #expect(store.records(id: "asset-1").first?.json.contains("\"position\"") == false)
    }

    func temporaryStore() throws -> String {
        try TestDirectory.make(prefix: "moving").appendingPathComponent("state.db").path
    }

    @Test("a moved location is stored in its row at its new place alone, and restores there")
    func persistence() throws {
        let path = try temporaryStore()
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        let database = try StateDatabase(path: path)
        _ = core.store.apply(try Self.position(floor: "F1", index: 1, at: 0), now: Self.at(0))
        try database.write(core.takeDirty(), deleting: core.store.takeVacated())
        _ = core.store.apply(try Self.position(floor: "F2", room: "R9", index: 2, at: 1), now: Self.at(1))
        try database.write(core.takeDirty(), deleting: core.store.takeVacated())
        #expect(try database.readAll().records.map(\.address) == [Self.f2])

        let restored = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        _ = try restored.restore(fromFile: path, now: Self.at(2))
        #expect(restored.store.records(id: "asset-1").map(\.address) == [Self.f2])
    }

    @Test("a file that holds one location at two places keeps the newer, deletes the other and clears its style")
    func duplicatesInAFile() throws {
        let path = try temporaryStore()
        func record(_ address: LocationAddress, at offset: Int64, version: UInt64) -> LocationRecord {
            LocationRecord(
                address: address,
                values: [DomainValue(domain: "position", properties: ["latitude": "1"], timestamp: Self.at(offset))],
                published: DerivedStyle(style: Style([.visible: .flag(true)])), version: version)
        }
        // F1 (older values, higher version) is read first: the file is in row order.
        let database = try StateDatabase(path: path)
        try database.write([
            LocationRow(row: 1, record: record(Self.f1, at: 0, version: 9)), LocationRow(row: 2, record: record(Self.f2, at: 5, version: 4)),
        ])
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        let result = try core.restore(fromFile: path, now: Self.at(6))
        #expect(result.count == 2)
        #expect(core.store.count == 1)
        let kept = try #require(core.store.records(id: "asset-1").first)
        #expect(kept.address == Self.f2)
        // Versions never go backwards: 9 is kept, and the restore's derivation under these
        // rules (the file names none) publishes once more.
        #expect(kept.version == 10)
        #expect(core.store.takeStaleStyleAddresses() == [Self.f1])
        // The location stays in the first row, with the newer values; the second row goes.
        let vacated = core.store.takeVacated()
        #expect(vacated == [2])
        let dirty = core.takeDirty()
        #expect(dirty.map(\.row) == [1])
        try database.write(dirty, deleting: vacated)
        #expect(try database.readAll().records.map(\.address) == [Self.f2])
        #expect(core.store.summaries.summary(Place(dataset: "ds1", venue: "v", building: "B"))?.locations == 1)
    }

    @Test("a file's highest row is 0 when empty, at least its count, and its count but for deleted rows")
    func highestRow() throws {
        let database = try StateDatabase(path: try temporaryStore())
        #expect(try database.highestRow() == 0)
        func row(_ number: Int64, _ address: LocationAddress) -> LocationRow {
            LocationRow(
                row: number,
                record: LocationRecord(
                    address: address,
                    values: [DomainValue(domain: "position", properties: ["latitude": "1"], timestamp: Self.at(number))]))
        }
        try database.write([row(1, Self.f1), row(2, Self.f2)])
        #expect(try database.highestRow() == 2)
        #expect(try database.countRows() == 2)
        try database.write([], deleting: [1])
        #expect(try database.highestRow() == 2)
        #expect(try database.countRows() == 1)
        // A restore's progress counts to the highest row: here it ends below it.
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        var told: [(Int, Int)] = []
        let restored = try core.restore(fromFile: database.path) { told.append(($0, $1)) }
        #expect(restored.count == 1)
        #expect(told.first.map { [$0.0, $0.1] } == [0, 2])
        #expect(told.last.map { [$0.0, $0.1] } == [1, 2])
    }

    @Test("a payload id other than the topic's location names the location; the topic places it")
    func payloadID() throws {
        let core = LiveCore(ruleSet: try Self.ruleSet(), subscriptions: [try TopicCriteria(dataset: "ds1")])
        func send(_ topic: String, _ payload: String, at offset: Int64) -> LiveCore.Outcome {
            core.process(topic: topic, payload: Array(payload.utf8), receivedAt: Self.at(offset))
        }
        func address(_ outcome: LiveCore.Outcome) -> LocationAddress? {
            if case .changed(let change) = outcome { return change.address }
            return nil
        }
        // A tracker publishing under its own name, for the asset it is fixed to.
        let first = send("ds1/v/B/F1/R1/tracker-9/position", #"{"id": "asset-1", "properties": {"floorIndex": "1"}}"#, at: 0)
        #expect(address(first) == Self.f1)
        guard case .changed(let moved) = send("ds1/v/B/F2/R9/tracker-9/position", #"{"id": "asset-1", "properties": {"floorIndex": "2"}}"#, at: 1)
        else {
            Issue.record("the second position did not move asset-1")
            return
        }
        #expect(moved.address == Self.f2)
        #expect(moved.movedFrom == Self.f1)
        // The same id as the topic's location, an escaped one (kept as text), none: as usual.
        #expect(address(send("ds1/v/B/F1/R1/desk-1/occupancy", #"{"id": "desk-1", "properties": {"nrOfPeople": "1"}}"#, at: 2))?.location == "desk-1")
        #expect(address(send("ds1/v/B/F1/R1/x/occupancy", #"{"id": "desk\u002D2", "properties": {"nrOfPeople": "1"}}"#, at: 3))?.location == "desk-2")
        #expect(core.store.count == 3)
        // An id that cannot be a topic level is refused with the reason.
        guard case .rejected(.badPayload, let message) = send("ds1/v/B/F1/R1/x/occupancy", #"{"id": "a/b", "properties": {"nrOfPeople": "1"}}"#, at: 4)
        else {
            Issue.record("an id with a slash was not refused")
            return
        }
        #expect(message.hasPrefix("\"id\" cannot name a location"))
    }
}
