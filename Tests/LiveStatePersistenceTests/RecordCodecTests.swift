import DisplayRules
import Foundation
import LiveState
import LiveTopics
import Testing

@testable import LiveStatePersistence

@Suite("Record codec and state database")
struct RecordCodecTests {
    func sampleRecord(_ location: String) -> LocationRecord {
        LocationRecord(
            address: LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: location),
            values: [
                DomainValue(domain: "occupancy", properties: ["nrOfPeople": "3", "capacity": "8"], timestamp: .init(millisecondsSince1970: 1_763_720_000_123)),
                DomainValue(domain: "co2", properties: ["co2Level": "ü 900"], timestamp: .init(millisecondsSince1970: -5), stale: true),
            ],
            published: DerivedStyle(
                style: Style([.visible: .flag(true), .zoomFrom: .number(16.5), .zoomTo: .number(22), .icon: .text("room.svg"), .iconVisible: .flag(false), .iconSize: .number(24), .label: .text("3/8"), .labelVisible: .flag(true), .polygonVisible: .flag(true), .polygonFillColor: .color(Color("#D64545")!), .polygonFillOpacity: .number(0.25), .polygonStrokeColor: .color(Color("#000001")!), .polygonStrokeWidth: .number(1.5), .polygonStrokeOpacity: .number(1), .badge: .badge(Badge(text: "3", textColor: Color("#000000"), backgroundColor: nil)), .displayRank: .integer(-3), .layer: .text("occupancy")]),
                rules: ["occupied", "stuffy"], legendState: "Occupied"),
            version: 300)
    }

    @Test("a record survives the binary form unchanged")
    func codecRoundTrip() throws {
        let record = sampleRecord("room-7")
        let bytes = RecordCodec.encode(record)
        let decoded = try bytes.withUnsafeBytes { try RecordCodec.decode($0) }
        #expect(decoded == record)
        let bare = LocationRecord(address: record.address)
        #expect(try RecordCodec.encode(bare).withUnsafeBytes { try RecordCodec.decode($0) } == bare)
        #expect(throws: RecordCodec.DecodingError.self) {
            try Array(bytes.prefix(20)).withUnsafeBytes { try RecordCodec.decode($0) }
        }
    }

    @Test("a damaged record with a number that is not finite, or an empty address component, is refused")
    func codecRefusesDamage() throws {
        var record = LocationRecord(address: try #require(LocationAddress(path: "ds1/hq/B/F3/R7/room-7")))
        record.published = DerivedStyle(style: Style([.iconSize: .number(3)]))
        var bytes = RecordCodec.encode(record)
        let three = withUnsafeBytes(of: Double(3).bitPattern.littleEndian) { Array($0) }
        let at = try #require((0...(bytes.count - 8)).first { Array(bytes[$0..<($0 + 8)]) == three })
        for value in [Double.nan, .infinity] {
            bytes.replaceSubrange(at..<(at + 8), with: withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) })
            #expect(throws: RecordCodec.DecodingError.self) { try bytes.withUnsafeBytes { try RecordCodec.decode($0) } }
        }
        // "ds1" with its length byte 3 made 0 and the name moved into the next component.
        var empty = RecordCodec.encode(LocationRecord(address: record.address))
        empty[1] = 0
        #expect(throws: RecordCodec.DecodingError.self) { try empty.withUnsafeBytes { try RecordCodec.decode($0) } }
    }

    @Test("records written to the SQLite file are read back, the latest write winning")
    func databaseRoundTrip() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-db-\(UUID().uuidString)")
        let path = directory.appendingPathComponent("nested/state.db").path
        do {
            let database = try StateDatabase(path: path)
            try database.write([LocationRow(row: 1, record: sampleRecord("a")), LocationRow(row: 2, record: sampleRecord("b"))])
            var changed = sampleRecord("a")
            changed.version = 301
            try database.write([LocationRow(row: 1, record: changed)])
        }
        let reopened = try StateDatabase(path: path)
        let (records, unreadable) = try reopened.readAll()
        #expect(unreadable == 0)
        #expect(records.count == 2)
        #expect(records.first { $0.address.location == "a" }?.version == 301)
        #expect(records.first { $0.address.location == "b" } == sampleRecord("b"))
        try? FileManager.default.removeItem(at: directory)
    }

    @Test("a snapshot's records, encoded from the store's locations in place (a style its key keeps encoded once), are the records' own bytes, and a write of many statements' worth reads back whole, rewritten rows replaced")
    func encodedSnapshotRoundTrip() throws {
        let rules = RuleSet(
            main: try StyleTemplate(Style([.visible: .flag(true)]), domain: nil),
            rules: [
                Rule(
                    name: "occupied", domain: "occupancy", condition: try CompiledExpression("nrOfPeople > 0", domain: "occupancy"),
                    style: try StyleTemplate(Style([.label: .text("{nrOfPeople}/8"), .polygonFillColor: .color(Color("#D64545")!)]), domain: "occupancy"),
                    legend: "Occupied", layer: nil, priority: 0, order: 0)
            ])
        let store = LiveStore(ruleEngine: RuleEngine(rules))
        func occupy(_ number: Int, _ people: Int) throws {
            _ = store.apply(
                LiveUpdate(
                    topic: try LiveTopic(parsing: "ds1/hq/B/F\(number % 3)/R7/loc-\(number)/occupancy"),
                    timestamp: .init(millisecondsSince1970: 1_763_720_000_000 + Int64(number)), properties: ["nrOfPeople": "\(people)"]),
                now: .init(millisecondsSince1970: 1_763_720_000_000 + Int64(number)))
        }
        // More than two statements' worth of rows and a few more, then 40 of them again: a
        // rewrite that is one statement's worth and some rows on their own.
        let count = 2 * StateDatabase.rowsAtOnce + 6
        for number in 0..<count { try occupy(number, number % 4) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-db-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("state.db").path
        var expected: [Int64: LocationRecord] = [:]
        do {
            let database = try StateDatabase(path: path)
            for round in 0..<2 {
                if round == 1 { for number in 0..<40 { try occupy(number, 9) } }
                let changed = store.takeChangedLocations()
                let encoded = EncodedRecords(changed, in: 0..<changed.count, of: store)
                let records = store.records(changed, in: 0..<changed.count)
                // Four styles, each kept with its key: each encoded once and copied for the rest.
                var kept = 0
                store.forEachRecord(changed, in: 0..<changed.count) { _, _, _, published, _ in
                    if case .kept = published { kept += 1 }
                }
                #expect(kept == changed.count)
                #expect(encoded.rows == records.map(\.row))
                encoded.withRecords { bytes in
                    for (index, record) in records.enumerated() {
                        #expect(Array(bytes(index)) == RecordCodec.encode(record.record), "record \(index)")
                    }
                }
                try database.write(encoded)
                for record in records { expected[record.row] = record.record }
            }
        }
        var read: [Int64: LocationRecord] = [:]
        try StateDatabase(path: path).forEachRecord { read[$0.row] = $0.record }
        #expect(read.count == count)
        #expect(read == expected)
        #expect(read.values.filter { $0.values.first?.properties["nrOfPeople"] == "9" }.count == 40)
    }
}
