import Glibc
import DisplayRules
import LiveTopics

/// Per floor and per building: how many locations are in each legend state, and people
/// against capacity. Kept up to date incrementally (each location holds its two aggregates
/// by reference); handed out at most once per interval per floor or building.
public struct SummaryTracker {
    /// What one location adds to its floor and building.
    struct Contribution: Hashable, Sendable {
        /// Index of the legend title (the rule engine's `legendTitles`), or -1 for none.
        var state: Int32
        var people: Int32
        var capacity: Int32
    }

    public struct Summary: Hashable, Sendable {
        public var key: Place
        public var locations: Int
        /// Locations per legend state; `none` for those no titled rule applies to.
        public var states: [String: Int]
        public var people: Int
        public var capacity: Int

        public init(key: Place, locations: Int, states: [String: Int], people: Int, capacity: Int) {
            self.key = key
            self.locations = locations
            self.states = states
            self.people = people
            self.capacity = capacity
        }

        /// `{"dataset": …, "venue": …, "building": …, "floor": …, "locations": N, "states": {…}, "people": N, "capacity": N, "updatedAt": …}`,
        /// and `"epoch"` when given (see `OutputFormat.epoch`).
        public func json(updatedAt: LiveTimestamp, epoch: UInt64? = nil) -> String {
            var object = JSONObjectWriter()
            object.add("dataset", key.dataset)
            object.add("venue", key.venue)
            object.add("building", key.building)
            if let floor = key.floor { object.add("floor", floor) }
            object.add("locations", locations)
            var counts = JSONObjectWriter()
            for (state, count) in states.sorted(by: { $0.key < $1.key }) { counts.add(state, count) }
            object.add("states", json: counts.json)
            object.add("people", people)
            object.add("capacity", capacity)
            object.add("updatedAt", updatedAt.description)
            if let epoch { object.add("epoch", Int(clamping: epoch)) }
            object.add("format", WireFormat.version)
            return object.json
        }
    }

    /// The running totals of one floor or building. Legend states are counted by number
    /// (the rule engine's legend-title index, shifted by one so that "none" is 0), so that an
    /// update moves two counters instead of hashing two titles.
    final class Aggregate {
        let key: Place
        /// A floor's building (`nil` for a building): a location holds its floor's aggregate
        /// alone, and reaches its building's through it.
        let building: Aggregate?
        // Changed only through the store (see `LiveStore`'s note on exclusivity).
        @exclusivity(unchecked) var locations = 0
        @exclusivity(unchecked) var counts: [Int] = []
        @exclusivity(unchecked) var people = 0
        @exclusivity(unchecked) var capacity = 0
        @exclusivity(unchecked) var dirty = false
        var lastHandedOut: LiveTimestamp?
        /// A floor's addresses' first bytes, up to the floor's end (none for a building): kept
        /// outside counted storage, so that comparing them, once for every new location,
        /// takes no reference.
        private var floorPrefix = UnsafeMutableRawBufferPointer(start: nil, count: 0)

        func hasFloorPrefix(_ prefix: UnsafeRawBufferPointer) -> Bool {
            guard floorPrefix.count == prefix.count, !prefix.isEmpty else { return floorPrefix.count == prefix.count }
            return memcmp(floorPrefix.baseAddress!, prefix.baseAddress!, prefix.count) == 0
        }

        /// Whether a floor prefix was set (a floor's never is empty).
        var knowsFloorPrefix: Bool { floorPrefix.count > 0 }

        func setFloorPrefix(_ prefix: UnsafeRawBufferPointer) {
            floorPrefix.deallocate()
            floorPrefix = .allocate(byteCount: prefix.count, alignment: 1)
            floorPrefix.copyMemory(from: prefix)
        }

        init(_ key: Place, building: Aggregate? = nil) {
            self.key = key
            self.building = building
        }

        deinit { floorPrefix.deallocate() }

        private func count(_ state: Int32, _ delta: Int) {
            let index = Int(state) + 1
            if index >= counts.count { counts.append(contentsOf: repeatElement(0, count: index - counts.count + 1)) }
            counts[index] += delta
        }

        func replace(_ old: Contribution?, with new: Contribution) {
            if let old {
                if old.state != new.state {
                    count(old.state, -1)
                    count(new.state, 1)
                }
                people -= Int(old.people)
                capacity -= Int(old.capacity)
            } else {
                locations += 1
                count(new.state, 1)
            }
            people += Int(new.people)
            capacity += Int(new.capacity)
        }

        /// Takes a location that leaves out of the totals.
        func withdraw(_ old: Contribution) {
            locations -= 1
            count(old.state, -1)
            people -= Int(old.people)
            capacity -= Int(old.capacity)
        }

        /// The totals, with legend states named by `titles`.
        func summary(titles: [String]) -> Summary {
            var states: [String: Int] = [:]
            for (index, count) in counts.enumerated() where count > 0 {
                let title = index > 0 && index <= titles.count ? titles[index - 1] : SummaryTracker.noState
                states[title, default: 0] += count
            }
            return Summary(key: key, locations: locations, states: states, people: people, capacity: capacity)
        }

        func reset() {
            locations = 0
            counts.removeAll(keepingCapacity: true)
            people = 0
            capacity = 0
        }
    }

    public static let noState = "none"

    private var aggregates: [Place: Aggregate] = [:]
    private var dirty: [Aggregate] = []
    /// How many floors are found by their prefix (every floor a location was counted on,
    /// once each).
    var indexedFloors: Int { floorsByPrefix.count }

    /// The last floor asked for: a location often comes after another of its floor (a
    /// sensor gateway's batch, a floor's rows in a restore).
    private var lastFloor: Aggregate?
    /// Every floor aggregate, by the hash of its addresses' first four components (see
    /// ``floorAggregate(for:)``).
    private var floorsByPrefix = FloorTable()
    public var interval: Duration
    /// The legend titles that contributions' states number.
    var titles: [String]

    public init(interval: Duration, titles: [String] = []) {
        self.interval = interval
        self.titles = titles
    }

    public func summary(_ key: Place) -> Summary? { aggregates[key]?.summary(titles: titles) }

    /// Every floor's and building's summary, in key order.
    public func all() -> [Summary] { aggregates.values.map { $0.summary(titles: titles) }.sorted { $0.key < $1.key } }

    /// The aggregate of a floor or building, if a location was ever counted there.
    func aggregate(_ key: Place) -> Aggregate? { aggregates[key] }

    /// The floor aggregate of a location (and its building's), created on first use.
    mutating func floorAggregate(for address: LocationAddress) -> Aggregate {
        // Found by the address's bytes up to its floor: a comparison with the last floor's,
        // else a lookup by their hash, and no key to build (four texts) and hash for every new
        // location, on the thread that fills the store in a restore. Locations that arrive from many floors in turn (a
        // venue's feed, and a restore, which reads them in the order they first came) miss
        // the last floor: a list of the last few floors missed as well, every one of them
        // compared, when the turn was longer than the list.
        let found: Aggregate? = address.withPathBytes { path in
            let prefix = UnsafeRawBufferPointer(rebasing: path[..<Self.floorPrefixLength(path)])
            if let lastFloor, lastFloor.hasFloorPrefix(prefix) { return lastFloor }
            return floorsByPrefix.find(prefix, hash: Self.floorHash(prefix))
        }
        if let found {
            if lastFloor !== found { lastFloor = found }
            return found
        }
        func aggregate(_ key: Place, building: @autoclosure () -> Aggregate?) -> Aggregate {
            if let existing = aggregates[key] { return existing }
            let created = Aggregate(key, building: building())
            aggregates[key] = created
            return created
        }
        let floor = aggregate(
            Place(dataset: address.dataset, venue: address.venue, building: address.building, floor: address.floor),
            building: aggregate(Place(dataset: address.dataset, venue: address.venue, building: address.building), building: nil))
        // A floor known already under other bytes: the same names in another Unicode form,
        // which a place compares equal. Found this way each time, at a bounded cost; its
        // entry is left as it is, so that spellings taking turns never add one each.
        guard !floor.knowsFloorPrefix else { return floor }
        address.withPathBytes { path in
            let prefix = UnsafeRawBufferPointer(rebasing: path[..<Self.floorPrefixLength(path)])
            floor.setFloorPrefix(prefix)
            floorsByPrefix.insert(floor, hash: Self.floorHash(prefix))
        }
        lastFloor = floor
        return floor
    }

    /// The hash a floor's prefix is found by: seeded for the process, as a location's is, so
    /// that which floor names collide cannot be worked out in advance (the table probes
    /// linearly from the hash's low bits).
    private static func floorHash(_ prefix: UnsafeRawBufferPointer) -> UInt64 {
        LocationTable.hash(prefix, continuing: LocationTable.seed)
    }

    /// Floor aggregates by the hash of their prefix: open addressing on that hash, which is
    /// mixed already (a dictionary would hash it again), each candidate confirmed by its
    /// prefix's bytes. Floors are never removed.
    struct FloorTable {
        private var hashes = [UInt64](repeating: 0, count: 64)
        private var floors = [Aggregate?](repeating: nil, count: 64)
        /// How many floors it holds.
        private(set) var count = 0

        /// The floor whose prefix is `prefix`, whose hash is `hash` (never 0).
        func find(_ prefix: UnsafeRawBufferPointer, hash: UInt64) -> Aggregate? {
            let mask = hashes.count - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while hashes[slot] != 0 {
                if hashes[slot] == hash, let floor = floors[slot], floor.hasFloorPrefix(prefix) { return floor }
                slot = (slot + 1) & mask
            }
            return nil
        }

        /// Adds a floor not in the table, under its prefix's hash (never 0).
        mutating func insert(_ floor: Aggregate, hash: UInt64) {
            precondition(hash != 0, "a floor's hash is never 0")
            if (count + 1) * 2 > hashes.count {
                let old = (hashes, floors)
                hashes = [UInt64](repeating: 0, count: old.0.count * 2)
                floors = [Aggregate?](repeating: nil, count: old.0.count * 2)
                for (hash, floor) in zip(old.0, old.1) where hash != 0 { place(floor!, hash: hash) }
            }
            place(floor, hash: hash)
            count += 1
        }

        private mutating func place(_ floor: Aggregate, hash: UInt64) {
            let mask = hashes.count - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while hashes[slot] != 0 { slot = (slot + 1) & mask }
            hashes[slot] = hash
            floors[slot] = floor
        }
    }

    /// How many bytes of a location's path come before its floor's end (dataset, venue,
    /// building and floor, with the slashes between them).
    private static func floorPrefixLength(_ path: UnsafeRawBufferPointer) -> Int {
        LocationAddress.range(of: 3, in: path).upperBound
    }

    /// Records what a location now contributes.
    mutating func update(_ location: LocationState, _ contribution: Contribution) {
        guard location.contribution != contribution else { return }
        let old = location.contribution
        location.contribution = contribution
        replace(location.floorSummary, old, contribution)
    }

    /// Moves a location's contribution from the floor and building it was counted in to
    /// those of `address`.
    mutating func move(_ location: LocationState, to address: LocationAddress) {
        if let old = location.contribution { withdraw(location.floorSummary, old) }
        let floor = floorAggregate(for: address)
        location.floorSummary = floor
        if let contribution = location.contribution { replace(floor, nil, contribution) }
    }

    /// Takes a contribution out of a floor's totals and its building's.
    private mutating func withdraw(_ floor: Aggregate, _ old: Contribution) {
        floor.withdraw(old)
        markDirty(floor)
        if let building = floor.building {
            building.withdraw(old)
            markDirty(building)
        }
    }

    /// Replaces a contribution in a floor's totals and its building's.
    private mutating func replace(_ floor: Aggregate, _ old: Contribution?, _ new: Contribution) {
        floor.replace(old, with: new)
        markDirty(floor)
        if let building = floor.building {
            building.replace(old, with: new)
            markDirty(building)
        }
    }

    private mutating func markDirty(_ aggregate: Aggregate) {
        if !aggregate.dirty {
            aggregate.dirty = true
            dirty.append(aggregate)
        }
    }

    /// Empties every total (before every location contributes again under new rules,
    /// whose legend titles are `titles`).
    mutating func resetTotals(titles: [String]) {
        self.titles = titles
        for aggregate in aggregates.values { aggregate.reset() }
    }

    /// The summaries that changed and whose interval has passed; the rest wait. `all`: every
    /// summary that changed, its interval passed or not (a clean stop's last ones).
    public mutating func takeDue(now: LiveTimestamp, all: Bool = false) -> [Summary] {
        var due: [Summary] = []
        var waiting: [Aggregate] = []
        let intervalMilliseconds = interval.milliseconds
        for aggregate in dirty {
            // A negative time since the last one is a step back of the clock: due, rather
            // than held until the clock is back where it was.
            if !all, let last = aggregate.lastHandedOut, case let elapsed = now.millisecondsSince1970 - last.millisecondsSince1970,
                elapsed >= 0, elapsed < intervalMilliseconds
            {
                waiting.append(aggregate)
                continue
            }
            aggregate.dirty = false
            aggregate.lastHandedOut = now
            due.append(aggregate.summary(titles: titles))
        }
        dirty = waiting
        return due.sorted { $0.key < $1.key }
    }

    /// When the next waiting summary is due, if any waits.
    public func nextDue(now: LiveTimestamp) -> LiveTimestamp? {
        guard !dirty.isEmpty else { return nil }
        var earliest: LiveTimestamp?
        for aggregate in dirty {
            guard let last = aggregate.lastHandedOut, last <= now else { return now }
            let due = LiveTimestamp(millisecondsSince1970: last.millisecondsSince1970 + interval.milliseconds)
            earliest = min(earliest ?? due, due)
        }
        return earliest
    }
}
