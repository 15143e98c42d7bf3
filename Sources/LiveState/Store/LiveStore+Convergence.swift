import DisplayRules
import LiveTopics

extension LiveStore {
    /// What the broker's retained style for a location calls for.
    enum RetainedStyleVerdict {
        /// The state holds no location at that address: clear the topic.
        case unknown
        /// It shows what the state holds.
        case agrees(LocationState)
        /// It differs (or is missing): publish this, with a version above both.
        case republish(LocationState, DerivedChange)
    }

    /// Compares the style retained at a location's topic (its `style` member's JSON bytes
    /// and its `version`, or `nil` when there is none) with the state. The location's
    /// version is raised to the retained one when that is higher, so that versions never go
    /// backwards for a subscriber; a lower retained version (changes made while the daemon
    /// could not publish them, that came back to the same style) is published again, so that
    /// the broker and the state agree on the version too.
    func reconcile(
        retainedAt address: LocationAddress, style: UnsafeRawBufferPointer?, version: UInt64, now: LiveTimestamp
    ) -> RetainedStyleVerdict {
        guard let state = locations.find(at: address) else { return .unknown }
        if version > state.version {
            state.version = version
            markDirty(state)
        }
        guard let published = state.publishedStyle(ruleEngine) else { return .agrees(state) }
        if let style, version == state.version, published.style.json.utf8.elementsEqual(style) { return .agrees(state) }
        return republication(state, now: now).map { .republish(state, $0) } ?? .agrees(state)
    }

    /// The current style of the location at `address`, as a change to publish again in full
    /// under the next version; `nil` when no location is there, or none is published yet.
    public func republication(at address: LocationAddress, now: LiveTimestamp) -> DerivedChange? {
        locations.find(at: address).flatMap { republication($0, now: now) }
    }

    /// The location's current style as a change to publish again in full (all its fields
    /// count as changed), under the next version.
    func republication(_ state: LocationState, now: LiveTimestamp) -> DerivedChange? {
        guard state.foreign == nil, let key = state.published else { return nil }
        state.version += 1
        markDirty(state)
        return DerivedChange(
            address: state.address, key: key, before: .none, ruleEngine: ruleEngine, values: state.values,
            version: state.version, updatedAt: now)
    }
}

/// Brings the messages the broker holds retained under the daemon's prefix in line with
/// the state, after a start or a reconnection: give it every retained message read back
/// (``retained(topic:payload:now:)``), then ``finish(now:datasets:)``. Each returns what to
/// publish: styles that differ or are missing again in full, an empty retained payload
/// where the state holds nothing (a location that moved or is gone, a floor without
/// locations, a dataset no longer served). Versions continue from the highest seen.
public struct Convergence {
    public struct Counts: Sendable, Equatable {
        /// Retained styles that matched the state.
        public var agreed = 0
        /// Styles published again (differing, or missing at the broker).
        public var republished = 0
        /// Retained messages cleared.
        public var cleared = 0
        /// Retained messages read.
        public var read = 0

        public init() {}
    }

    let store: LiveStore
    let topics: OutputTopics
    private var seen = Set<ObjectIdentifier>()
    public private(set) var counts = Counts()

    public init(core: LiveCore, topics: OutputTopics) {
        store = core.store
        self.topics = topics
    }

    /// One retained message from under the prefix.
    /// - Returns: what to publish for it (nothing when it agrees).
    public mutating func retained(topic: String, payload: [UInt8], now: LiveTimestamp) -> [PendingOutput.Item] {
        counts.read += 1
        guard !payload.isEmpty else { return [] }
        if let path = topic.dropPrefix(topics.prefix + "/style/") {
            guard let address = LocationAddress(path: String(path)) else { return [] }
            return payload.withUnsafeBytes { bytes -> [PendingOutput.Item] in
                let members = topLevelMembers(bytes, ["style", "version"])
                let style = members?["style"].map { UnsafeRawBufferPointer(rebasing: bytes[$0]) }
                let version = members?["version"].flatMap { UInt64(String(decoding: bytes[$0], as: UTF8.self)) } ?? 0
                switch store.reconcile(retainedAt: address, style: style, version: version, now: now) {
                case .unknown:
                    counts.cleared += 1
                    return [.publication(topics.clearing(styleOf: address))]
                case .agrees(let state):
                    seen.insert(ObjectIdentifier(state))
                    counts.agreed += 1
                    return []
                case .republish(let state, let change):
                    seen.insert(ObjectIdentifier(state))
                    counts.republished += 1
                    return [.change(change)]
                }
            }
        }
        if let path = topic.dropPrefix(topics.prefix + "/summary/") {
            let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 || parts.count == 4 else { return [] }
            let key = SummaryTracker.Key(
                dataset: parts[0], venue: parts[1], building: parts[2], floor: parts.count == 4 ? parts[3] : nil)
            if let summary = store.summaries.summary(key), summary.locations > 0 { return [] }
            counts.cleared += 1
            return [.publication(Publication(topic: topic, payload: [], retain: true))]
        }
        return []
    }

    /// The daemon publishes this location's style now (a live change during the read):
    /// the broker will hold it, so it needs no publishing again at the end.
    public mutating func published(_ address: LocationAddress) {
        if let state = store.locations.find(at: address) { seen.insert(ObjectIdentifier(state)) }
    }

    /// A message under the prefix that the reader got live, not retained: the daemon's own
    /// publication, which reached the broker after the reader subscribed and which the
    /// broker now holds.
    public mutating func live(topic: String) {
        guard let path = topic.dropPrefix(topics.prefix + "/style/"), let address = LocationAddress(path: String(path)) else {
            return
        }
        published(address)
    }

    /// After the last retained message: the styles the broker did not hold, every summary
    /// again (they are small and few), and the clearing of legends of datasets not served.
    public mutating func finish(now: LiveTimestamp, retainedLegends: [String], datasets: Set<String>) -> [PendingOutput.Item] {
        var publications: [PendingOutput.Item] = []
        for state in store.locations.locations where !seen.contains(ObjectIdentifier(state)) {
            guard let change = store.republication(state, now: now) else { continue }
            counts.republished += 1
            publications.append(.change(change))
        }
        seen = []
        for summary in store.summaries.all() where summary.locations > 0 {
            publications.append(.publication(topics.publication(summary, updatedAt: now)))
        }
        for topic in retainedLegends {
            guard let dataset = topic.dropPrefix(topics.prefix + "/legend/"), !datasets.contains(String(dataset)) else { continue }
            counts.cleared += 1
            publications.append(.publication(Publication(topic: topic, payload: [], retain: true)))
        }
        return publications
    }

    /// Whether the location at `address` has been seen at the broker in this convergence
    /// (its retained style read, or a change published since the read began).
    public func hasSeen(_ address: LocationAddress) -> Bool {
        guard let state = store.locations.find(at: address) else { return false }
        return seen.contains(ObjectIdentifier(state))
    }
}

extension String {
    /// What follows `prefix`, when the string starts with it.
    fileprivate func dropPrefix(_ prefix: String) -> Substring? {
        hasPrefix(prefix) ? dropFirst(prefix.count) : nil
    }
}
