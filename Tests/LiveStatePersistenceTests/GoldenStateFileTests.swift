import DisplayRules
import Foundation
import LiveTopics
import LiveDataTestSupport
import Testing

@testable import LiveState
@testable import LiveStatePersistence

/// A state file written by an earlier release must still read: `Fixtures/state-format-1.db`
/// was written once, by the code of its time, from ``GoldenStateFileTests/records``, and is
/// never written again. A change to the record format or to the style fields' stored ids
/// that breaks old files fails here.
@Suite("Golden state file")
struct GoldenStateFileTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/state-format-1.db").path

    /// What the fixture holds: every style field, a badge with some fields, stale and fresh
    /// values, negative numbers, text that is not ASCII, a location never published.
    static var records: [LocationRecord] {
        let everyField = Style([.visible: .flag(true), .zoomFrom: .number(16.5), .zoomTo: .number(22), .icon: .text("room.svg"), .iconVisible: .flag(false), .iconSize: .number(24), .label: .text("3/8 · Sål"), .labelVisible: .flag(true), .polygonVisible: .flag(true), .polygonFillColor: .color(Color(rgb: 0xD64545)), .polygonFillOpacity: .number(0.75), .polygonStrokeColor: .color(Color(rgb: 0x000001)), .polygonStrokeWidth: .number(1.5), .polygonStrokeOpacity: .number(1), .badge: .badge(Badge(text: "3", textColor: Color(rgb: 0xFFFFFF), backgroundColor: Color(rgb: 0))), .displayRank: .integer(-3), .layer: .text("occupancy")])
        let someFields = Style([.zoomTo: .number(19), .polygonFillColor: .color(Color(rgb: 0x4CAF50)), .badge: .badge(Badge(backgroundColor: Color(rgb: 0x123456)))])
        return [
            LocationRecord(
                address: LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: "room-7"),
                values: [
                    DomainValue(
                        domain: "occupancy", properties: ["nrOfPeople": "3", "capacity": "8"],
                        timestamp: LiveTimestamp(millisecondsSince1970: 1_763_720_000_123)),
                    DomainValue(
                        domain: "co2", properties: ["co2Level": "1200"],
                        timestamp: LiveTimestamp(millisecondsSince1970: 1_763_719_000_000), stale: true),
                ],
                published: DerivedStyle(style: everyField, rules: ["occupied", "crowded"], legendState: "Occupied"),
                version: 300),
            LocationRecord(
                address: LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F1", room: "Hall", location: "desk-ø1"),
                values: [
                    DomainValue(
                        domain: "availability", properties: ["available": "false"],
                        timestamp: LiveTimestamp(millisecondsSince1970: -5))
                ],
                published: DerivedStyle(style: someFields, rules: [], legendState: nil), version: 1),
            LocationRecord(
                address: LocationAddress(dataset: "ds2", venue: "v", building: "b", floor: "f", room: "r", location: "asset-1"),
                values: [
                    DomainValue(
                        domain: "position", properties: ["latitude": "55.1", "longitude": "12.1", "floorIndex": "1"],
                        timestamp: LiveTimestamp(millisecondsSince1970: 1_763_720_000_000))
                ]),
        ]
    }

    @Test("a state file of record format 1 reads as it was written")
    func formatOneReads() throws {
        // Read from a copy: opening a file may add SQLite's side files beside it.
        let directory = try TestDirectory.make(prefix: "golden")
        let copy = directory.appendingPathComponent("state.db").path
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: copy)
        let database = try StateDatabase(path: copy)
        // The fixture has the first layout (rows keyed by address): opening it numbers them.
        #expect(database.migrated == Self.records.count)
        let read = try database.readAll()
        #expect(read.unreadable == 0)
        let byAddress = Dictionary(uniqueKeysWithValues: read.records.map { ($0.address, $0) })
        #expect(byAddress.count == Self.records.count)
        for record in Self.records {
            #expect(byAddress[record.address] == record)
        }
    }

    @Test("a state file of the first layout is migrated once, to rows in address order that a restore keeps")
    func firstLayoutMigrates() throws {
        let directory = try TestDirectory.make(prefix: "golden")
        let copy = directory.appendingPathComponent("state.db").path
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: copy)
        #expect(try StateDatabase(path: copy).migrated == 3)
        #expect(try StateDatabase(path: copy).migrated == nil)
        var rows: [LocationRow] = []
        try StateDatabase(path: copy).forEachRecord { rows.append($0) }
        #expect(rows.map(\.row) == [1, 2, 3])
        #expect(rows.map(\.record.address.description) == Self.records.map(\.address.description).sorted())
        // A restore keeps each location's row, and a new location gets the next one.
        let store = LiveStore(ruleEngine: RuleEngine(RuleSet(rules: [])))
        for row in rows { store.restore(row.record, row: row.row) }
        _ = store.takeDirty()
        _ = store.apply(
            LiveUpdate(topic: try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-8/occupancy"), timestamp: .now, properties: ["nrOfPeople": "1"]),
            now: .now)
        #expect(store.takeDirty().map(\.row) == [4])
    }

    @Test("a stored style with a field this version does not know is refused with its id")
    func unknownStoredField() throws {
        let record = LocationRecord(
            address: LocationAddress(dataset: "d", venue: "v", building: "b", floor: "f", room: "r", location: "l"),
            published: DerivedStyle())
        var bytes = RecordCodec.encode(record)
        // It ends with: a published style (1), its field bits (0), no rules (0), no legend state (0).
        #expect(Array(bytes.suffix(4)) == [1, 0, 0, 0])
        // Bit 20: a field of a later version (and so a value this one cannot skip).
        bytes.replaceSubrange((bytes.count - 3)..<(bytes.count - 2), with: [0x80, 0x80, 0x40])
        #expect {
            try bytes.withUnsafeBytes { try RecordCodec.decode($0) }
        } throws: { error in
            "\(error)".contains("stored ids [20]")
        }
    }

    @Test("a corrupt record is refused, never a trap: huge counts, and thousands of random damages")
    func corruptRecords() throws {
        let record = Self.records[0]
        let bytes = RecordCodec.encode(record)
        // The value count (after the format byte, the address and the version) as the
        // largest varint there is: once an Int conversion trap, and a huge reservation.
        let countAt = try bytes.withUnsafeBytes { buffer throws(RecordCodec.DecodingError) -> Int in
            var reader = RecordCodec.Reader(bytes: buffer, position: 1)
            _ = try reader.address()
            _ = try reader.varint()
            return reader.position
        }
        let huge = Array(bytes[..<countAt]) + [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01] + Array(bytes[(countAt + 1)...])
        #expect(throws: RecordCodec.DecodingError.self) { try huge.withUnsafeBytes { try RecordCodec.decode($0) } }
        var random = SplitMix64(seed: 7)
        for _ in 0..<5_000 {
            var damaged = bytes
            for _ in 0..<(1 + Int(random.next() % 3)) {
                damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
            }
            if random.next() % 4 == 0 { damaged.removeLast(Int(random.next() % UInt64(damaged.count))) }
            _ = try? damaged.withUnsafeBytes { try RecordCodec.decode($0) }
        }
    }

    @Test("a state file with a corrupt record restores the others and counts the one it skipped")
    func corruptRecordInAFile() throws {
        let path = try TestDirectory.make(prefix: "corrupt").appendingPathComponent("state.db").path
        let database = try StateDatabase(path: path)
        try database.write(Self.records.enumerated().map { LocationRow(row: Int64($0.offset + 1), record: $0.element) })
        // Overwrite one row's record with a count no record can hold.
        try database.upsert(row: 2, record: [1, 1, 0x41, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        let read = try StateDatabase(path: path).readAll()
        #expect(read.unreadable == 1)
        #expect(Set(read.records.map(\.address)) == [Self.records[0].address, Self.records[2].address])
    }
}
