import DisplayRules
import LiveTopics

/// The bounds on what the core takes in (docs/protocol.md, "Limits and refusal reasons"); each
/// refusal is counted by its reason.
public struct LiveLimits: Sendable, Equatable {
    public var payload = PayloadLimits.standard
    /// Locations tracked (`limits.locations`).
    public var locations = 1_000_000
    /// Domains per location (`limits.domains`).
    public var domains = 16
    /// How far ahead of the clock a timestamp may be (`limits.futureSkew`).
    public var futureSkew: Duration = .seconds(300)

    public init(payload: PayloadLimits = .standard, locations: Int = 1_000_000, domains: Int = 16, futureSkew: Duration = .seconds(300)) {
        self.payload = payload
        self.locations = locations
        self.domains = domains
        self.futureSkew = futureSkew
    }

    public static let standard = LiveLimits()
}

/// The pure core of the daemon, and its one way in: a received message (topic, payload,
/// receipt time) becomes an ``Outcome``. On the way it checks the topic against the
/// subscribed criteria (topic index), decodes the payload and applies it to the store, which
/// re-derives the style and diffs it against the last published one. Everything else is a
/// query or a whole-store change (expiry, layers, reload). Synchronous and single-owner:
/// no I/O, no clock of its own (time comes in).
public final class LiveCore {
    /// Why an update was dropped.
    public enum RejectReason: String, CaseIterable, Sendable {
        /// Not a valid seven-part live-data topic.
        case badTopic = "bad_topic"
        /// The payload cannot be read (not JSON, no properties…).
        case badPayload = "bad_payload"
        /// The payload is larger than the limit.
        case oversize
        /// It names another placement for a tracked location, and its domain does not move
        /// locations (`domains.X.moves`).
        case placementConflict = "placement_conflict"
        /// Its timestamp is further ahead of the clock than `futureSkew` (a sensor with a
        /// broken clock): stored, it would make every later update look out of order.
        case futureTimestamp = "future_timestamp"
        /// A new location while `limits.locations` are tracked.
        case tooManyLocations = "too_many_locations"
        /// A new domain for a location that has `limits.domains` values.
        case tooManyDomains = "too_many_domains"
        /// More properties in one update than `limits.properties`.
        case tooManyProperties = "too_many_properties"
        /// A property name or value longer than `limits.nameLength` / `limits.valueLength`.
        case propertyTooLong = "property_too_long"
        /// Its place is another partition's (`partition.owns`): that daemon's to take.
        case outsidePartition = "outside_partition"
    }

    public enum Outcome: Sendable, Equatable {
        case rejected(RejectReason, message: String)
        /// The topic matches none of the configured criteria (a session from an older config).
        case notSubscribed
        case ignoredOutOfOrder
        case unchanged
        case changed(DerivedChange)
    }

    public struct Counters: Sendable, Equatable {
        public var received = 0
        public var rejected: [RejectReason: Int] = [:]
        public var notSubscribed = 0
        /// Retained messages without a timestamp for a value the location already has: a
        /// re-delivery on (re)subscription, not new data.
        public var retainedNotNew = 0

        public init() {}
    }

    public let store: LiveStore
    // One owner, never re-entered while a property is being changed: the properties every
    // update touches opt out of the run-time exclusivity check (as the store's do).
    @exclusivity(unchecked) public private(set) var counters = Counters()
    @exclusivity(unchecked) private var subscriptions = TopicIndex<Int>()
    /// The storage of the last decoded payload's properties, for the next one to be decoded
    /// into (when the store kept them, the next decoding copies rather than overwrites).
    @exclusivity(unchecked) private var spareProperties = LiveProperties()
    /// The domain of the last update that needed its domain as a string.
    @exclusivity(unchecked) private var lastDomain = ""
    /// Numbers each set of subscriptions, for the store to remember which topics they accept.
    @exclusivity(unchecked) private var generation: UInt32 = 0
    public let limits: LiveLimits
    /// What this daemon owns, when it shares the broker with others.
    public let partition: Partition?

    /// How far ahead of the receipt time an update's timestamp may be, in milliseconds.
    private let futureSkewMilliseconds: Int64

    public init(
        ruleSet: RuleSet, subscriptions: [TopicCriteria], summaryInterval: Duration = .seconds(1), limits: LiveLimits = .standard,
        partition: Partition? = nil
    ) {
        self.partition = partition
        store = LiveStore(ruleEngine: RuleEngine(ruleSet), summaryInterval: summaryInterval)
        store.maximumLocations = limits.locations
        store.maximumDomains = limits.domains
        for (number, criteria) in subscriptions.enumerated() { self.subscriptions.add(criteria.filter, number) }
        self.limits = limits
        futureSkewMilliseconds = limits.futureSkew.milliseconds
    }

    /// Starts loading the memory that processing these `count` topics (`topic(i)`) will read
    /// first, for all of them together: their locations' table slots, then the locations,
    /// then their paths and values. Updates for random locations among a million wait for
    /// memory most of their time; a batch of them (a replayed journal, what the intake queue
    /// held) then waits about once instead of once each. Call it for up to 32 topics just
    /// before processing them; it changes nothing.
    public func prefetch(_ count: Int, topic: (Int) -> String) {
        prefetch(count) { index in topic(index).utf8.withContiguousStorageIfAvailable { pathHash(UnsafeRawBufferPointer($0)) } ?? nil }
    }

    /// ``prefetch(_:topic:)`` for topics read in place (a journal's segment).
    public func prefetch(_ count: Int, topicBytes: (Int) -> UnsafeRawBufferPointer) {
        prefetch(count) { pathHash(topicBytes($0)) }
    }

    /// ``prefetch(_:topic:)`` for topics lent one at a time (`withTopic(i, body)` calls
    /// `body` with topic `i`'s bytes), keeping each topic's path hash in `hashes` (0 for a
    /// topic without a path), to be handed to ``process(topicBytes:payload:receivedAt:retained:pathHash:)``
    /// with the topic: its path is then not hashed a second time.
    public func prefetch(
        _ count: Int, into hashes: UnsafeMutableBufferPointer<UInt64>,
        withTopic: (Int, (UnsafeRawBufferPointer) -> UInt64?) -> UInt64?
    ) {
        prefetch(count, into: hashes) { index in withTopic(index) { pathHash($0) } }
    }

    private func prefetch(_ count: Int, hash: (Int) -> UInt64?) {
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: min(count, 32)) { hashes in
            prefetch(count, into: hashes, hash: hash)
        }
    }

    /// Keeps each topic's path hash in `hashes` (0 for none: a look at one slot, which no
    /// location's hash is) and starts loading their locations.
    private func prefetch(_ count: Int, into hashes: UnsafeMutableBufferPointer<UInt64>, hash: (Int) -> UInt64?) {
        let count = min(count, hashes.count)
        for index in 0..<count { hashes[index] = hash(index) ?? 0 }
        store.prefetchLocations(UnsafeBufferPointer(rebasing: hashes[..<count]))
    }

    /// The hash of a topic's path (see ``LiveStore/hash(ofPath:)``: its slot starts loading).
    private func pathHash(_ topic: UnsafeRawBufferPointer) -> UInt64? {
        guard let slash = Self.lastSlash(topic) else { return nil }
        return store.hash(ofPath: UnsafeRawBufferPointer(rebasing: topic[..<slash]))
    }

    /// Processes one received message. `retained`: the broker sent it from its retained
    /// store (on a subscription), so it is not new data: with a timestamp the ordering rule
    /// decides as always; without one it only fills a value the location lacks.
    public func process(topic: String, payload bytes: [UInt8], receivedAt: LiveTimestamp, retained: Bool = false) -> Outcome {
        bytes.withUnsafeBytes { process(topic: topic, payload: $0, receivedAt: receivedAt, retained: retained) }
    }

    /// Processes one received message whose payload is read in place (a journal's segment
    /// being replayed): see ``process(topic:payload:receivedAt:retained:)-([UInt8],_,_,_)``.
    public func process(topic: String, payload bytes: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retained: Bool = false) -> Outcome {
        var topic = topic
        return topic.withUTF8 { process(topicBytes: UnsafeRawBufferPointer($0), payload: bytes, receivedAt: receivedAt, retained: retained) }
    }

    /// Processes one received message whose topic and payload are read in place (a read
    /// pass of the intake, a journal's segment): no string is made of the topic unless it
    /// names a location the store does not track yet in a way its bytes cannot tell (not
    /// ASCII, not well formed, another id in the payload), or the update is refused.
    /// `pathHash`: the topic's path hash, when ``prefetch(_:into:withTopic:)`` kept it (0: none).
    public func process(
        topicBytes topic: UnsafeRawBufferPointer, payload bytes: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retained: Bool = false,
        pathHash: UInt64 = 0
    ) -> Outcome {
        counters.received += 1
        // A tracked location is found by slices of the topic's bytes: its path and domain.
        // Its place in the store's table starts loading before the payload is decoded, and
        // is read after: the decoding hides the wait for memory.
        let split: (slash: Int, hash: UInt64)?
        if let slash = Self.lastSlash(topic), slash + 1 < topic.count {
            split = (slash, pathHash != 0 ? pathHash : store.hash(ofPath: UnsafeRawBufferPointer(rebasing: topic[..<slash])))
        } else {
            split = nil
        }
        // Decoded into the storage of the last payload's properties, which the store copied
        // into its own (see `LiveStore.apply`): nothing is allocated for them.
        var payload: LivePayload
        do throws(LiveUpdateError) {
            var storage = LiveProperties()
            swap(&storage, &spareProperties)
            payload = try LivePayload(bytes, limits: limits.payload, keepingSource: false, storage: &storage)
        } catch {
            // What is wrong with the topic is told first.
            return checkSubscribed(topic) ?? rejectPayload(error)
        }
        // Handed back rather than copied: no retain now and release when the payload goes.
        defer { swap(&spareProperties, &payload.properties) }
        if let timestamp = payload.timestamp,
            timestamp.millisecondsSince1970 > receivedAt.millisecondsSince1970 &+ futureSkewMilliseconds
        {
            return checkSubscribed(topic)
                ?? reject(.futureTimestamp, "its timestamp \(timestamp) is more than \(futureSkewMilliseconds / 1000) s ahead of the clock (limits.futureSkew)")
        }
        // A payload `id` other than the topic's location names the location (the topic
        // then only places it).
        let named = Self.namedLocation(payload, bytes, topic: topic, slash: split?.slash)
        // Whether no location has the path's identity (not one placed elsewhere either): a
        // new location is then inserted without looking for it a second time.
        var untracked = false
        let target = split.flatMap { split in
            store.target(
                path: UnsafeRawBufferPointer(rebasing: topic[..<split.slash]), hash: split.hash,
                domain: UnsafeRawBufferPointer(rebasing: topic[(split.slash + 1)...]), untracked: &untracked)
        }
        // Its topic need not go through the index again when the current subscriptions
        // accepted it before (the same bytes: the same answer, and the same validity).
        // A topic they have not accepted is checked against them; one that is well formed
        // of ASCII characters (a new location's, nearly always) is found so in the pass
        // that finds its levels for the index, and the index does not read it again.
        var slashes: LiveTopic.Slashes?
        if target.map({ store.isAccepted($0, generation: generation) }) != true {
            slashes = LiveTopic.slashesOfWellFormedASCII(topic)
            if let refused = checkSubscribed(topic, slashes: slashes) { return refused }
        }
        if retained, payload.timestamp == nil, !payload.isRemoval, target?.index != nil, named == nil {
            counters.retainedNotNew += 1
            return .unchanged
        }
        if let target, named == nil, let slash = split?.slash {
            // The domain is made into a string only when the location has no value of it yet.
            return outcome(
                store.apply(
                    target, domain: domain(of: topic, after: slash), payload: payload, receivedAt: receivedAt,
                    acceptedBy: generation),
                topic: topic)
        }
        // A new location, or one this topic places elsewhere: the store decides whether it
        // moves. Its address is the bytes before the last slash (one copy, not the
        // components joined again), its domain the bytes after it. (Without a target, a
        // topic was checked against the subscriptions above: `slashes` says whether it is
        // well formed.)
        if named == nil, let slash = split?.slash, slashes != nil {
            let address = LocationAddress(topicBytes: topic, lastSlash: slash)
            return outcome(
                store.apply(
                    payload, domain: domain(of: topic, after: slash), at: address, hash: split?.hash, untracked: untracked,
                    receivedAt: receivedAt),
                topic: topic)
        }
        var liveTopic: LiveTopic
        do {
            liveTopic = try LiveTopic(parsing: String(decoding: topic, as: UTF8.self))
        } catch {
            return reject(.badTopic, "\(error)")
        }
        if let named {
            do {
                liveTopic = try LiveTopic(
                    dataset: liveTopic.dataset, venue: liveTopic.venue, building: liveTopic.building, floor: liveTopic.floor,
                    room: liveTopic.room, location: named, domain: liveTopic.domain)
            } catch {
                return reject(.badPayload, "\"id\" cannot name a location: \(error)")
            }
        }
        return outcome(
            store.apply(
                LiveUpdate(topic: liveTopic, payload: payload, receivedAt: receivedAt), now: receivedAt,
                stampedOnReceipt: payload.timestamp == nil),
            topic: topic)
    }

    /// Checks a topic against the subscriptions: `nil` when one accepts it, else why not.
    /// `slashes`: where they are when the topic is known to be well formed.
    private func checkSubscribed(_ topic: UnsafeRawBufferPointer, slashes: LiveTopic.Slashes? = nil) -> Outcome? {
        let subscribed: Bool
        if let slashes {
            subscribed = withUnsafeBytes(of: slashes) { slashes in
                subscriptions.hasMatch(bytes: topic, slashes: slashes.assumingMemoryBound(to: Int.self))
            }
        } else {
            do {
                subscribed = try subscriptions.hasMatch(bytes: topic)
            } catch {
                return reject(.badTopic, "\(error)")
            }
        }
        guard subscribed else {
            counters.notSubscribed += 1
            return .notSubscribed
        }
        // Checked with the subscriptions, once per topic and domain of a location (the store
        // then remembers the answer): a location never gets into the state, nor moves,
        // outside the partition.
        if let partition, !partition.owns(topic: String(decoding: topic, as: UTF8.self)) {
            return reject(.outsidePartition, "its place is outside the partition \(partition.name) (partition.owns)")
        }
        return nil
    }

    /// The payload's `id` when it is not the topic's location (the level that ends at
    /// `slash`, the topic's last `/`); `nil` when it is, or when there is none.
    private static func namedLocation(
        _ payload: LivePayload, _ bytes: UnsafeRawBufferPointer, topic: UnsafeRawBufferPointer, slash: Int?
    ) -> String? {
        guard let slash else { return nil }
        if let range = payload.idBytes {
            // The common case, the topic's own id: compared in place, from the end of the
            // location level (no scan for where it starts).
            let start = slash - range.count
            let same =
                start >= 1 && topic[start - 1] == UInt8(ascii: "/")
                && bytesEqual(bytes.baseAddress! + range.lowerBound, topic.baseAddress! + start, range.count)
            return same ? nil : String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        guard let id = payload.id else { return nil }
        let level = topic.prefix(slash).split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).last
        return level.map { id.utf8.elementsEqual($0) } == true ? nil : id
    }

    /// The domain of a topic whose last `/` is at byte `slash`; the string made for the last
    /// one when the bytes are the same (a venue's new locations come with a handful of
    /// domains, and comparing the bytes costs less than decoding them into a string).
    private func domain(of topic: UnsafeRawBufferPointer, after slash: Int) -> String {
        let bytes = UnsafeRawBufferPointer(rebasing: topic[(slash + 1)...])
        if !lastDomain.isSameIdentifier(asBytes: bytes) { lastDomain = String(decoding: bytes, as: UTF8.self) }
        return lastDomain
    }

    /// Where the last `/` of a topic is, in its bytes.
    private static func lastSlash(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var index = bytes.count - 1
        while index >= 0 {
            if bytes[index] == UInt8(ascii: "/") { return index }
            index -= 1
        }
        return nil
    }

    /// Taken, not borrowed: a change passes on as it is (a copy would retain each of its
    /// references and the end of the store's outcome release them, once an update).
    private func outcome(_ outcome: consuming LiveStore.Outcome, topic: UnsafeRawBufferPointer) -> Outcome {
        switch consume outcome {
        case .ignoredOutOfOrder: .ignoredOutOfOrder
        case .unchanged: .unchanged
        case .changed(let change): .changed(change)
        case .placementConflict: placementConflict(topic)
        case .tooManyLocations: reject(.tooManyLocations, "\(store.count) locations are tracked, the limit (limits.locations)")
        case .tooManyDomains: reject(.tooManyDomains, "the location has \(limits.domains) domains, the limit (limits.domains)")
        }
    }

    private func placementConflict(_ topic: UnsafeRawBufferPointer) -> Outcome {
        let domain = Self.lastSlash(topic).map { self.domain(of: topic, after: $0) } ?? ""
        let current = store.lastPlacementConflict.map { "\($0.location) is at \($0)" } ?? "the location is elsewhere"
        return reject(.placementConflict, "\(current); \(domain) updates do not move locations (domains.\(domain).moves)")
    }

    private func rejectPayload(_ error: LiveUpdateError) -> Outcome {
        switch error {
        case .payloadTooLarge: return reject(.oversize, "\(error)")
        case .tooManyProperties: return reject(.tooManyProperties, "\(error)")
        case .propertyTooLong: return reject(.propertyTooLong, "\(error)")
        default: return reject(.badPayload, "\(error)")
        }
    }

    private func reject(_ reason: RejectReason, _ message: String) -> Outcome {
        counters.rejected[reason, default: 0] += 1
        return .rejected(reason, message: message)
    }

    // MARK: - Passing through to the store

    public func expire(now: LiveTimestamp) -> [DerivedChange] { store.expire(now: now) }

    /// See ``LiveStore/clockStepped(by:stampedAfter:)``.
    public func clockStepped(by milliseconds: Int64, stampedAfter: ClosedRange<LiveTimestamp>? = nil) -> Int {
        store.clockStepped(by: milliseconds, stampedAfter: stampedAfter)
    }

    /// See ``LiveStore/handOver(dataset:id:to:now:from:)``.
    public func handOver(
        dataset: String, id: String, to address: LocationAddress, now: LiveTimestamp, from held: (LocationAddress) -> Bool
    ) -> DerivedChange? {
        store.handOver(dataset: dataset, id: id, to: address, now: now, from: held)
    }

    public func setLayer(_ layer: String, hidden: Bool, now: LiveTimestamp) -> [DerivedChange] {
        store.setLayer(layer, hidden: hidden, now: now)
    }

    /// Takes a reloaded config's rules and criteria.
    public func reload(ruleSet: RuleSet, subscriptions: [TopicCriteria], now: LiveTimestamp) -> [DerivedChange] {
        var index = TopicIndex<Int>()
        for (number, criteria) in subscriptions.enumerated() { index.add(criteria.filter, number) }
        self.subscriptions = index
        generation &+= 1
        return store.replaceRuleEngine(RuleEngine(ruleSet), now: now)
    }

    /// After a restore: catches up on staleness and, when the rules differ from the ones the
    /// stored styles were derived with, re-derives everything.
    /// - Returns: how many styles changed (not kept: the start's first convergence compares
    ///   every style with the broker's and publishes what differs).
    package func catchUp(now: LiveTimestamp, sameRules: Bool) -> Int {
        var changed = 0
        store.expire(now: now) { _ in changed += 1 }
        if !sameRules { store.rederiveAll(now: now) { _ in changed += 1 } }
        return changed
    }

    /// Summaries due for publishing; `all`: every one that changed, due or not.
    public func takeDueSummaries(now: LiveTimestamp, all: Bool = false) -> [SummaryTracker.Summary] {
        store.takeDueSummaries(now: now, all: all)
    }

    public func takeDirty() -> [LocationRow] { store.takeDirty() }

    public func discardDirty() { store.discardDirty() }

    // MARK: - What the daemon's stages ask of the state

    /// Locations held.
    public var locationCount: Int { store.count }

    /// The datasets of the locations held.
    public var datasets: Set<String> { store.datasets }

    /// Whether a location is held at `address`.
    public func holds(_ address: LocationAddress) -> Bool { store[address] != nil }

    /// The record of every location held.
    public var records: [LocationRecord] { store.records }

    /// A part of the state for a peer's copy (see ``LiveStore/values(ofLocationsAt:)``).
    public func values(ofLocationsAt positions: Range<Int>) -> [(address: LocationAddress, values: [DomainValue])] {
        store.values(ofLocationsAt: positions)
    }

    /// Every floor and building summary.
    public var summaries: [SummaryTracker.Summary] { store.summaries.all() }

    /// The locations counted in a place's summary (0 when it has none).
    public func summaryLocations(_ place: Place) -> Int { store.summaries.summary(place)?.locations ?? 0 }

    /// The store's counts.
    public var storeCounters: LiveStore.Counters { store.counters }

    /// The fingerprint of the rules the styles are derived with.
    public var rulesFingerprint: String { store.ruleEngine.fingerprint }

    /// See ``LiveStore/republication(at:now:)``.
    public func republication(at address: LocationAddress, now: LiveTimestamp) -> DerivedChange? {
        store.republication(at: address, now: now)
    }

    /// See ``LiveStore/takeStaleStyleAddresses()``.
    public func takeStaleStyleAddresses() -> [LocationAddress] { store.takeStaleStyleAddresses() }

    /// The locations changed since the last call, and the rows vacated, for a snapshot
    /// (see ``LiveStore/takeChangedLocations()``).
    public func takeSnapshotChanges() -> (changed: LiveStore.ChangedLocations, vacated: [Int64]) {
        (store.takeChangedLocations(), store.takeVacated())
    }

    /// Forgets what changed since the last snapshot (nothing is written).
    public func discardSnapshotChanges() {
        store.discardDirty()
        _ = store.takeVacated()
    }

    /// Gives back what a snapshot could not write: `changed[range]` and, when given, the
    /// vacated rows, to be taken again by the next one.
    public func returnSnapshotChanges(_ changed: LiveStore.ChangedLocations, in range: Range<Int>, vacated: [Int64]?) {
        store.markDirty(changed, in: range)
        if let vacated { store.returnVacated(vacated) }
    }
}
