import DisplayRules
import LiveTopics

/// Per floor and per building: how many locations are in each legend state, and people
/// against capacity. Kept up to date incrementally; handed out at most once per interval
/// per floor or building.
public struct SummaryTracker: Sendable {
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
        var state: String
        var people: Int
        var capacity: Int
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

    public static let noState = "none"

    private(set) var summaries: [Key: Summary] = [:]
    private var contributions: [LocationAddress: Contribution] = [:]
    private var dirty = Set<Key>()
    private var lastHandedOut: [Key: LiveTimestamp] = [:]
    public var interval: Duration

    public init(interval: Duration) {
        self.interval = interval
    }

    public func summary(_ key: Key) -> Summary? { summaries[key] }

    /// Records what a location now contributes.
    mutating func update(_ address: LocationAddress, _ contribution: Contribution) {
        let old = contributions[address]
        guard old != contribution else { return }
        contributions[address] = contribution
        for key in Self.keys(address) {
            var summary = summaries[key] ?? Summary(key: key, locations: 0, states: [:], people: 0, capacity: 0)
            if let old {
                summary.states[old.state, default: 0] -= 1
                if summary.states[old.state] == 0 { summary.states[old.state] = nil }
                summary.people -= old.people
                summary.capacity -= old.capacity
            } else {
                summary.locations += 1
            }
            summary.states[contribution.state, default: 0] += 1
            summary.people += contribution.people
            summary.capacity += contribution.capacity
            summaries[key] = summary
            dirty.insert(key)
        }
    }

    /// The summaries that changed and whose interval has passed; the rest wait.
    public mutating func takeDue(now: LiveTimestamp) -> [Summary] {
        var due: [Summary] = []
        let intervalMilliseconds = interval.milliseconds
        for key in dirty.sorted() {
            if let last = lastHandedOut[key], now.millisecondsSince1970 - last.millisecondsSince1970 < intervalMilliseconds {
                continue
            }
            dirty.remove(key)
            lastHandedOut[key] = now
            if let summary = summaries[key] { due.append(summary) }
        }
        return due
    }

    /// When the next waiting summary is due, if any waits.
    public func nextDue(now: LiveTimestamp) -> LiveTimestamp? {
        guard !dirty.isEmpty else { return nil }
        let waits = dirty.compactMap { lastHandedOut[$0] }
        guard dirty.count == waits.count, let earliest = waits.min() else { return now }
        return LiveTimestamp(millisecondsSince1970: earliest.millisecondsSince1970 + interval.milliseconds)
    }

    static func keys(_ address: LocationAddress) -> [Key] {
        [
            Key(dataset: address.dataset, venue: address.venue, building: address.building, floor: address.floor),
            Key(dataset: address.dataset, venue: address.venue, building: address.building),
        ]
    }
}

extension Duration {
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
