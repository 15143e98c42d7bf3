import DisplayRules
import Foundation
import LiveDataTestSupport
import LiveTopics
import Testing

@testable import LiveState
@testable import LiveStatePersistence

/// A restore reads each stored record straight into what the store puts back
/// (``RecordCodec/prepare(_:row:ruleEngine:sameRules:cache:)``), reading no more of a style
/// than its key needs when the rules are the ones that derived it. What it makes must be
/// what decoding the whole record and preparing that makes.
@Suite("Restore from the stored bytes")
struct RestorePreparationTests {
    static let address = LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: "room-7")

    static func values(people: Int, available: Bool? = nil) -> [DomainValue] {
        var values = [
            DomainValue(
                domain: "occupancy", properties: ["nrOfPeople": "\(people)", "capacity": "8"],
                timestamp: LiveTimestamp(millisecondsSince1970: 1_763_720_000_000))
        ]
        if let available {
            values.append(
                DomainValue(
                    domain: "availability", properties: ["available": "\(available)"],
                    timestamp: LiveTimestamp(millisecondsSince1970: 1_763_720_000_500), stale: true))
        }
        return values
    }

    /// Records as a run under `engine` writes them, and some it does not make.
    static func records(_ engine: RuleEngine) -> [LocationRecord] {
        func derived(_ values: [DomainValue], hidden: Set<String> = []) -> DerivedStyle {
            engine.derive(address, values: LiveValues(domains: values), hiddenLayers: hidden)
        }
        let occupied = values(people: 3)
        var relabelled = derived(occupied)
        relabelled.style[text: .label] = "written by other rules"
        return [
            LocationRecord(address: address, values: occupied, published: derived(occupied), version: 7),
            LocationRecord(address: address, values: values(people: 0), published: derived(values(people: 0)), version: 8),
            // Its layer hidden: invisible, though the layers alone show it.
            LocationRecord(address: address, values: occupied, published: derived(occupied, hidden: ["occupancy"]), version: 9),
            LocationRecord(
                address: address, values: values(people: 2, available: false), published: derived(values(people: 2, available: false)),
                version: 10),
            LocationRecord(address: address, values: occupied, published: nil, version: 11),
            // Rule names these rules do not have, then the first record's names again.
            LocationRecord(address: address, values: occupied, published: DerivedStyle(style: Style(), rules: ["gone"]), version: 12),
            LocationRecord(address: address, values: values(people: 5), published: derived(values(people: 5)), version: 13),
            LocationRecord(address: address, values: occupied, published: relabelled, version: 14),
        ]
    }

    /// What a prepared location holds, to compare two.
    static func parts(_ prepared: borrowing LiveStore.PreparedLocation) -> String {
        let published: String = switch prepared.published {
        case .none: "none"
        case .key(let key): "key \(key)"
        case .foreign(let foreign): "foreign \(foreign.derived) \(String(describing: foreign.selection))"
        }
        return
            "\(prepared.address) \(prepared.values) \(prepared.version) \(prepared.row) \(prepared.hash) \(published) \(prepared.contribution) \(prepared.outOfScope)"
    }

    /// A record prepared straight from its bytes (with `cache`) and prepared from the record
    /// decoded whole, as ``parts(_:)`` describes each.
    static func preparedBothWays(
        _ record: LocationRecord, row: Int64, _ engine: RuleEngine, sameRules: Bool, cache: inout RecordCodec.PreparationCache
    ) throws -> (straight: String, expected: String) {
        let bytes = RecordCodec.encode(record)
        let straight = try bytes.withUnsafeBytes {
            parts(try RecordCodec.prepare($0, row: row, ruleEngine: engine, sameRules: sameRules, cache: &cache))
        }
        let decoded = try bytes.withUnsafeBytes { try RecordCodec.decode($0) }
        return (straight, parts(LiveStore.prepare(LocationRow(row: row, record: decoded), ruleEngine: engine, sameRules: sameRules)))
    }

    @Test("a record read straight from its bytes is prepared as the decoded record is, with the same rules or not", arguments: [true, false])
    func sameAsDecoded(sameRules: Bool) throws {
        let engine = try LiveStoreTests.engine()
        var cache = RecordCodec.PreparationCache()
        var keys = 0
        for (index, record) in Self.records(engine).enumerated() {
            let (straight, expected) = try Self.preparedBothWays(record, row: Int64(index + 1), engine, sameRules: sameRules, cache: &cache)
            #expect(straight == expected, "record \(index)")
            if straight.contains(" key ") { keys += 1 }
            // Its key read from the style's visibility alone: the hidden layer found again.
            if index == 2 { #expect(straight.contains("hidden: true")) }
        }
        // Not a comparison of two empty results: most of them are kept by key.
        #expect(keys >= 5)
    }

    @Test("a style stored in the bytes of one read before takes the key kept for them, and is prepared as decoding prepares it")
    func keptKeys() throws {
        let engine = try LiveStoreTests.engine()
        var cache = RecordCodec.PreparationCache()
        let records = Self.records(engine)
        var hitsByPass: [Int] = []
        for _ in 0..<2 {
            let before = cache.hits
            for (index, record) in records.enumerated() {
                let (straight, expected) = try Self.preparedBothWays(record, row: Int64(index + 1), engine, sameRules: true, cache: &cache)
                #expect(straight == expected, "record \(index)")
            }
            hitsByPass.append(cache.hits - before)
        }
        // The first pass reads eight different styles; the second finds the four kept ones:
        // not the invisible style (its key depends on the address), the one whose names
        // these rules lack, the one with none, nor the one whose label is too long to be
        // held inline.
        #expect(hitsByPass == [0, 4])
    }

    @Test("a damaged record is refused by the straight read exactly when decoding refuses it")
    func damageRefusedAlike() throws {
        let engine = try LiveStoreTests.engine()
        let bytes = RecordCodec.encode(Self.records(engine)[3])
        var random = SplitMix64(seed: 11)
        var refused = 0
        for _ in 0..<5_000 {
            var damaged = bytes
            for _ in 0..<(1 + Int(random.next() % 3)) {
                damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
            }
            if random.next() % 4 == 0 { damaged.removeLast(Int(random.next() % UInt64(damaged.count))) }
            var cache = RecordCodec.PreparationCache()
            let decoded = damaged.withUnsafeBytes { try? RecordCodec.decode($0) }
            let straight = damaged.withUnsafeBytes {
                try? Self.parts(RecordCodec.prepare($0, row: 1, ruleEngine: engine, sameRules: true, cache: &cache))
            }
            #expect((decoded == nil) == (straight == nil))
            if decoded == nil { refused += 1 }
        }
        #expect(refused > 1_000)
    }
}

extension RestorePreparationTests {
    @Test("damaged records read one after another with one cache are each prepared as a fresh cache prepares them")
    func damagedThroughOneCache() throws {
        let engine = try LiveStoreTests.engine()
        let records = Self.records(engine).map { RecordCodec.encode($0) }
        var random = SplitMix64(seed: 29)
        var shared = RecordCodec.PreparationCache()
        var compared = 0
        for _ in 0..<5_000 {
            var damaged = records[Int(random.next() % UInt64(records.count))]
            // Half of them intact, so that the cache holds keys the damaged ones may resemble.
            if random.next() % 2 == 0 {
                for _ in 0..<(1 + Int(random.next() % 2)) {
                    damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
                }
            }
            var fresh = RecordCodec.PreparationCache()
            let alone = damaged.withUnsafeBytes {
                try? Self.parts(RecordCodec.prepare($0, row: 1, ruleEngine: engine, sameRules: true, cache: &fresh))
            }
            let cached = damaged.withUnsafeBytes {
                try? Self.parts(RecordCodec.prepare($0, row: 1, ruleEngine: engine, sameRules: true, cache: &shared))
            }
            #expect(alone == cached)
            if alone != nil { compared += 1 }
        }
        #expect(compared > 2_000)
        #expect(shared.hits > 1_000)
    }
}
