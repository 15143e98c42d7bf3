/// Matches one topic against any number of registered MQTT filters at once.
///
/// A trie over levels with exact, `+` and `#` edges: the cost of a match depends on the
/// topic's depth and on how many registered wildcard paths it meets, not on how many
/// filters are registered. Semantics are MQTT's exactly: `#` matches the parent level
/// (`a/#` matches `a`), empty levels are levels (`a//b`), and `+` or `#` at the first
/// level never matches a topic that starts with `$`.
///
/// A value type with copy-on-write storage. The trie itself is not generic (``TopicTrie``);
/// this thin generic layer is inlinable so that callers get it specialised for their values.
public struct TopicIndex<Value> {
    /// Identifies one registration, for removal. The same filter may be registered many times.
    public struct Registration: Hashable, Sendable, Comparable {
        /// Slot in the low 32 bits, the slot's generation in the high 32, so a stale
        /// registration never removes a newer one that reuses the slot.
        public let id: UInt64

        @usableFromInline
        init(slot: Int32, generation: UInt32) {
            id = UInt64(generation) << 32 | UInt64(UInt32(bitPattern: slot))
        }

        @usableFromInline
        var slot: Int { Int(UInt32(truncatingIfNeeded: id)) }

        @usableFromInline
        var generation: UInt32 { UInt32(truncatingIfNeeded: id >> 32) }

        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.id < rhs.id }
    }

    @usableFromInline var trie = TopicTrie()
    @usableFromInline var values: [Value?] = []
    @usableFromInline var filters: [TopicFilter?] = []
    @usableFromInline var generations: [UInt32] = []
    @usableFromInline var freeSlots: [Int32] = []
    @usableFromInline var registered = 0

    public init() {}

    /// How many registrations the index holds.
    @inlinable public var count: Int { registered }
    @inlinable public var isEmpty: Bool { registered == 0 }

    /// The filter a registration was made with, if it is still registered.
    @inlinable
    public func filter(for registration: Registration) -> TopicFilter? {
        guard isCurrent(registration) else { return nil }
        return filters[registration.slot]
    }

    /// Registers a value under a filter.
    /// - Returns: the registration, to remove it later.
    @inlinable
    @discardableResult
    public mutating func add(_ filter: TopicFilter, _ value: Value) -> Registration {
        if !isKnownUniquelyReferenced(&trie) { trie = trie.copy() }
        let slot: Int32
        if let reused = freeSlots.popLast() {
            slot = reused
            values[Int(slot)] = value
            filters[Int(slot)] = filter
        } else {
            slot = Int32(values.count)
            values.append(value)
            filters.append(filter)
            generations.append(0)
        }
        trie.insert(filter, entry: slot)
        registered += 1
        return Registration(slot: slot, generation: generations[Int(slot)])
    }

    /// Parses a filter and registers a value under it.
    /// - Throws: ``TopicError`` when the filter is invalid.
    @inlinable
    @discardableResult
    public mutating func add(_ filter: String, _ value: Value) throws(TopicError) -> Registration {
        add(try TopicFilter(filter), value)
    }

    /// Removes a registration and prunes the trie nodes it alone used.
    /// - Returns: the value it held, or `nil` if it was not registered.
    @inlinable
    @discardableResult
    public mutating func remove(_ registration: Registration) -> Value? {
        guard isCurrent(registration), let filter = filters[registration.slot] else { return nil }
        if !isKnownUniquelyReferenced(&trie) { trie = trie.copy() }
        let slot = registration.slot
        trie.remove(filter, entry: Int32(slot))
        let value = values[slot]
        values[slot] = nil
        filters[slot] = nil
        generations[slot] &+= 1
        freeSlots.append(Int32(slot))
        registered -= 1
        return value
    }

    /// Calls `body` with every registration whose filter matches the topic name.
    ///
    /// Allocates nothing for topics of up to a few hundred levels.
    /// - Throws: ``TopicError`` when the topic is not a valid MQTT topic name (empty, too
    ///   long, or containing `+`, `#` or NUL).
    @inlinable
    public func forEachMatch(_ topic: String, _ body: (Registration, Value) -> Void) throws(TopicError) {
        var topic = topic
        let result = topic.withUTF8 { bytes in
            Result { () throws(TopicError) in try forEachMatch(bytes: UnsafeRawBufferPointer(bytes), body) }
        }
        try result.get()
    }

    /// ``forEachMatch(_:_:)`` of a topic's UTF-8 bytes, read in place.
    @inlinable
    public func forEachMatch(bytes topic: UnsafeRawBufferPointer, _ body: (Registration, Value) -> Void) throws(TopicError) {
        try values.withUnsafeBufferPointer { (values) throws(TopicError) in
            try generations.withUnsafeBufferPointer { (generations) throws(TopicError) in
                try trie.match(bytes: topic) { entry in
                    let slot = Int(entry)
                    body(Registration(slot: entry, generation: generations[slot]), values[slot].unsafelyUnwrapped)
                }
            }
        }
    }

    /// Whether any registration's filter matches the topic name, read in place: what a
    /// caller that only admits or refuses a topic asks, without the values and generations
    /// ``forEachMatch(bytes:_:)`` reads (a call on an index stored in a class copies what
    /// it reads, a retain and a release each).
    /// - Throws: ``TopicError`` when the topic is not a valid MQTT topic name.
    @inlinable
    public func hasMatch(bytes topic: UnsafeRawBufferPointer) throws(TopicError) -> Bool {
        var found = false
        try trie.match(bytes: topic) { _ in found = true }
        return found
    }

    /// ``hasMatch(bytes:)`` of a topic its caller has found to be a valid topic name (see
    /// ``TopicName``) with its `/` at `slashes`: the bytes are not read again to check them
    /// and find the levels.
    @inlinable
    package func hasMatch(bytes topic: UnsafeRawBufferPointer, slashes: UnsafeBufferPointer<Int>) -> Bool {
        var found = false
        trie.match(bytes: topic, slashes: slashes) { _ in found = true }
        return found
    }

    /// The values of every registration whose filter matches the topic name, in no
    /// particular order.
    /// - Throws: ``TopicError`` when the topic is not a valid MQTT topic name.
    @inlinable
    public func matches(_ topic: String) throws(TopicError) -> [Value] {
        var found: [Value] = []
        try forEachMatch(topic) { _, value in found.append(value) }
        return found
    }

    @inlinable
    func isCurrent(_ registration: Registration) -> Bool {
        registration.slot < generations.count && generations[registration.slot] == registration.generation
            && filters[registration.slot] != nil
    }
}
