import DisplayRules

/// A published style's key, one object for every location that shows that style.
final class SharedStyleKey: Sendable {
    let key: StyleKey

    init(_ key: StyleKey) {
        self.key = key
    }
}

/// The style keys the locations hold, one object per distinct key: a location holds a
/// reference (8 bytes) where a key takes 57, and a venue shows few distinct styles (the
/// rules' combinations and the labels' texts: "3/8", "CO2 1200"). At a million locations
/// that is 50 MB.
///
/// Keys no location holds any more are dropped when the pool has doubled since the last
/// sweep. Past ``limit`` distinct keys (labels that differ per location), new keys are no
/// longer pooled: each such location holds an object of its own, so a pool never grows
/// without bound.
struct StyleKeyPool {
    private var pool: [StyleKey: SharedStyleKey] = [:]
    /// The last one shared: a restore reads locations in address order, and a room's or a
    /// floor's neighbours tend to show the same style.
    private var last: SharedStyleKey?
    private var sweepAt = 1024
    static let limit = 1 << 16

    /// The shared object of `key`.
    mutating func share(_ key: StyleKey) -> SharedStyleKey {
        if let last, last.key == key { return last }
        let shared = pooled(key)
        last = shared
        return shared
    }

    private mutating func pooled(_ key: StyleKey) -> SharedStyleKey {
        if let existing = pool[key] { return existing }
        if pool.count >= sweepAt { sweep() }
        let made = SharedStyleKey(key)
        if pool.count < Self.limit { pool[key] = made }
        return made
    }

    /// How many distinct keys the pool holds.
    var count: Int { pool.count }

    /// Drops the keys that only the pool holds.
    private mutating func sweep() {
        for key in Array(pool.keys) {
            guard var object = pool.removeValue(forKey: key) else { continue }
            if !isKnownUniquelyReferenced(&object) { pool[key] = object }
        }
        sweepAt = max(1024, pool.count * 2)
    }
}
