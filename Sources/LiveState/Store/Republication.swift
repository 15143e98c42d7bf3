import LiveTopics

/// The styles a convergence found missing at the broker, published again a few at a time:
/// a walk over the store's locations that makes each unseen location's change only when the
/// output has room for it (``next(now:)``).
///
/// A broker that lost every retained style at a million locations wants a million
/// publications; made all at once, each would wait in the output's line as a change of its
/// own (hundreds of bytes a location on top of the state). Walked, what waits is bounded by
/// what the caller lets out at a time, and a change is made only as it can leave.
///
/// The store's locations are only ever appended, so a position in them stays valid while the
/// walk goes on; a location added meanwhile publishes its first style itself, and is past
/// ``end``. A location whose change went out meanwhile (``published(_:)``) is skipped: the
/// broker gets that change.
public struct Republication {
    private let store: LiveStore
    /// The locations whose style the broker holds, or that were published since the read began.
    private var seen: SeenLocations
    private let partition: Partition?
    /// The next location to look at, and the count of locations when the walk began.
    private var position = 0
    private let end: Int
    /// Changes made so far.
    public private(set) var republished = 0

    init(store: LiveStore, seen: SeenLocations, partition: Partition?) {
        self.store = store
        self.seen = seen
        self.partition = partition
        end = store.locations.count
    }

    /// At most this many locations are still to be looked at (each may need publishing again).
    public var remaining: Int { end - position }

    public var isFinished: Bool { position >= end }

    /// The next location's style to publish again, as a change under its next version; nil
    /// once every location was looked at.
    public mutating func next(now: LiveTimestamp) -> DerivedChange? {
        let locations = store.locations.locations
        while position < end {
            let state = locations[position]
            position += 1
            // A location outside the partition (kept from a run with other `partition.owns`)
            // is another daemon's to publish.
            guard !seen.contains(state), partition?.owns(state.address) ?? true,
                let change = store.republication(state, now: now)
            else { continue }
            republished += 1
            return change
        }
        return nil
    }

    /// A change of this location went out: the broker gets it, and it needs no publishing again.
    public mutating func published(_ address: LocationAddress) {
        guard position < end, let state = store.locations.find(at: address) else { return }
        seen.insert(state)
    }
}
