import LiveTopics

/// The current value of one domain at a location.
public struct DomainValue: Hashable, Sendable {
    public var domain: String
    public var properties: LiveProperties
    public var timestamp: LiveTimestamp
    /// Older than its domain's `staleAfter`: kept (for ordering), but counts as absent.
    public var stale: Bool
    /// The update carried no timestamp of its own: `timestamp` is when it was received, on
    /// the daemon's clock, and moves with that clock when it is stepped.
    public var stampedOnReceipt: Bool

    public init(
        domain: String, properties: LiveProperties, timestamp: LiveTimestamp, stale: Bool = false, stampedOnReceipt: Bool = false
    ) {
        self.domain = domain
        self.properties = properties
        self.timestamp = timestamp
        self.stale = stale
        self.stampedOnReceipt = stampedOnReceipt
    }
}

/// What rules and labels read: a location's domain values (stale ones count as absent),
/// plus the catalog's capacity as the default for `occupancy.capacity`.
public struct LiveValues: Sendable {
    public var domains: [DomainValue]
    public var catalogCapacity: String?
    /// The tags of `domains`' names, when their holder keeps them: rules then find a
    /// domain's value without reading the others.
    package var domainTags: IdentifierTags?

    public init(domains: [DomainValue], catalogCapacity: String? = nil) {
        self.domains = domains
        self.catalogCapacity = catalogCapacity
    }

    /// The value of a property, or `nil`. An unqualified reference looks in every domain;
    /// `occupancy.capacity` falls back on the catalog's capacity.
    public subscript(reference: PropertyReference) -> String? {
        domains.withUnsafeBufferPointer { domains in
            Self.position(of: reference, in: domains, tags: domainTags, catalogCapacity: catalogCapacity).map {
                Self.text(at: $0, in: domains, catalogCapacity: catalogCapacity)
            }
        }
    }

    /// Where a property's value is: its domain's and its own index, or `domain` -1 for the
    /// catalog's capacity.
    struct PropertySlot {
        var domain: Int32
        var property: Int32
    }

    // The lookups work on the values' buffer, so that the evaluator, which has it at hand
    // for a whole derivation, reads values without copying or retaining the array.

    /// Where a property's value is among `domains`, if it has one (see ``subscript(_:)``).
    /// `tags`: the domains' tags, if known (only the values whose tag matches are read).
    static func position(
        of reference: PropertyReference, in domains: UnsafeBufferPointer<DomainValue>, tags: IdentifierTags? = nil,
        catalogCapacity: String?
    ) -> PropertySlot? {
        if let domain = reference.domain {
            let fresh = index(ofDomain: domain, in: domains, tags: tags).flatMap { domains[$0].stale ? nil : $0 }
            return position(of: reference, inValueAt: fresh, in: domains, catalogCapacity: catalogCapacity)
        }
        for index in domains.indices where !domains[index].stale {
            if let position = find(reference.name, in: domains, at: index) { return position }
        }
        return reference.name == BuiltInDomain.capacity.name && catalogCapacity != nil ? PropertySlot(domain: -1, property: 0) : nil
    }

    /// Where `domain`'s value (fresh or stale) is among `domains`. With their `tags`, only
    /// the values whose tag is `domain`'s (`tag`, when the caller has it) are read.
    @inlinable
    public static func index(
        ofDomain domain: String, tag: UInt8? = nil, in domains: UnsafeBufferPointer<DomainValue>, tags: IdentifierTags?
    ) -> Int? {
        guard let tags else { return domains.firstIndex { $0.domain.isSameIdentifier(as: domain) } }
        return tags.firstIndex(tag: tag ?? IdentifierTags.tag(of: domain), count: domains.count) {
            domains[$0].domain.isSameIdentifier(as: domain)
        }
    }

    /// ``position(of:in:catalogCapacity:)`` for a reference with a domain, where that
    /// domain's value is already known: at `index` in `domains`, or `nil` when it has no
    /// fresh value.
    @inline(__always)
    static func position(
        of reference: PropertyReference, inValueAt index: Int?, in domains: UnsafeBufferPointer<DomainValue>,
        catalogCapacity: String?
    ) -> PropertySlot? {
        if let index, let position = find(reference.name, in: domains, at: index) { return position }
        let capacity =
            catalogCapacity != nil && reference.name == BuiltInDomain.capacity.name
            && reference.domain == BuiltInDomain.headcount.rawValue
        return capacity ? PropertySlot(domain: -1, property: 0) : nil
    }

    private static func find(_ name: String, in domains: UnsafeBufferPointer<DomainValue>, at domain: Int) -> PropertySlot? {
        domains[domain].properties.properties.withUnsafeBufferPointer { properties in
            for index in properties.indices where properties[index].name.isSameIdentifier(as: name) {
                return PropertySlot(domain: Int32(domain), property: Int32(index))
            }
            return nil
        }
    }

    /// The text at a position found by ``position(of:in:catalogCapacity:)``.
    @inline(__always)
    static func text(at position: PropertySlot, in domains: UnsafeBufferPointer<DomainValue>, catalogCapacity: String?) -> String {
        position.domain < 0
            ? catalogCapacity!
            : domains[Int(position.domain)].properties.properties[Int(position.property)].value
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
