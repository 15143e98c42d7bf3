/// An open-addressing hash table from one topic level (its bytes) to a child node.
///
/// Levels are compared byte for byte, as MQTT requires (Swift `String` equality would
/// treat canonically equivalent Unicode as equal, which MQTT does not). Lookups take a
/// borrowed byte range of the incoming topic, so matching allocates nothing.
struct LevelTable<Element: AnyObject> {
    /// Stored hash per slot; 0 marks an empty slot.
    private var hashes: [Int] = []
    private var keys: [[UInt8]] = []
    private var elements: [Element?] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The hash the table uses for a level; never 0.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        let value = hasher.finalize()
        return value == 0 ? 1 : value
    }

    /// The element stored for a level, or `nil`.
    @inline(__always)
    func find(_ bytes: UnsafeRawBufferPointer, hash: Int) -> Element? {
        if count == 0 { return nil }
        return hashes.withUnsafeBufferPointer { hashes in
            let mask = hashes.count - 1
            var slot = hash & mask
            while true {
                let stored = hashes[slot]
                if stored == 0 { return nil }
                if stored == hash && Self.equal(keys[slot], bytes) { return elements[slot] }
                slot = (slot + 1) & mask
            }
        }
    }

    func find(_ key: [UInt8]) -> Element? {
        key.withUnsafeBytes { find($0, hash: Self.hash($0)) }
    }

    /// Inserts or replaces the element for a level.
    mutating func insert(_ key: [UInt8], _ element: Element) {
        if (count + 1) * 4 > hashes.count * 3 { grow() }
        let hash = key.withUnsafeBytes { Self.hash($0) }
        let mask = hashes.count - 1
        var slot = hash & mask
        while hashes[slot] != 0 {
            if hashes[slot] == hash && keys[slot] == key {
                elements[slot] = element
                return
            }
            slot = (slot + 1) & mask
        }
        hashes[slot] = hash
        keys[slot] = key
        elements[slot] = element
        count += 1
    }

    /// Removes a level, keeping probe sequences intact (backward-shift deletion).
    mutating func remove(_ key: [UInt8]) {
        guard count > 0 else { return }
        let hash = key.withUnsafeBytes { Self.hash($0) }
        let mask = hashes.count - 1
        var slot = hash & mask
        while true {
            if hashes[slot] == 0 { return }
            if hashes[slot] == hash && keys[slot] == key { break }
            slot = (slot + 1) & mask
        }
        var hole = slot
        var next = (hole + 1) & mask
        while hashes[next] != 0 {
            let home = hashes[next] & mask
            // Move `next` into the hole unless its home lies cyclically in (hole, next].
            let inRange = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next)
            if !inRange {
                hashes[hole] = hashes[next]
                keys[hole] = keys[next]
                elements[hole] = elements[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        hashes[hole] = 0
        keys[hole] = []
        elements[hole] = nil
        count -= 1
    }

    /// Every stored level and element, in no particular order.
    var entries: [(key: [UInt8], element: Element)] {
        hashes.indices.compactMap { hashes[$0] == 0 ? nil : (keys[$0], elements[$0]!) }
    }

    private mutating func grow() {
        let old = entries
        let capacity = max(4, hashes.count * 2)
        hashes = Array(repeating: 0, count: capacity)
        keys = Array(repeating: [], count: capacity)
        elements = Array(repeating: nil, count: capacity)
        count = 0
        for (key, element) in old { insert(key, element) }
    }

    @inline(__always)
    private static func equal(_ stored: [UInt8], _ bytes: UnsafeRawBufferPointer) -> Bool {
        stored.withUnsafeBytes { stored in
            stored.count == bytes.count
                && (bytes.count == 0 || memcmpBytes(stored.baseAddress!, bytes.baseAddress!, bytes.count))
        }
    }
}

@inline(__always)
private func memcmpBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
    var index = 0
    while index + 8 <= count {
        if a.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            != b.loadUnaligned(fromByteOffset: index, as: UInt64.self)
        {
            return false
        }
        index += 8
    }
    while index < count {
        if a.load(fromByteOffset: index, as: UInt8.self) != b.load(fromByteOffset: index, as: UInt8.self) {
            return false
        }
        index += 1
    }
    return true
}
