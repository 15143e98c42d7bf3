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
}
