/// The properties of a live update: names to string values, in the order received.
///
/// Updates carry a handful of properties, so a small array beats a dictionary for both
/// building and lookup.
public struct LiveProperties: Hashable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public struct Property: Hashable, Sendable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var properties: [Property] = []

    public init() {}

    /// Properties from a list whose names are known to be distinct (a stored copy).
    public init(distinct properties: [Property]) {
        self.properties = properties
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { self[name] = value }
    }

    /// Makes room for this many properties.
    public mutating func reserveCapacity(_ count: Int) {
        properties.reserveCapacity(count)
    }

    /// Removes every property; `keepingCapacity` keeps the storage for the next ones.
    public mutating func removeAll(keepingCapacity: Bool) {
        properties.removeAll(keepingCapacity: keepingCapacity)
    }

    /// Takes `other`'s properties, writing them into this storage where it has room (and is
    /// not shared), rather than taking `other`'s storage: so that `other`'s can be used again.
    public mutating func replace(with other: LiveProperties) {
        if properties.count == other.count {
            for index in properties.indices { properties[index] = other.properties[index] }
        } else {
            properties.removeAll(keepingCapacity: true)
            properties.append(contentsOf: other.properties)
        }
    }

    /// These properties in storage of their own with no room to spare (a decoded payload's
    /// has room for more): what a holder keeps for long takes this.
    public func compacted() -> LiveProperties {
        guard properties.capacity > properties.count else { return self }
        // Reserved, then appended: both specialized for `Property`. (An array made with
        // `init(unsafeUninitializedCapacity:)` allocates through a generic function of the
        // standard library, which looks up its storage class's metadata at every call.)
        var kept: [Property] = []
        kept.reserveCapacity(properties.count)
        kept.append(contentsOf: properties)
        return LiveProperties(distinct: kept)
    }

    public var count: Int { properties.count }
    public var isEmpty: Bool { properties.isEmpty }

    /// The value of a property; setting a name that exists replaces its value in place,
    /// setting `nil` removes it.
    public subscript(name: String) -> String? {
        get {
            properties.withUnsafeBufferPointer { properties in
                for index in properties.indices where properties[index].name.isSameIdentifier(as: name) { return properties[index].value }
                return nil
            }
        }
        set {
            if let index = properties.indices.first(where: { properties[$0].name.isSameIdentifier(as: name) }) {
                if let newValue {
                    properties[index].value = newValue
                } else {
                    properties.remove(at: index)
                }
            } else if let newValue {
                properties.append(Property(name: name, value: newValue))
            }
        }
    }

    /// A property read as an integer: `"3"`, or a whole number such as `"3.0"`.
    public func int(_ name: String) -> Int? {
        guard let text = self[name] else { return nil }
        if let value = Int(text) { return value }
        if let value = Double(text), value.rounded() == value, abs(value) < 9e15 { return Int(value) }
        return nil
    }

    /// A property read as a finite number.
    public func double(_ name: String) -> Double? {
        guard let text = self[name], let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// A property read as a boolean: `true`/`false` (any case), `1`/`0`.
    public func bool(_ name: String) -> Bool? {
        switch self[name]?.lowercased() {
        case "true", "1": true
        case "false", "0": false
        default: nil
        }
    }

    public func makeIterator() -> IndexingIterator<[Property]> { properties.makeIterator() }
}
