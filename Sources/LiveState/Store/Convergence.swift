import DisplayRules
import LiveTopics

/// Brings the messages the broker holds retained under the daemon's prefix in line with
/// the state, after a start or a reconnection: give it every retained message read back
/// (``retained(topic:payload:now:)``), then ``finish(now:retainedLegends:datasets:)`` and
/// ``takeRepublication()``. Each returns what to publish: styles that differ again in full
/// (those missing, through a ``Republication``), an empty retained payload where the state
/// holds nothing (a location that moved or is gone, a floor without locations, a dataset no
/// longer served). Versions continue from the highest seen.
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
        /// Of them, styles (not empty).
        public var styles = 0
        /// Retained styles and summaries of places another partition owns: left alone.
        public var othersLeft = 0

        public init() {}
    }

    let store: LiveStore
    let topics: OutputFormat
    /// `{prefix}/style/`'s bytes.
    private let stylePrefix: [UInt8]
    /// With a partition, only its places are converged: the others are other daemons'.
    let partition: Partition?
    private var seen: SeenLocations
    public private(set) var counts = Counts()

    public init(core: LiveCore, topics: OutputFormat) {
        store = core.store
        seen = SeenLocations(store: core.store)
        self.topics = topics
        stylePrefix = Array(topics.stylePrefix.utf8)
        partition = core.partition
    }

    /// A location of the partition whose retained style the read has not returned (nor a
    /// change published meanwhile): what the end of the read publishes again.
    private func isUnseen(_ state: LocationState) -> Bool { !seen.contains(state) && owns(state.address) }

    /// Whether convergence may touch what is published for `address` or `place`.
    private func owns(_ address: LocationAddress) -> Bool { partition?.owns(address) ?? true }
    private func owns(_ place: Place) -> Bool { partition?.owns(place) ?? true }

    /// One retained message from under the prefix.
    /// - Returns: what to publish for it (nothing when it agrees).
    public mutating func retained(topic: String, payload: [UInt8], now: LiveTimestamp) -> [PendingOutput.Item] {
        payload.withUnsafeBytes { retained(topic: topic, payload: $0, now: now) }
    }

    /// ``retained(topic:payload:now:)-([UInt8],_)`` of a payload read in place.
    public mutating func retained(topic: String, payload: UnsafeRawBufferPointer, now: LiveTimestamp) -> [PendingOutput.Item] {
        var topic = topic
        return topic.withUTF8 { retained(utf8Topic: UnsafeRawBufferPointer($0), payload: payload, now: now) }
    }

    /// ``retained(topic:payload:now:)-([UInt8],_)`` of a topic and payload read in place: a
    /// style is found by its path's bytes, with no string made of the topic or the path
    /// unless the state holds no location there (a million times in a full read).
    public mutating func retained(topicBytes topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, now: LiveTimestamp)
        -> [PendingOutput.Item]
    {
        var high: UInt8 = 0
        for byte in topic { high |= byte }
        guard high < 0x80 else {
            // Not ASCII: read as the string it decodes to (invalid UTF-8 repaired), as the
            // state's addresses were made from topics.
            return retained(topic: String(decoding: topic, as: UTF8.self), payload: payload, now: now)
        }
        return retained(utf8Topic: topic, payload: payload, now: now)
    }

    /// ``retained(topicBytes:payload:now:)`` of a topic's bytes that are valid UTF-8.
    private mutating func retained(utf8Topic topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, now: LiveTimestamp)
        -> [PendingOutput.Item]
    {
        counts.read += 1
        guard !payload.isEmpty else { return [] }
        if topic.count > stylePrefix.count, topic.starts(with: stylePrefix) {
            let path = UnsafeRawBufferPointer(rebasing: topic[stylePrefix.count...])
            counts.styles += 1
            guard LocationAddress.isPath(path) else { return [] }
            func address() -> LocationAddress { LocationAddress(path: String(decoding: path, as: UTF8.self))! }
            if partition != nil, !owns(address()) {
                counts.othersLeft += 1
                return []
            }
            let (style, version) = Self.styleAndVersion(payload)
            return settle(store.reconcile(retainedAtPath: path, style: style, version: version, now: now), address: address())
        }
        let text = String(decoding: topic, as: UTF8.self)
        if let key = topics.place(ofSummaryTopic: text) {
            guard owns(key) else {
                counts.othersLeft += 1
                return []
            }
            if let summary = store.summaries.summary(key), summary.locations > 0 { return [] }
            counts.cleared += 1
            return [.publication(Publication(topic: text, payload: [], retain: true))]
        }
        return []
    }

    /// A retained style's `style` member (its JSON's bytes) and `version` (0 when it has none).
    private static func styleAndVersion(_ payload: UnsafeRawBufferPointer) -> (style: UnsafeRawBufferPointer?, version: UInt64) {
        let members = topLevelMembers(payload, "style", "version")
        let style = members?.0.map { UnsafeRawBufferPointer(rebasing: payload[$0]) }
        return (style, members?.1.flatMap { unsigned(UnsafeRawBufferPointer(rebasing: payload[$0])) } ?? 0)
    }

    /// What the store's verdict on a retained style calls for; `address` is the location's
    /// (made only for a clearing).
    private mutating func settle(
        _ verdict: LiveStore.RetainedStyleVerdict, address: @autoclosure () -> LocationAddress
    ) -> [PendingOutput.Item] {
        switch verdict {
        case .unknown:
            counts.cleared += 1
            return [.publication(topics.clearing(styleOf: address()))]
        case .agrees(let state):
            seen.insert(state)
            counts.agreed += 1
            return []
        case .republish(let state, let change):
            seen.insert(state)
            counts.republished += 1
            return [.change(change)]
        }
    }

    /// A JSON number's digits as an unsigned integer (`nil` when it is not one).
    static func unsigned(_ digits: UnsafeRawBufferPointer) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 19 else { return nil }
        var value: UInt64 = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(digit - UInt8(ascii: "0"))
        }
        return value
    }

    /// The daemon publishes this location's style now (a live change during the read):
    /// the broker will hold it, so it needs no publishing again at the end.
    public mutating func published(_ address: LocationAddress) {
        if let state = store.locations.find(at: address) { seen.insert(state) }
    }

    /// A style this convergence returned to publish again was not published: the
    /// ``Republication`` after the read publishes it (under a later version).
    public mutating func leaveForLater(_ address: LocationAddress) {
        guard let state = store.locations.find(at: address) else { return }
        seen.remove(state)
        counts.republished -= 1
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

    /// After the last retained message: every summary again (they are small and few), and
    /// the clearing of legends of datasets not served. The styles the broker did not hold
    /// come next, from ``takeRepublication()``.
    public mutating func finish(now: LiveTimestamp, retainedLegends: [String], datasets: Set<String>) -> [PendingOutput.Item] {
        var publications: [PendingOutput.Item] = []
        for summary in store.summaries.all() where summary.locations > 0 && owns(summary.key) {
            publications.append(.publication(topics.publication(summary, updatedAt: now)))
        }
        // With a partition, a dataset this daemon does not serve may be another's.
        for topic in retainedLegends where partition == nil {
            guard let dataset = topic.dropPrefix(topics.prefix + "/legend/"), !datasets.contains(String(dataset)) else { continue }
            counts.cleared += 1
            publications.append(.publication(Publication(topic: topic, payload: [], retain: true)))
        }
        return publications
    }

    /// After the read: the walk that publishes again, as the output has room, the styles of
    /// the locations the read did not see (``Republication``). The locations seen go with it:
    /// this convergence sees none after.
    public mutating func takeRepublication() -> Republication {
        defer { seen = SeenLocations(store: store) }
        return Republication(store: store, seen: seen, partition: partition)
    }

    /// Up to `limit` addresses of locations (of the partition) whose retained style the read
    /// did not return so far: what the ``Republication`` after the read would publish again.
    public func unseen(limit: Int) -> [LocationAddress] {
        var found: [LocationAddress] = []
        for state in store.locations.locations where isUnseen(state) {
            found.append(state.address)
            if found.count == limit { break }
        }
        return found
    }

    /// Whether the location at `address` has been seen at the broker in this convergence
    /// (its retained style read, or a change published since the read began).
    public func hasSeen(_ address: LocationAddress) -> Bool {
        guard let state = store.locations.find(at: address) else { return false }
        return seen.contains(state)
    }
}

extension String {
    /// What follows `prefix`, when the string starts with it.
    fileprivate func dropPrefix(_ prefix: String) -> Substring? {
        hasPrefix(prefix) ? dropFirst(prefix.count) : nil
    }
}
