#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DisplayRules
import LiveTopics

/// Everything the store knows about one location, as a value: what persistence writes and
/// what callers get to read.
public struct LocationRecord: Hashable, Sendable {
    public var address: LocationAddress
    /// The latest value per domain; stale ones are flagged.
    public var values: [DomainValue]
    /// The last published style; `nil` until the first change is published.
    public var published: DerivedStyle?
    public var version: UInt64

    public init(address: LocationAddress, values: [DomainValue] = [], published: DerivedStyle? = nil, version: UInt64 = 0) {
        self.address = address
        self.values = values
        self.published = published
        self.version = version
    }

    /// The fresh values, as rules read them.
    public var fresh: [DomainValue] { values.filter { !$0.stale } }
}

/// A location inside the store: a reference, so that an update changes it in place
/// without copying (or re-hashing) anything. Kept small: at a million locations every
/// byte here is a megabyte.
final class LocationState {
    let address: LocationAddress
    var values: [DomainValue]
    /// The last published style (`nil` until the first change is published).
    var publishedStyle: Style?
    /// The rules behind `publishedStyle`, as the current engine numbers them.
    var publishedSelection: RuleSelection?
    /// The rules' names, kept only when they do not map onto the current rules (restored
    /// from an older config); the next derivation then counts as a change.
    var unmappedRuleNames: [String]?
    var version: UInt64
    /// What it adds to its floor and building summaries.
    var contribution: SummaryTracker.Contribution?
    let floorSummary: SummaryTracker.Aggregate
    let buildingSummary: SummaryTracker.Aggregate
    /// Changed since the last write.
    var dirty = false
    /// One bit per domain with a `staleAfter` (the store numbers them) that has an entry in
    /// the expiry queue: at most one entry per value.
    var scheduledExpiries: UInt64 = 0

    init(
        _ record: LocationRecord, selection: RuleSelection?, floor: SummaryTracker.Aggregate,
        building: SummaryTracker.Aggregate
    ) {
        address = record.address
        values = record.values
        version = record.version
        floorSummary = floor
        buildingSummary = building
        restorePublished(record.published, selection: selection)
    }

    /// Sets the published style from a record's, mapping its rule names onto `engine`.
    func restorePublished(_ published: DerivedStyle?, engine: RuleEngine) {
        restorePublished(published, selection: published.flatMap { engine.selection(named: $0.rules) })
    }

    /// Sets the published style from a record's, whose rule names `selection` maps onto
    /// the current rules (`nil` when they do not map).
    func restorePublished(_ published: DerivedStyle?, selection: RuleSelection?) {
        publishedStyle = published?.style
        publishedSelection = selection
        unmappedRuleNames = published != nil && selection == nil ? published?.rules : nil
    }

    func published(_ engine: RuleEngine) -> DerivedStyle? {
        guard let style = publishedStyle else { return nil }
        if let selection = publishedSelection { return engine.derivedStyle(style, selection) }
        return DerivedStyle(style: style, rules: unmappedRuleNames ?? [])
    }

    func record(_ engine: RuleEngine) -> LocationRecord {
        LocationRecord(address: address, values: values, published: published(engine), version: version)
    }

    @inline(__always)
    func index(of domain: String) -> Int? {
        for index in values.indices where values[index].domain == domain { return index }
        return nil
    }
}

/// The dictionary key of a location: its path `dataset/venue/building/floor/room/location`,
/// compared and hashed as bytes (as MQTT compares topics), and usable with a slice of an
/// incoming topic without copying it.
///
/// The hash is computed once and compared first: Swift's dictionary compares keys at every
/// probe, and comparing the hashes spares it a trip to each key's text in memory.
struct LocationKey: Hashable, Sendable {
    let path: Substring
    let hash: Int

    init(_ path: Substring) {
        self.path = path
        var hasher = Hasher()
        let done: Void? = path.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil {
            for byte in path.utf8 { hasher.combine(byte) }
        }
        hash = hasher.finalize()
    }

    static func == (a: LocationKey, b: LocationKey) -> Bool {
        guard a.hash == b.hash else { return false }
        let equal = a.path.utf8.withContiguousStorageIfAvailable { x in
            b.path.utf8.withContiguousStorageIfAvailable { y in
                x.count == y.count && (x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
        return (equal ?? nil) ?? a.path.utf8.elementsEqual(b.path.utf8)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(hash)
    }
}
