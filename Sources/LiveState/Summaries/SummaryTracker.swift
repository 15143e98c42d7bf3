import DisplayRules
import LiveTopics

/// Per floor and per building: how many locations are in each legend state, and people
/// against capacity. Kept up to date incrementally (each location holds its two aggregates
/// by reference); handed out at most once per interval per floor or building.
public struct SummaryTracker {
    /// A floor (`floor` set) or a building (`floor` nil).
    public struct Key: Hashable, Sendable, Comparable {
        public var dataset: String
        public var venue: String
        public var building: String
        public var floor: String?

        public init(dataset: String, venue: String, building: String, floor: String? = nil) {
            self.dataset = dataset
            self.venue = venue
            self.building = building
            self.floor = floor
        }

        /// `summary/dataset/venue/building[/floor]`, below the prefix.
        public var topicSuffix: String {
            "summary/\(dataset)/\(venue)/\(building)" + (floor.map { "/" + $0 } ?? "")
        }

        public static func < (a: Key, b: Key) -> Bool {
            (a.dataset, a.venue, a.building, a.floor ?? "") < (b.dataset, b.venue, b.building, b.floor ?? "")
        }
    }

    /// What one location adds to its floor and building.
    struct Contribution: Hashable, Sendable {
        /// Index of the legend title (the engine's `legendTitles`), or -1 for none.
        var state: Int32
        var people: Int32
        var capacity: Int32
    }

    public struct Summary: Hashable, Sendable {
        public var key: Key
        public var locations: Int
        /// Locations per legend state; `none` for those no titled rule applies to.
        public var states: [String: Int]
        public var people: Int
        public var capacity: Int

        /// `{"dataset": …, "venue": …, "building": …, "floor": …, "locations": N, "states": {…}, "people": N, "capacity": N, "updatedAt": …}`
        public func json(updatedAt: LiveTimestamp) -> String {
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
            return object.json
        }
    }

    /// The running totals of one floor or building.
    final class Aggregate {
        var summary: Summary
        var dirty = false
        var lastHandedOut: LiveTimestamp?

        init(_ key: Key) {
            summary = Summary(key: key, locations: 0, states: [:], people: 0, capacity: 0)
        }

        func replace(_ old: Contribution?, with new: Contribution, titles: [String]) {
            func title(_ id: Int32) -> String { id >= 0 && Int(id) < titles.count ? titles[Int(id)] : SummaryTracker.noState }
            if let old {
                if old.state != new.state {
                    let oldTitle = title(old.state)
                    if let count = summary.states[oldTitle] { summary.states[oldTitle] = count > 1 ? count - 1 : nil }
                    summary.states[title(new.state), default: 0] += 1
                }
                summary.people -= Int(old.people)
                summary.capacity -= Int(old.capacity)
            } else {
                summary.locations += 1
                summary.states[title(new.state), default: 0] += 1
            }
            summary.people += Int(new.people)
            summary.capacity += Int(new.capacity)
        }

        func reset() {
            summary = Summary(key: summary.key, locations: 0, states: [:], people: 0, capacity: 0)
        }
    }

    public static let noState = "none"

    private var aggregates: [Key: Aggregate] = [:]
    private var dirty: [Aggregate] = []
    /// The last floor asked for: locations tend to arrive floor by floor (a restore reads
    /// them in address order), so most lookups end here.
    private var lastFloor: (floor: Aggregate, building: Aggregate)?
    public var interval: Duration

    public init(interval: Duration) {
        self.interval = interval
    }

    public func summary(_ key: Key) -> Summary? { aggregates[key]?.summary }

    /// The floor and building aggregates of a location, created on first use.
    mutating func aggregates(for address: LocationAddress) -> (floor: Aggregate, building: Aggregate) {
        if let lastFloor {
            let key = lastFloor.floor.summary.key
            if key.floor == address.floor && key.building == address.building && key.venue == address.venue
                && key.dataset == address.dataset
            {
                return lastFloor
            }
        }
        func aggregate(_ key: Key) -> Aggregate {
            if let existing = aggregates[key] { return existing }
            let created = Aggregate(key)
            aggregates[key] = created
            return created
        }
        let found = (
            floor: aggregate(Key(dataset: address.dataset, venue: address.venue, building: address.building, floor: address.floor)),
            building: aggregate(Key(dataset: address.dataset, venue: address.venue, building: address.building))
        )
        lastFloor = found
        return found
    }

    /// Records what a location now contributes; `titles` name the legend states.
    mutating func update(_ location: LocationState, _ contribution: Contribution, titles: [String]) {
        guard location.contribution != contribution else { return }
        let old = location.contribution
        location.contribution = contribution
        for aggregate in [location.floorSummary, location.buildingSummary] {
            aggregate.replace(old, with: contribution, titles: titles)
            if !aggregate.dirty {
                aggregate.dirty = true
                dirty.append(aggregate)
            }
        }
    }

    /// Empties every total (before every location contributes again under new rules).
    mutating func resetTotals() {
        for aggregate in aggregates.values { aggregate.reset() }
    }

    /// The summaries that changed and whose interval has passed; the rest wait.
    public mutating func takeDue(now: LiveTimestamp) -> [Summary] {
        var due: [Summary] = []
        var waiting: [Aggregate] = []
        let intervalMilliseconds = interval.milliseconds
        for aggregate in dirty {
            if let last = aggregate.lastHandedOut, now.millisecondsSince1970 - last.millisecondsSince1970 < intervalMilliseconds {
                waiting.append(aggregate)
                continue
            }
            aggregate.dirty = false
            aggregate.lastHandedOut = now
            due.append(aggregate.summary)
        }
        dirty = waiting
        return due.sorted { $0.key < $1.key }
    }

    /// When the next waiting summary is due, if any waits.
    public func nextDue(now: LiveTimestamp) -> LiveTimestamp? {
        guard !dirty.isEmpty else { return nil }
        var earliest: LiveTimestamp?
        for aggregate in dirty {
            guard let last = aggregate.lastHandedOut else { return now }
            let due = LiveTimestamp(millisecondsSince1970: last.millisecondsSince1970 + interval.milliseconds)
            earliest = min(earliest ?? due, due)
        }
        return earliest
    }
}

extension Duration {
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
