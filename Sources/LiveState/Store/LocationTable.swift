import CPrefetch
import LiveTopics

/// The tracked locations, found by the bytes of the path where they are now
/// (`dataset/venue/building/floor/room/location`, a slice of an incoming topic) without
/// building a key. A location that moves is taken out under its old path and put in under
/// its new one (the store finds it by its identity through its read index when a topic
/// names a new placement).
///
/// Open addressing with linear probing: a slot holds a path's hash and its location, and a
/// hit is confirmed against the location's own address, so the table keeps no copy of the
/// path and a lookup reads one slot and the location it needs anyway.
struct LocationTable {
    private struct Slot {
        /// The path's hash; 0 marks an empty slot (``hash(_:)`` never returns 0).
        var hash: UInt64 = 0
        /// Owned by `locations`.
        var location: Unmanaged<LocationState>?
    }

    /// Every location, in the order it was first seen; owns them.
    private(set) var locations: [LocationState] = []
    private var slots = [Slot](repeating: Slot(), count: 16)

    var count: Int { locations.count }

    /// The location whose path hashes to `hash` (see ``hash(_:)``) and is `path`.
    func find(_ path: UnsafeRawBufferPointer, hash: UInt64) -> LocationState? {
        slots.withUnsafeBufferPointer { slots in
            let mask = slots.count - 1
            var index = Int(truncatingIfNeeded: hash) & mask
            while true {
                let slot = slots[index]
                if slot.hash == 0 { return nil }
                if slot.hash == hash, let location = slot.location?.takeUnretainedValue(), location.address.hasPath(path) {
                    return location
                }
                index = (index + 1) & mask
            }
        }
    }

    /// Starts loading the slot where a lookup of the path with this hash begins, so that
    /// a ``find(_:hash:)`` some time later does not wait for it.
    func prefetch(hash: UInt64) {
        slots.withUnsafeBufferPointer { slots in
            livedata_prefetch(slots.baseAddress! + (Int(truncatingIfNeeded: hash) & (slots.count - 1)))
        }
    }

    /// The location with this path.
    /// The second step after ``prefetch(hash:)``, once its slot has loaded: starts loading the
    /// first lines of the location that a slot near it with this hash holds (several
    /// locations' loads then overlap), and returns it for ``LiveStore`` to start loading
    /// its path and values. Nothing is compared: a wrong guess only costs a load.
    func prefetchLocation(hash: UInt64) -> Unmanaged<LocationState>? {
        slots.withUnsafeBufferPointer { slots in
            let mask = slots.count - 1
            var index = Int(truncatingIfNeeded: hash) & mask
            for _ in 0..<4 {
                let slot = slots[index]
                if slot.hash == 0 { return nil }
                if slot.hash == hash, let location = slot.location {
                    let object = UnsafeRawPointer(location.toOpaque())
                    livedata_prefetch(object)
                    livedata_prefetch(object + 64)
                    return location
                }
                index = (index + 1) & mask
            }
            return nil
        }
    }

    func find(_ path: Substring) -> LocationState? {
        Self.withBytes(path) { find($0, hash: Self.hash($0)) }
    }

    /// The location at this address.
    func find(_ address: LocationAddress) -> LocationState? {
        address.withPathBytes { find($0, hash: Self.hash($0)) }
    }

    /// Adds a location that is not in the table; `hash` is its path's.
    mutating func insert(_ location: LocationState, hash: UInt64) {
        if (locations.count + 1) * 4 > slots.count * 3 { grow() }
        locations.append(location)
        place(Slot(hash: hash, location: Unmanaged.passUnretained(location)))
    }

    /// Puts a location that moved under its new path: it is taken out of the slot of `old`
    /// (whose hash is `oldHash`) and put in under `hash`, the hash of its address now.
    mutating func rekey(_ location: LocationState, from oldHash: UInt64, to hash: UInt64) {
        slots.withUnsafeMutableBufferPointer { slots in
            let mask = slots.count - 1
            var hole = Int(truncatingIfNeeded: oldHash) & mask
            while slots[hole].location?.takeUnretainedValue() !== location {
                guard slots[hole].hash != 0 else { return }
                hole = (hole + 1) & mask
            }
            slots[hole] = Slot()
            // Backward-shift deletion: later entries of the run move into the hole when their
            // home slot is not between the hole and where they are.
            var next = (hole + 1) & mask
            while slots[next].hash != 0 {
                let home = Int(truncatingIfNeeded: slots[next].hash) & mask
                let homeIsBetween = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
                if !homeIsBetween {
                    slots[hole] = slots[next]
                    slots[next] = Slot()
                    hole = next
                }
                next = (next + 1) & mask
            }
        }
        place(Slot(hash: hash, location: Unmanaged.passUnretained(location)))
    }

    mutating func reserveCapacity(_ count: Int) {
        locations.reserveCapacity(count)
        var capacity = slots.count
        while count * 4 > capacity * 3 { capacity *= 2 }
        if capacity > slots.count { rehash(capacity: capacity) }
    }

    private mutating func grow() {
        rehash(capacity: slots.count * 2)
    }

    private mutating func rehash(capacity: Int) {
        let old = slots
        slots = [Slot](repeating: Slot(), count: capacity)
        for slot in old where slot.hash != 0 { place(slot) }
    }

    private mutating func place(_ slot: Slot) {
        slots.withUnsafeMutableBufferPointer { slots in
            let mask = slots.count - 1
            var index = Int(truncatingIfNeeded: slot.hash) & mask
            while slots[index].hash != 0 { index = (index + 1) & mask }
            slots[index] = slot
        }
    }

    // MARK: - Hashing

    /// Chosen per process, so that which paths collide cannot be worked out in advance.
    private static let seed = UInt64.random(in: .min ... .max)

    /// The hash of a path's bytes: 8 bytes at a time, each folded in by a 64×64→128-bit
    /// multiply (as wyhash does). Never 0.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 { hash(bytes, continuing: seed) }

    /// The hash of some bytes, continuing from `start` (a seed, or the hash of what came
    /// before them).
    static func hash(_ bytes: UnsafeRawBufferPointer, continuing start: UInt64) -> UInt64 {
        @inline(__always) func mix(_ value: UInt64) -> UInt64 {
            let product = value.multipliedFullWidth(by: 0xA076_1D64_78BD_642F)
            return product.high ^ product.low
        }
        var state = start ^ UInt64(bytes.count) &* 0x9E37_79B9_7F4A_7C15
        var offset = 0
        while offset + 8 <= bytes.count {
            state = mix(state ^ bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) ^ 0xE703_7ED1_A0B4_28DB)
            offset += 8
        }
        if offset < bytes.count {
            var tail: UInt64 = 0
            for index in offset..<bytes.count { tail |= UInt64(bytes[index]) << UInt64((index - offset) * 8) }
            state = mix(state ^ tail ^ 0x8EBC_6AF0_9C88_C6E3)
        }
        let hash = mix(state ^ 0x5899_65CC_7537_4CC3)
        return hash == 0 ? 1 : hash
    }

    /// The hash of a path.
    static func hash(_ path: Substring) -> UInt64 { withBytes(path) { hash($0) } }

    /// The hash of an address's path.
    static func hash(_ address: LocationAddress) -> UInt64 { address.withPathBytes { hash($0) } }

    private static func withBytes<Result>(_ path: Substring, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let result = path.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
        return Array(path.utf8).withUnsafeBytes(body)
    }
}
