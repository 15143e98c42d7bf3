import LiveTopics

/// The current value of one domain at a location.
public struct DomainValue: Hashable, Sendable {
    public var domain: String
    public var properties: LiveProperties
    public var timestamp: LiveTimestamp
    /// Older than its domain's `staleAfter`: kept (for ordering), but counts as absent.
    public var stale: Bool

    public init(domain: String, properties: LiveProperties, timestamp: LiveTimestamp, stale: Bool = false) {
        self.domain = domain
        self.properties = properties
        self.timestamp = timestamp
        self.stale = stale
    }
}

/// What rules and labels read: a location's domain values (stale ones count as absent),
/// plus the catalog's capacity as the default for `occupancy.capacity`.
public struct LiveValues: Sendable {
    public var domains: [DomainValue]
    public var catalogCapacity: String?

    public init(domains: [DomainValue], catalogCapacity: String? = nil) {
        self.domains = domains
        self.catalogCapacity = catalogCapacity
    }

    /// The value of a property, or `nil`. An unqualified reference looks in every domain.
    public subscript(reference: PropertyReference) -> String? {
        // Through a buffer: indexing the array would copy each value (and retain its
        // properties) out of it.
        domains.withUnsafeBufferPointer { domains in
            if let domain = reference.domain {
                for index in domains.indices where domains[index].domain == domain {
                    if !domains[index].stale, let text = domains[index].properties[reference.name] { return text }
                    break
                }
                if domain == "occupancy" && reference.name == "capacity" { return catalogCapacity }
                return nil
            }
            for index in domains.indices where !domains[index].stale {
                if let text = domains[index].properties[reference.name] { return text }
            }
            return reference.name == "capacity" ? catalogCapacity : nil
        }
    }

    /// Whether a domain has a value.
    public func has(_ domain: String) -> Bool {
        for value in domains where value.domain == domain { return !value.stale }
        return false
    }

    /// Whether any domain has a fresh value.
    public var isEmpty: Bool { !domains.contains { !$0.stale } }

    /// The fresh values.
    public var fresh: [DomainValue] { domains.filter { !$0.stale } }
}
