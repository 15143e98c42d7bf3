import DisplayRules
import LiveTopics

/// One domain's value as the store keeps it.
public struct StoredValue: Hashable, Sendable {
    public var value: DomainValue
    /// Older than its domain's `staleAfter`: kept (for ordering), but counts as absent.
    public var stale: Bool

    public init(value: DomainValue, stale: Bool) {
        self.value = value
        self.stale = stale
    }
}

/// Everything the store knows about one location; also what persistence writes.
public struct LocationRecord: Hashable, Sendable {
    public var address: LocationAddress
    public var values: [StoredValue]
    /// The last published style; `nil` until the first change is published.
    public var published: DerivedStyle?
    public var version: UInt64

    public init(address: LocationAddress, values: [StoredValue] = [], published: DerivedStyle? = nil, version: UInt64 = 0) {
        self.address = address
        self.values = values
        self.published = published
        self.version = version
    }

    /// The fresh values, as rules read them.
    public var fresh: [DomainValue] {
        values.compactMap { $0.stale ? nil : $0.value }
    }

    func index(of domain: String) -> Int? {
        values.firstIndex { $0.value.domain == domain }
    }
}
