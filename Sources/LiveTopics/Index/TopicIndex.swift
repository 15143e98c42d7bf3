/// Matches one topic against any number of registered MQTT filters at once.
///
/// A trie over levels with exact, `+` and `#` edges: the cost of a match depends on the
/// topic's depth and on how many registered wildcard paths it meets, not on how many
/// filters are registered. Semantics are MQTT's exactly: `#` matches the parent level
/// (`a/#` matches `a`), empty levels are levels (`a//b`), and `+` or `#` at the first
/// level never matches a topic that starts with `$`.
///
/// A value type with copy-on-write storage; it is not shared between threads by itself.
public struct TopicIndex<Value> {
    /// Identifies one registration, for removal. The same filter may be registered many times.
    public struct Registration: Hashable, Sendable, Comparable {
        public let id: UInt64
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.id < rhs.id }
    }

    struct Entry {
        let registration: Registration
        var value: Value
    }

    final class Node {
        var children = LevelTable<Node>()
        var single: Node?
        /// Filters that end at this node.
        var terminal: [Entry] = []
        /// Filters whose next and last level is `#`.
        var multi: [Entry] = []

        var isEmpty: Bool { children.isEmpty && single == nil && terminal.isEmpty && multi.isEmpty }

        func copy() -> Node {
            let node = Node()
            for (key, child) in children.entries { node.children.insert(key, child.copy()) }
            node.single = single?.copy()
            node.terminal = terminal
            node.multi = multi
            return node
        }
    }

    private var root = Node()
    private var filters: [Registration: TopicFilter] = [:]
    private var nextID: UInt64 = 1

    public init() {}

    /// How many registrations the index holds.
    public var count: Int { filters.count }
    public var isEmpty: Bool { filters.isEmpty }

    /// The filter a registration was made with.
    public func filter(for registration: Registration) -> TopicFilter? { filters[registration] }

    /// Registers a value under a filter.
    /// - Returns: the registration, to remove it later.
    @discardableResult
    public mutating func add(_ filter: TopicFilter, _ value: Value) -> Registration {
        makeUnique()
        let registration = Registration(id: nextID)
        nextID += 1
        filters[registration] = filter
        var node = root
        for level in filter.levels {
            switch level {
            case .exact(let text):
                let key = Array(text.utf8)
                if let child = node.children.find(key) {
                    node = child
                } else {
                    let child = Node()
                    node.children.insert(key, child)
                    node = child
                }
            case .single:
                if let child = node.single {
                    node = child
                } else {
                    let child = Node()
                    node.single = child
                    node = child
                }
            case .multi:
                node.multi.append(Entry(registration: registration, value: value))
                return registration
            }
        }
        node.terminal.append(Entry(registration: registration, value: value))
        return registration
    }

    /// Parses a filter and registers a value under it.
    /// - Throws: ``TopicError`` when the filter is invalid.
    @discardableResult
    public mutating func add(_ filter: String, _ value: Value) throws(TopicError) -> Registration {
        add(try TopicFilter(filter), value)
    }

    /// Removes a registration and prunes the nodes it alone used.
    /// - Returns: the value it held, or `nil` if it was not registered.
    @discardableResult
    public mutating func remove(_ registration: Registration) -> Value? {
        guard let filter = filters[registration] else { return nil }
        makeUnique()
        filters[registration] = nil
        // The path of nodes from the root, with the edge taken into each.
        var path: [(node: Node, edge: TopicFilter.Level)] = []
        var node = root
        var removed: Value?
        for level in filter.levels {
            switch level {
            case .exact(let text):
                guard let child = node.children.find(Array(text.utf8)) else { return nil }
                path.append((node, level))
                node = child
            case .single:
                guard let child = node.single else { return nil }
                path.append((node, level))
                node = child
            case .multi:
                if let at = node.multi.firstIndex(where: { $0.registration == registration }) {
                    removed = node.multi.remove(at: at).value
                }
            }
        }
        if filter.levels.last != .multi, let at = node.terminal.firstIndex(where: { $0.registration == registration }) {
            removed = node.terminal.remove(at: at).value
        }
        // Prune empty nodes from the bottom up.
        var child = node
        for (parent, edge) in path.reversed() {
            guard child.isEmpty else { break }
            switch edge {
            case .exact(let text): parent.children.remove(Array(text.utf8))
            case .single: parent.single = nil
            case .multi: break
            }
            child = parent
        }
        return removed
    }

    /// Calls `body` with every registration whose filter matches the topic name.
    ///
    /// Allocates nothing for topics of up to 64 levels.
    /// - Throws: ``TopicError`` when the topic is not a valid MQTT topic name (empty, too
    ///   long, or containing `+`, `#` or NUL).
    public func forEachMatch(_ topic: String, _ body: (Registration, Value) -> Void) throws(TopicError) {
        var topic = topic
        let result: TopicError? = topic.withUTF8 { bytes in
            // Find level boundaries and validate in one pass.
            let count = bytes.count
            if count == 0 { return .empty(kind: .topic) }
            if count > TopicName.maximumLength { return .tooLong(kind: .topic, bytes: count) }
            var levels = 1
            for byte in bytes where byte == UInt8(ascii: "/") { levels += 1 }
            return withUnsafeTemporaryAllocation(of: Int.self, capacity: levels * 2) { bounds in
                var level = 0
                var start = 0
                for position in 0..<count {
                    switch bytes[position] {
                    case UInt8(ascii: "/"):
                        bounds[level * 2] = start
                        bounds[level * 2 + 1] = position
                        level += 1
                        start = position + 1
                    case UInt8(ascii: "+"):
                        return .wildcardInTopic(topic: String(decoding: bytes, as: UTF8.self), level: level + 1, wildcard: "+")
                    case UInt8(ascii: "#"):
                        return .wildcardInTopic(topic: String(decoding: bytes, as: UTF8.self), level: level + 1, wildcard: "#")
                    case 0:
                        return .nullCharacter(kind: .topic, string: String(decoding: bytes, as: UTF8.self), level: level + 1)
                    default:
                        continue
                    }
                }
                bounds[level * 2] = start
                bounds[level * 2 + 1] = count
                let matcher = Matcher(
                    base: UnsafeRawBufferPointer(bytes), bounds: UnsafeBufferPointer(bounds), levels: levels)
                let dollar = bytes[0] == UInt8(ascii: "$")
                // A wildcard at the first level never matches a `$` topic.
                if !dollar {
                    for entry in root.multi { body(entry.registration, entry.value) }
                    if let single = root.single { matcher.visit(single, level: 1, body) }
                }
                matcher.descend(root, level: 0, body)
                return nil
            }
        }
        if let result { throw result }
    }

    /// The values of every registration whose filter matches the topic name, in no
    /// particular order.
    /// - Throws: ``TopicError`` when the topic is not a valid MQTT topic name.
    public func matches(_ topic: String) throws(TopicError) -> [Value] {
        var values: [Value] = []
        try forEachMatch(topic) { _, value in values.append(value) }
        return values
    }

    private struct Matcher {
        let base: UnsafeRawBufferPointer
        let bounds: UnsafeBufferPointer<Int>
        let levels: Int

        /// Visits a node reached after consuming `level` levels.
        @inline(__always)
        func visit(_ node: Node, level: Int, _ body: (Registration, Value) -> Void) {
            // `#` below this node matches here too, including the parent level itself.
            for entry in node.multi { body(entry.registration, entry.value) }
            if level == levels {
                for entry in node.terminal { body(entry.registration, entry.value) }
                return
            }
            if let single = node.single { visit(single, level: level + 1, body) }
            descend(node, level: level, body)
        }

        /// Follows the exact edge for the level at `level`, if there is one.
        @inline(__always)
        func descend(_ node: Node, level: Int, _ body: (Registration, Value) -> Void) {
            guard !node.children.isEmpty else { return }
            let start = bounds[level * 2]
            let end = bounds[level * 2 + 1]
            let key = UnsafeRawBufferPointer(rebasing: base[start..<end])
            if let child = node.children.find(key, hash: LevelTable<Node>.hash(key)) {
                visit(child, level: level + 1, body)
            }
        }
    }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&root) { root = root.copy() }
    }
}
