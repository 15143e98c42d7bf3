/// The venues or buildings one daemon owns, when several share a broker (README.md, "More
/// than one daemon"; docs/protocol.md, "Arrivals"): it takes only their updates, and
/// publishes and converges only their styles and summaries. A building is never split: its
/// floors' and its own summaries are kept by one daemon.
public struct Partition: Sendable, Equatable {
    /// A dataset, one of its venues, or one building of a venue.
    public struct Share: Sendable, Hashable, CustomStringConvertible {
        public var dataset: String
        public var venue: String?
        /// Only with a venue.
        public var building: String?

        /// - Throws: ``TopicError/invalidComponent(component:value:reason:)`` for a level that
        ///   cannot be a topic level.
        public init(dataset: String, venue: String? = nil, building: String? = nil) throws(TopicError) {
            try LiveTopic.validateComponent(dataset, as: .dataset)
            if let venue { try LiveTopic.validateComponent(venue, as: .venue) }
            if let building { try LiveTopic.validateComponent(building, as: .building) }
            self.dataset = dataset
            self.venue = venue
            self.building = building
        }

        /// Whether a place with these first three levels is in this share.
        @inline(__always)
        func holds(dataset: some StringProtocol, venue: some StringProtocol, building: some StringProtocol) -> Bool {
            self.dataset == dataset && (self.venue.map { $0 == venue } ?? true) && (self.building.map { $0 == building } ?? true)
        }

        /// The topic levels below a topic's kind that subscribe to this share: `ds/venue/building`,
        /// with `+` where any matches.
        var levels: [String] { [dataset, venue ?? "+", building ?? "+"] }

        public var description: String { levels.joined(separator: "/") }
    }

    /// The partition's name: replicas of one partition share it.
    public var name: String
    /// What it owns; never empty.
    public var shares: [Share]

    public init(name: String, shares: [Share]) {
        self.name = name
        self.shares = shares
    }

    /// Whether the partition owns a location or place with these first three levels.
    public func owns(dataset: some StringProtocol, venue: some StringProtocol, building: some StringProtocol) -> Bool {
        shares.contains { $0.holds(dataset: dataset, venue: venue, building: building) }
    }

    /// Read from the address's path in place: its component properties would each make a
    /// string, and this is asked for every change a partitioned daemon publishes.
    public func owns(_ address: LocationAddress) -> Bool { owns(topic: address.path) }

    /// The datasets the partition's shares name, each once.
    public var datasets: Set<String> { Set(shares.map(\.dataset)) }

    public func owns(_ place: Place) -> Bool { owns(dataset: place.dataset, venue: place.venue, building: place.building) }

    /// Whether the partition owns the place of a live topic (`dataset/venue/building/…`),
    /// read from its first three levels; `false` for a topic with fewer.
    public func owns(topic: String) -> Bool {
        // The first three levels as slices of the topic, found without an array of them.
        let utf8 = topic.utf8
        let slash = UInt8(ascii: "/")
        guard let first = utf8.firstIndex(of: slash),
            let second = utf8[utf8.index(after: first)...].firstIndex(of: slash)
        else { return false }
        let third = utf8[utf8.index(after: second)...].firstIndex(of: slash) ?? utf8.endIndex
        return owns(
            dataset: Substring(utf8[..<first]), venue: Substring(utf8[utf8.index(after: first)..<second]),
            building: Substring(utf8[utf8.index(after: second)..<third]))
    }

    /// The criteria that subscribe to what both `criteria` and the partition take: one per
    /// share they meet (none when they meet none).
    public func narrow(_ criteria: TopicCriteria) -> [TopicCriteria] {
        var narrowed: [TopicCriteria] = []
        for share in shares {
            let own = share.levels.map { $0 == "+" ? TopicFilter.Level.single : .exact($0) } + Array(repeating: .single, count: 4)
            guard let levels = TopicFilter.intersection(criteria.filter.levels, own),
                let filter = try? TopicFilter(TopicFilter.text(of: levels))
            else { continue }
            let criteria = TopicCriteria(filter: filter)
            if !narrowed.contains(criteria) { narrowed.append(criteria) }
        }
        return narrowed
    }

    /// The filters under `{prefix}/{kind}/` that hold what the partition publishes of that
    /// kind (`style`, `summary`): one per share.
    public func filters(prefix: String, kind: String) -> [String] {
        shares.map { "\(prefix)/\(kind)/\($0)/#" }
    }
}

extension TopicFilter {
    /// The levels of a filter matching exactly the topics both `a` and `b` match; `nil`
    /// when no topic matches both.
    public static func intersection(_ a: [Level], _ b: [Level]) -> [Level]? {
        var result: [Level] = []
        var index = 0
        while true {
            let left = index < a.count ? a[index] : nil
            let right = index < b.count ? b[index] : nil
            switch (left, right) {
            case (nil, nil): return result
            // `#` also matches its parent level: `a/#` meets `a`.
            case (.multi?, nil), (nil, .multi?): return result
            case (nil, _), (_, nil): return nil
            case (.multi?, _): return result + b[index...]
            case (_, .multi?): return result + a[index...]
            case (.single?, let other?), (let other?, .single?): result.append(other)
            case (.exact(let x)?, .exact(let y)?):
                guard x == y else { return nil }
                result.append(.exact(x))
            }
            index += 1
        }
    }

    /// A filter's text from its levels.
    public static func text(of levels: [Level]) -> String {
        levels.map { level in
            switch level {
            case .exact(let text): text
            case .single: "+"
            case .multi: "#"
            }
        }.joined(separator: "/")
    }
}
