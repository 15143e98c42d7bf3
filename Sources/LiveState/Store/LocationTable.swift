import CPrefetch
import LiveTopics

/// The tracked locations, found by the bytes of an incoming topic's path
/// (`dataset/venue/building/floor/room/location`) without building a key, and keyed by the
/// location's identity: its dataset and id, the path's first and last components. A
/// location that moves keeps its slot; a topic that names another placement finds it all
/// the same, and the store tells the two apart by comparing the path.
///
/// Open addressing with linear probing: a slot holds an identity's hash and its location,
/// and a hit is confirmed against the location's own address, so the table keeps no copy
/// of the path and a lookup reads one slot and the location it needs anyway. One table
/// serves the updates, the moves and the queries by id: at a million locations a second
/// index by identity would cost 32 bytes a location.
package struct LocationTable {
    private struct Slot {
        /// The identity's hash; 0 marks an empty slot (``hash(_:)`` never returns 0).
        var hash: UInt64 = 0
        /// Owned by `locations`.
        var location: Unmanaged<LocationState>?
    }

    /// Every location, in the order it was first seen; owns them.
    private(set) var locations: [LocationState] = []
    private var slots = [Slot](repeating: Slot(), count: 16)

    var count: Int { locations.count }

    /// The location with the identity of `path` (the same dataset and id), wherever it is
    /// placed; `hash` is the path's ``hash(_:)``. The caller compares the placement
    /// (``LocationAddress/hasPath(_:)``) when it matters.
    func find(_ path: UnsafeRawBufferPointer, hash: UInt64) -> LocationState? {
        // The same path, the common case, is one comparison; another placement of the same
        // location is the rare second.
        probe(hash) { $0.address.hasPath(path) || $0.address.hasIdentity(ofPath: path) }
    }

    /// The first location in the run of slots from `hash`'s with that hash for which `matches` holds.
    private func probe(_ hash: UInt64, _ matches: (LocationState) -> Bool) -> LocationState? {
        slots.withUnsafeBufferPointer { slots in
            let mask = slots.count - 1
            var index = Int(truncatingIfNeeded: hash) & mask
            while true {
                let slot = slots[index]
                if slot.hash == 0 { return nil }
                if slot.hash == hash, let location = slot.location?.takeUnretainedValue(), matches(location) { return location }
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

    /// The location placed at this address (not one with its identity placed elsewhere).
    func find(at address: LocationAddress) -> LocationState? {
        address.withPathBytes { find(atPath: $0) }
    }

    /// The location placed at this path (`dataset/venue/building/floor/room/location`).
    func find(atPath path: UnsafeRawBufferPointer) -> LocationState? {
        probe(Self.hash(path)) { $0.address.hasPath(path) }
    }

    /// The location with this address's identity, wherever it is placed.
    func find(_ address: LocationAddress) -> LocationState? {
        address.withPathBytes { find($0, hash: Self.hash($0)) }
    }

    /// The location with this dataset and id, wherever it is placed.
    func find(dataset: String, id: String) -> LocationState? {
        var dataset = dataset
        var id = id
        return dataset.withUTF8 { dataset in
            id.withUTF8 { id in
                let (dataset, id) = (UnsafeRawBufferPointer(dataset), UnsafeRawBufferPointer(id))
                return probe(Self.identityHash(dataset: dataset, id: id)) { location in
                    location.address.withPathBytes { path in
                        let identity = LocationAddress.identity(ofPath: path)
                        return identity.dataset.elementsEqual(dataset) && identity.id.elementsEqual(id)
                    }
                }
            }
        }
    }

    /// Adds a location that is not in the table; `hash` is its path's.
    mutating func insert(_ location: LocationState, hash: UInt64) {
        if (locations.count + 1) * 4 > slots.count * 3 { grow() }
        locations.append(location)
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
    static let seed = UInt64.random(in: .min ... .max)

    /// The hash of a path's identity: its dataset's bytes, then its id's (a location
    /// keeps it wherever it moves). Never 0.
    static func hash(_ path: UnsafeRawBufferPointer) -> UInt64 {
        let (dataset, id) = LocationAddress.identity(ofPath: path)
        return identityHash(dataset: dataset, id: id)
    }

    /// The hash of a dataset and a location id.
    static func identityHash(dataset: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer) -> UInt64 {
        hash(id, continuing: hash(dataset, continuing: seed))
    }


    /// The hash of some bytes, continuing from `start` (a seed, or the hash of what came
    /// before them): 8 bytes at a time, each folded in by a 64×64→128-bit multiply (as
    /// wyhash does). Never 0. (Also the slot of a style a restore keeps, see
    /// `RecordCodec.PreparationCache`.)
    package static func hash(_ bytes: UnsafeRawBufferPointer, continuing start: UInt64) -> UInt64 {
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

    /// The hash of a path's identity.
    static func hash(_ path: Substring) -> UInt64 { withBytes(path) { hash($0) } }

    /// The hash of an address's identity.
    static func hash(_ address: LocationAddress) -> UInt64 { address.withPathBytes { hash($0) } }

    private static func withBytes<Result>(_ path: Substring, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let result = path.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
        return Array(path.utf8).withUnsafeBytes(body)
    }
}
