/// The trie behind ``TopicIndex``: not generic, and stored as flat records, so that matching
/// runs without reference counting, generic metadata or allocation.
///
/// - Nodes are indices into `nodes`; node 0 is the root.
/// - The exact edges of every node live in one open-addressing hash table keyed by
///   (parent node, level bytes). Its slots are 64-byte, cache-line-aligned records that hold
///   the level inline (up to 24 bytes; longer ones in `longKeys`) and a copy of the child's
///   node record, so following an exact edge touches one cache line. Levels compare byte for
///   byte, as MQTT requires.
/// - Each node's `+` child is a field; filters ending at a node, or with `#` right below it,
///   are linked lists of entry numbers through `entryNext`.
@usableFromInline
final class TopicTrie {
    struct Node: Equatable {
        var single: Int32 = -1
        /// First entry of the filters that end here.
        var terminal: Int32 = -1
        /// First entry of the filters whose next and last level is `#`.
        var multi: Int32 = -1
        /// How many exact edges leave this node.
        var exactChildren: Int32 = 0
        /// One bit per exact child, chosen by the top bits of its level hash: a level whose
        /// bit is clear has no edge here, and the table is not touched. Bits of removed
        /// children stay set (costing at most a wasted lookup) until the node has none.
        var childBits: UInt64 = 0
    }

    /// One hash-table slot: 64 bytes, one cache line.
    struct Edge {
        /// 0 marks an empty slot.
        var hash: UInt64 = 0
        var parent: Int32 = 0
        var child: Int32 = 0
        /// A copy of `nodes[child]`, kept in step by `sync`.
        var record = Node()
        var keyLength: Int32 = 0
        /// Where a key longer than `inlineKeyCapacity` starts in `longKeys`.
        var keyOffset: Int32 = 0
        var inlineKey: (UInt64, UInt64) = (0, 0)
    }

    static let inlineKeyCapacity = 16
    static let inlineKeyOffset = MemoryLayout<Edge>.offset(of: \Edge.inlineKey)!

    // A trie is changed only through its index's copy-on-write (never while a match runs
    // over it), so what a match reads opts out of the run-time exclusivity check, which
    // would otherwise cost a thread-local lookup per property read per match.
    @exclusivity(unchecked) private(set) var nodes = FlatBuffer<Node>()
    private var freeNodes: [Int32] = []
    @exclusivity(unchecked) private(set) var edges: UnsafeMutablePointer<Edge>
    @exclusivity(unchecked) private(set) var capacity: Int
    private var edgeCount = 0
    @exclusivity(unchecked) private(set) var longKeys = FlatBuffer<UInt8>()
    /// Bytes of `longKeys` that removed edges no longer use; compacted when they dominate.
    private var unusedKeyBytes = 0
    @exclusivity(unchecked) private(set) var entryNext = FlatBuffer<Int32>()
    /// Per-index random seed: the level hash is not predictable from outside.
    let seed: UInt64

    @usableFromInline
    init() {
        var generator = SystemRandomNumberGenerator()
        seed = generator.next() | 1
        capacity = 16
        edges = Self.allocate(capacity)
        nodes.append(Node())
    }

    private init(copying other: TopicTrie) {
        nodes = other.nodes.copy()
        freeNodes = other.freeNodes
        capacity = other.capacity
        edges = Self.allocate(capacity)
        edges.update(from: other.edges, count: capacity)
        edgeCount = other.edgeCount
        longKeys = other.longKeys.copy()
        unusedKeyBytes = other.unusedKeyBytes
        entryNext = other.entryNext.copy()
        seed = other.seed
    }

    deinit {
        edges.deinitialize(count: capacity)
        edges.deallocate()
        nodes.free()
        longKeys.free()
        entryNext.free()
    }

    @usableFromInline
    func copy() -> TopicTrie { TopicTrie(copying: self) }

    private static func allocate(_ capacity: Int) -> UnsafeMutablePointer<Edge> {
        precondition(MemoryLayout<Edge>.stride == 64, "an edge slot must fill one cache line")
        let raw = UnsafeMutableRawPointer.allocate(byteCount: capacity * 64, alignment: 64)
        let edges = raw.bindMemory(to: Edge.self, capacity: capacity)
        edges.initialize(repeating: Edge(), count: capacity)
        return edges
    }

    // MARK: - Registration

    /// How a node was reached: through an exact edge (whose slot caches the node's record),
    /// or not (the root, a `+` child).
    private typealias Via = (parent: Int32, key: String)?

    /// Adds entry `entry` under `filter`.
    @usableFromInline
    func insert(_ filter: TopicFilter, entry: Int32) {
        while Int(entry) >= entryNext.count { entryNext.append(-1) }
        var node: Int32 = 0
        var via: Via = nil
        for level in filter.levels {
            switch level {
            case .exact(let text):
                let child = exactChild(of: node, text, create: true)
                sync(node, via)
                (node, via) = (child, (node, text))
            case .single:
                if nodes[Int(node)].single < 0 {
                    let child = newNode()
                    nodes[Int(node)].single = child
                    sync(node, via)
                }
                (node, via) = (nodes[Int(node)].single, nil)
            case .multi:
                entryNext[Int(entry)] = nodes[Int(node)].multi
                nodes[Int(node)].multi = entry
                sync(node, via)
                return
            }
        }
        entryNext[Int(entry)] = nodes[Int(node)].terminal
        nodes[Int(node)].terminal = entry
        sync(node, via)
    }

    /// Removes entry `entry` from under `filter` and prunes the nodes that held only it.
    /// - Returns: whether it was there.
    @usableFromInline
    @discardableResult
    func remove(_ filter: TopicFilter, entry: Int32) -> Bool {
        var path: [(node: Int32, via: Via, level: TopicFilter.Level)] = []
        var node: Int32 = 0
        var via: Via = nil
        var removed = false
        for level in filter.levels {
            switch level {
            case .exact(let text):
                let child = exactChild(of: node, text, create: false)
                guard child >= 0 else { return false }
                path.append((node, via, level))
                (node, via) = (child, (node, text))
            case .single:
                let child = nodes[Int(node)].single
                guard child >= 0 else { return false }
                path.append((node, via, level))
                (node, via) = (child, nil)
            case .multi:
                removed = unlink(entry, from: &nodes[Int(node)].multi)
            }
        }
        if filter.levels.last != .multi {
            removed = unlink(entry, from: &nodes[Int(node)].terminal)
        }
        sync(node, via)
        // Prune from the bottom up.
        var child = node
        for (parent, parentVia, level) in path.reversed() {
            guard nodes[Int(child)] == Node() else { break }
            switch level {
            case .exact(let text): removeEdge(parent: parent, text)
            case .single: nodes[Int(parent)].single = -1
            case .multi: break
            }
            sync(parent, parentVia)
            freeNodes.append(child)
            child = parent
        }
        if unusedKeyBytes > 4096 && unusedKeyBytes > longKeys.count / 2 { compactKeys() }
        return removed
    }

    private func unlink(_ entry: Int32, from head: inout Int32) -> Bool {
        let entryNext = entryNext
        if head == entry {
            head = entryNext[Int(entry)]
            return true
        }
        var current = head
        while current >= 0 {
            let next = entryNext[Int(current)]
            if next == entry {
                entryNext[Int(current)] = entryNext[Int(entry)]
                return true
            }
            current = next
        }
        return false
    }

    private func newNode() -> Int32 {
        if let reused = freeNodes.popLast() {
            nodes[Int(reused)] = Node()
            return reused
        }
        nodes.append(Node())
        return Int32(nodes.count - 1)
    }

    /// Copies a node's record into the slot of the exact edge that leads to it.
    private func sync(_ node: Int32, _ via: Via) {
        guard let (parent, key) = via else { return }
        let slot = slotOf(parent: parent, key)
        if slot >= 0 { edges[slot].record = nodes[Int(node)] }
    }

    // MARK: - Exact edges

    private func slotOf(parent: Int32, _ text: String) -> Int {
        var text = text
        return text.withUTF8 { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            return Self.find(
                edges: edges, mask: capacity - 1, longKeys: longKeys.base, parent: parent, key: raw,
                hash: Self.levelHash(seed: seed, parent: parent, raw))
        }
    }

    private func exactChild(of parent: Int32, _ text: String, create: Bool) -> Int32 {
        let slot = slotOf(parent: parent, text)
        if slot >= 0 { return edges[slot].child }
        guard create else { return -1 }
        let child = newNode()
        var text = text
        text.withUTF8 { bytes in
            let raw = UnsafeRawBufferPointer(bytes)
            var edge = Edge(
                hash: Self.levelHash(seed: seed, parent: parent, raw), parent: parent, child: child,
                keyLength: Int32(raw.count))
            if raw.count <= Self.inlineKeyCapacity {
                withUnsafeMutableBytes(of: &edge.inlineKey) { $0.copyMemory(from: raw) }
            } else {
                edge.keyOffset = Int32(longKeys.count)
                longKeys.append(contentsOf: raw)
            }
            insertEdge(edge)
            nodes[Int(parent)].childBits |= Self.childBit(edge.hash)
        }
        nodes[Int(parent)].exactChildren += 1
        return child
    }

    private func insertEdge(_ edge: Edge) {
        if (edgeCount + 1) * 3 > capacity { growEdges() }
        let mask = capacity - 1
        var slot = Int(truncatingIfNeeded: edge.hash) & mask
        while edges[slot].hash != 0 { slot = (slot + 1) & mask }
        edges[slot] = edge
        edgeCount += 1
    }

    private func removeEdge(parent: Int32, _ text: String) {
        let slot = slotOf(parent: parent, text)
        guard slot >= 0 else { return }
        if Int(edges[slot].keyLength) > Self.inlineKeyCapacity { unusedKeyBytes += Int(edges[slot].keyLength) }
        nodes[Int(parent)].exactChildren -= 1
        if nodes[Int(parent)].exactChildren == 0 { nodes[Int(parent)].childBits = 0 }
        // Backward-shift deletion keeps every probe sequence intact without tombstones.
        let mask = capacity - 1
        var hole = slot
        var next = (hole + 1) & mask
        while edges[next].hash != 0 {
            let home = Int(truncatingIfNeeded: edges[next].hash) & mask
            let reachable = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
            if !reachable {
                edges[hole] = edges[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        edges[hole] = Edge()
        edgeCount -= 1
    }

    private func growEdges() {
        let old = edges
        let oldCapacity = capacity
        capacity *= 2
        edges = Self.allocate(capacity)
        edgeCount = 0
        for slot in 0..<oldCapacity where old[slot].hash != 0 { insertEdge(old[slot]) }
        old.deinitialize(count: oldCapacity)
        old.deallocate()
    }

    private func compactKeys() {
        var compacted = FlatBuffer<UInt8>(capacity: longKeys.count - unusedKeyBytes)
        for slot in 0..<capacity where edges[slot].hash != 0 && Int(edges[slot].keyLength) > Self.inlineKeyCapacity {
            let start = Int(edges[slot].keyOffset)
            edges[slot].keyOffset = Int32(compacted.count)
            compacted.append(
                contentsOf: UnsafeRawBufferPointer(start: longKeys.base + start, count: Int(edges[slot].keyLength)))
        }
        longKeys.free()
        longKeys = compacted
        unusedKeyBytes = 0
    }

    /// The slot of the edge (parent, key), or -1.
    @inline(__always)
    static func find(
        edges: UnsafeMutablePointer<Edge>, mask: Int, longKeys: UnsafeMutablePointer<UInt8>, parent: Int32,
        key: UnsafeRawBufferPointer, hash: UInt64
    ) -> Int {
        var slot = Int(truncatingIfNeeded: hash) & mask
        while true {
            let edge = edges + slot
            let stored = edge.pointee.hash
            if stored == 0 { return -1 }
            if stored == hash && edge.pointee.parent == parent && Int(edge.pointee.keyLength) == key.count {
                let bytes =
                    key.count <= inlineKeyCapacity
                    ? UnsafeRawPointer(edge) + inlineKeyOffset
                    : UnsafeRawPointer(longKeys + Int(edge.pointee.keyOffset))
                if bytesEqual(bytes, key.baseAddress, key.count) { return slot }
            }
            slot = (slot + 1) & mask
        }
    }

    @inline(__always)
    static func childBit(_ hash: UInt64) -> UInt64 { 1 &<< (hash >> 58) }

    /// A fast keyed hash of (parent, level bytes), never 0: multiply-fold mixing of 8-byte words.
    @inline(__always)
    static func levelHash(seed: UInt64, parent: Int32, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash = seed ^ (UInt64(UInt32(bitPattern: parent)) &* 0x9E37_79B9_7F4A_7C15)
        let count = bytes.count
        var index = 0
        while index + 8 <= count {
            hash = fold(hash ^ bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self), 0xA076_1D64_78BD_642F)
            index += 8
        }
        var tail = UInt64(truncatingIfNeeded: count) << 56
        var shift: UInt64 = 0
        while index < count {
            tail |= UInt64(bytes[index]) << shift
            shift += 8
            index += 1
        }
        hash = fold(hash ^ tail, 0xE703_7ED1_A0B4_28DB)
        hash = fold(hash, 0x8EBC_6AF0_9C88_C6E3)
        return hash == 0 ? 1 : hash
    }
}


@inline(__always)
func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let product = a.multipliedFullWidth(by: b)
    return product.high ^ product.low
}

/// Whether `count` bytes at `a` and at `b` are equal, eight at a time (the topic index's
/// level keys; the core's payload ids against topic levels).
@inlinable @inline(__always)
package func bytesEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer?, _ count: Int) -> Bool {
    guard count > 0, let b else { return true }
    var index = 0
    while index + 8 <= count {
        if a.loadUnaligned(fromByteOffset: index, as: UInt64.self) != b.loadUnaligned(fromByteOffset: index, as: UInt64.self) {
            return false
        }
        index += 8
    }
    while index < count {
        if a.load(fromByteOffset: index, as: UInt8.self) != b.load(fromByteOffset: index, as: UInt8.self) { return false }
        index += 1
    }
    return true
}
