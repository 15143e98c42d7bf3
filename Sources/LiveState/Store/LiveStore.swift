import CPrefetch
import DisplayRules
import LiveTopics

/// The current state of every location: the latest value per domain, the derived style,
/// a version. After every change it re-derives the style and reports a ``DerivedChange``
/// only when the style (or the rules behind it) really differs from the last published one.
///
/// Pure logic with one owner (not thread-safe): time comes in as `now`, so staleness and
/// summaries are testable with a controllable clock; persistence reads ``takeDirty()``.
public final class LiveStore {
    /// What happened to an update.
    public enum Outcome: Sendable, Equatable {
        /// Older than the stored value for the same location and domain.
        case ignoredOutOfOrder
        /// It names another placement for a tracked location, and its domain does not move
        /// locations (`domains.X.moves`); ``lastPlacementConflict`` says where it is.
        case placementConflict
        /// A new location while ``maximumLocations`` are tracked: refused.
        case tooManyLocations
        /// A new domain for a location that has ``maximumDomains`` values: refused.
        case tooManyDomains
        /// Applied; the style stayed the same, so nothing is published.
        case unchanged
        /// Applied, and the style changed.
        case changed(DerivedChange)
    }

    public struct Counters: Sendable, Equatable {
        public var applied = 0
        public var ignoredOutOfOrder = 0
        public var removals = 0
        /// Locations that moved to another venue, building, floor or room.
        public var moves = 0
        public var placementConflicts = 0
        public var expired = 0
        public var changes = 0

        public init() {}
    }

    // The store has one owner and no method of it re-enters another while changing a
    // property, so the run-time exclusivity check on every access to the properties an
    // update touches (a thread-local lookup each) would buy nothing: they opt out of it.
    @exclusivity(unchecked) public private(set) var ruleEngine: RuleEngine
    @exclusivity(unchecked) public private(set) var hiddenLayers = Set<String>()
    @exclusivity(unchecked) public private(set) var counters = Counters()
    @exclusivity(unchecked) public internal(set) var summaries: SummaryTracker
    /// Datasets of the tracked locations.
    @exclusivity(unchecked) public private(set) var datasets = Set<String>()
    /// The dataset of the last location added.
    @exclusivity(unchecked) private var lastDataset: String?
    @exclusivity(unchecked) var locations = LocationTable()
    /// The locations by floor, for queries.
    @exclusivity(unchecked) var floorIndex = FloorIndex()
    @exclusivity(unchecked) var expiries = ExpiryQueue()
    /// The keys of the styles locations show (see ``LocationState/published``).
    @exclusivity(unchecked) var styleKeys = StyleKeyPool()
    /// What locations' addresses leave out under the current rules (see ``LocationState/outOfScope``).
    @exclusivity(unchecked) var outOfScopeSelections = SharedSelections()
    /// The locations changed since the last snapshot took them, each once (its `dirty` flag
    /// set), unless `allDirty`.
    @exclusivity(unchecked) var dirty: [LocationState] = []
    /// Every location is to be written by the next snapshot: so many changed at once (a
    /// clock step, a mass expiry, new rules) that listing them would cost a reference
    /// each; `dirty` is then empty and no flag is set (see ``markDirty(_:)``).
    @exclusivity(unchecked) var allDirty = false
    /// The last convergence's number for the locations it saw (``SeenLocations``).
    @exclusivity(unchecked) var seenGeneration: UInt16 = 0
    /// New locations beyond this many are refused (``Outcome/tooManyLocations``); a restore
    /// puts back every stored one.
    @exclusivity(unchecked) public var maximumLocations = LiveLimits.standard.locations
    /// New domains for a location with this many values are refused (``Outcome/tooManyDomains``).
    @exclusivity(unchecked) public var maximumDomains = LiveLimits.standard.domains
    /// Where the location of the last ``Outcome/placementConflict`` is.
    public private(set) var lastPlacementConflict: LocationAddress?
    /// Rows of the state file that no location holds any more (the second row of a location
    /// a restore found stored twice), for persistence to delete.
    var vacated: [Int64] = []
    /// The row the next new location gets (``LocationRow``).
    @exclusivity(unchecked) var nextRow: Int64 = 1
    /// Style topics to clear that no derived change will clear (see ``takeStaleStyleAddresses()``).
    var staleStyleAddresses: [LocationAddress] = []
    /// The domains with a `staleAfter`, numbered for the expiry bitmask of each location.
    @exclusivity(unchecked) private var staleDomains: [String] = []
    /// Per stale domain, its `staleAfter` in milliseconds (timestamps are milliseconds).
    @exclusivity(unchecked) private var staleAfter: [Int64] = []

    private static let headcountDomain = BuiltInDomain.headcount.rawValue
    private static let placementDomain = BuiltInDomain.placement.rawValue

    public init(ruleEngine: RuleEngine, summaryInterval: Duration = .seconds(1)) {
        self.ruleEngine = ruleEngine
        summaries = SummaryTracker(interval: summaryInterval, titles: ruleEngine.legendTitles)
        numberStaleDomains()
    }

    private func numberStaleDomains() {
        let stale = ruleEngine.ruleSet.domains.compactMap { name, domain in domain.staleAfter.map { (name, $0.milliseconds) } }
            .sorted { $0.0 < $1.0 }.prefix(64)
        staleDomains = stale.map(\.0)
        staleAfter = stale.map(\.1)
    }

    private func staleNumber(_ domain: String) -> Int? {
        staleDomains.isEmpty ? nil : staleDomains.firstIndex { $0.isSameIdentifier(as: domain) }
    }

    /// How many locations are tracked.
    public var count: Int { locations.count }

    /// A location's record.
    public subscript(address: LocationAddress) -> LocationRecord? {
        locations.find(at: address)?.record(ruleEngine)
    }

    /// Every tracked location's record.
    public var records: [LocationRecord] { locations.locations.map { $0.record(ruleEngine) } }

    /// The values of the locations at `positions` in the order they were first seen (clamped
    /// to those there are), without their styles: a part of the state for a replica that
    /// copies it. Locations are only ever added at the end of that order, so a position
    /// handed out before still names the same location, and the parts of a copy taken one
    /// after another visit every location that was there when it began once.
    public func values(ofLocationsAt positions: Range<Int>) -> [(address: LocationAddress, values: [DomainValue])] {
        let all = locations.locations
        let range = positions.clamped(to: 0..<all.count)
        return all[range].map { (address: $0.address, values: $0.values) }
    }

    /// The records of every location with this id (the topic's location level), in
    /// address order: one per dataset that has it at most. Read through an index kept up to
    /// date as locations are added and move, not a scan.
    public func records(id: String) -> [LocationRecord] {
        datasets.compactMap { locations.find(dataset: $0, id: id) }.map { $0.record(ruleEngine) }
            .sorted { $0.address.description < $1.address.description }
    }

    /// The records of every location of a floor, in address order (an index, not a scan).
    public func records(floor: Place) -> [LocationRecord] {
        guard let aggregate = summaries.aggregate(floor) else { return [] }
        return floorIndex.locations(floor: aggregate).map { $0.record(ruleEngine) }
            .sorted { $0.address.description < $1.address.description }
    }

    /// When the next value goes stale, if any will.
    public var nextExpiry: LiveTimestamp? { expiries.next }

    // MARK: - Updates

    /// Applies one update: stores its value (or removes it, for an empty payload) and
    /// re-derives the location's style.
    ///
    /// An update that names another placement for a tracked location (the same dataset and
    /// id, another venue, building, floor or room) moves it there when its domain moves
    /// locations and it is not older than the location's value of that domain; otherwise
    /// it is refused (``Outcome/placementConflict``, see ``lastPlacementConflict``) or ignored as out of order.
    /// `stampedOnReceipt`: the update's timestamp is its receipt time (its payload had
    /// none); it is then ordered by its arrival, not by that time.
    public func apply(_ update: LiveUpdate, now: LiveTimestamp, stampedOnReceipt: Bool = false) -> Outcome {
        apply(update, at: LocationAddress(update.topic), now: now, stampedOnReceipt: stampedOnReceipt)
    }

    /// ``apply(_:now:stampedOnReceipt:)`` with the update's address already made (`LocationAddress(update.topic)`).
    func apply(_ update: LiveUpdate, at address: LocationAddress, now: LiveTimestamp, stampedOnReceipt: Bool = false) -> Outcome {
        apply(
            domain: update.topic.domain, properties: update.properties, timestamp: update.timestamp,
            stampedOnReceipt: stampedOnReceipt, isRemoval: update.isRemoval, at: address, now: now)
    }

    /// ``apply(_:now:)`` of a decoded payload for `domain` at `address` (the topic's), without
    /// an update made of them: a new location's first update takes this. `hash`: the
    /// address's ``hash(ofPath:)`` when the caller has it (the topic's path was hashed to
    /// look for the location), so that a new location's path is not hashed twice.
    /// `untracked`: ``target(path:hash:domain:untracked:)`` found that no location has the
    /// address's identity, just now (it is not looked for again).
    func apply(
        _ payload: LivePayload, domain: String, at address: LocationAddress, hash: UInt64? = nil, untracked: Bool = false,
        receivedAt now: LiveTimestamp
    ) -> Outcome {
        apply(
            domain: domain, properties: payload.properties, timestamp: payload.timestamp ?? now,
            stampedOnReceipt: payload.timestamp == nil, isRemoval: payload.isRemoval,
            at: address, hash: hash, untracked: untracked && hash != nil, now: now)
    }

    private func apply(
        domain: String, properties: LiveProperties, timestamp: LiveTimestamp, stampedOnReceipt: Bool = false, isRemoval: Bool,
        at address: LocationAddress, hash: UInt64? = nil, untracked: Bool = false, now: LiveTimestamp
    ) -> Outcome {
        let found = location(address, hash: hash ?? LocationTable.hash(address), untracked: untracked)
        guard let (state, samePlacement) = found else { return .tooManyLocations }
        let index = state.index(of: domain)
        var movedFrom: LocationAddress?
        if !samePlacement {
            guard ruleEngine.ruleSet.moves(domain) else {
                counters.placementConflicts += 1
                lastPlacementConflict = state.address
                return .placementConflict
            }
            // A removal says nothing of where the location is; an older value does not move it back.
            if isRemoval { return .unchanged }
            if let index, !stampedOnReceipt, timestamp < state.values[index].timestamp {
                counters.ignoredOutOfOrder += 1
                return .ignoredOutOfOrder
            }
            movedFrom = state.address
            move(state, to: address)
        }
        let outcome = apply(
            state, domain: domain, at: index, properties: properties, timestamp: timestamp, stampedOnReceipt: stampedOnReceipt,
            isRemoval: isRemoval, now: now)
        guard let movedFrom, case .changed(var change) = outcome else { return outcome }
        change.before = .moved(DerivedChange.MovedFrom(movedFrom))
        return .changed(change)
    }

    /// Places a location elsewhere: its summaries and floor index move with it (its row in
    /// the state file stays, and is rewritten), and its next derivation publishes the whole style at its new topic.
    /// `counted`: a move seen in the updates (not one a restore settles).
    func move(_ state: LocationState, to address: LocationAddress, counted: Bool = true) {
        // Its slot in the table stays: the table keys locations by identity.
        floorIndex.remove(state)
        state.address = address
        summaries.move(state, to: address)
        floorIndex.insert(state)
        // What was worked out for the old address is forgotten.
        state.outOfScope = 0
        state.acceptedDomains = 0
        // Nothing is published at the new topic yet: the next change carries every field.
        state.setPublished(.none, keys: &styleKeys)
        if counted { counters.moves += 1 }
        markDirty(state)
    }

    /// Another daemon took this location at `address`, outside this one's partition (its
    /// announcement of an arrival): the location is placed there, as a move would, so that
    /// what it adds to this daemon's summaries leaves with it and the change's
    /// ``DerivedChange/movedFrom`` names the topic this daemon is to clear. The change itself
    /// is not this daemon's to publish.
    /// - Parameter held: whether the location's current address is one this daemon holds
    ///   (its partition's): only such a location is handed over.
    /// - Returns: the change, or `nil` when this store has no such location, has it there,
    ///   or has it outside what `held` accepts.
    public func handOver(
        dataset: String, id: String, to address: LocationAddress, now: LiveTimestamp, from held: (LocationAddress) -> Bool
    ) -> DerivedChange? {
        guard let state = locations.find(dataset: dataset, id: id), state.address != address, held(state.address) else { return nil }
        let old = state.address
        move(state, to: address)
        guard case .changed(var change) = rederive(state, now: now, placementChanged: true) else { return nil }
        change.before = .moved(DerivedChange.MovedFrom(old))
        return change
    }

    /// A tracked location, found by the bytes of an incoming topic, and where its value for
    /// the topic's domain is (see ``target(path:hash:domain:untracked:)``). Valid until the store changes.
    struct Target {
        let state: LocationState
        let index: Int?
    }

    /// A path's hash in the table of locations, for ``target(path:hash:domain:untracked:)``; the
    /// table's memory for it starts loading now. A caller with other work to do before it
    /// needs the location (decoding the payload) asks for this first: the location is
    /// then found without waiting for memory as long.
    func hash(ofPath path: UnsafeRawBufferPointer) -> UInt64 {
        let hash = LocationTable.hash(path)
        locations.prefetch(hash: hash)
        return hash
    }

    /// Starts loading what finding and updating the locations at these paths' hashes
    /// reads (see ``LiveCore/prefetch(_:topic:)``): each one's slot was asked for by
    /// ``hash(ofPath:)``; now the locations, then their paths' and values' storage, all of
    /// them at once in each step.
    func prefetchLocations(_ hashes: UnsafeBufferPointer<UInt64>) {
        withUnsafeTemporaryAllocation(of: Unmanaged<LocationState>?.self, capacity: hashes.count) { found in
            for (index, hash) in hashes.enumerated() { found[index] = locations.prefetchLocation(hash: hash) }
            for location in found {
                guard let location else { continue }
                location._withUnsafeGuaranteedRef { state in
                    // A native string's and an array's storage keep their bytes and elements
                    // after a 32-byte header. Only the addresses are taken (no reference: taking
                    // one writes the line this waits for); nothing there is read yet.
                    livedata_prefetch(Self.storageHint(state.address.path).map { $0 + 32 })
                    let storage = unsafeBitCast(state.values, to: UnsafeRawPointer.self)
                    livedata_prefetch(storage + 32)
                }
            }
        }
    }

    /// Where a native string's storage object is (after its count and flags), as a hint for
    /// a prefetch only: for a small or bridged string the address means nothing, which a
    /// prefetch ignores.
    static func storageHint(_ string: borrowing String) -> UnsafeRawPointer? {
        storageHint(objectBits: unsafeBitCast(copy string, to: (UInt64, UInt64).self).1)
    }

    /// ``storageHint(_:)`` of the string whose two words are at `string`, read there.
    static func storageHint(stringAt string: UnsafeRawPointer) -> UnsafeRawPointer? {
        storageHint(objectBits: string.load(fromByteOffset: 8, as: UInt64.self))
    }

    /// The storage object's address in a string's second word (its flags in the top bits).
    private static func storageHint(objectBits object: UInt64) -> UnsafeRawPointer? {
        UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: object & 0x0FFF_FFFF_FFFF_FFFF))
    }

    /// The tracked location with this path (`dataset/venue/building/floor/room/location`;
    /// `hash` is its ``hash(ofPath:)``) and where its value for `domain` is: slices of the
    /// incoming topic's bytes.
    /// - Returns: `nil` when no location is tracked at this path (a new one, or one the
    /// topic places elsewhere): use ``apply(_:now:)``. `untracked` is set when none has the
    /// path's identity at all (a new one).
    func target(
        path: UnsafeRawBufferPointer, hash: UInt64, domain: UnsafeRawBufferPointer, untracked: inout Bool
    ) -> Target? {
        guard let state = locations.find(path, hash: hash) else {
            untracked = true
            return nil
        }
        guard state.address.hasPath(path) else { return nil }
        return Target(state: state, index: state.index(ofBytes: domain))
    }

    /// Whether the topic of a target was found acceptable by the subscriptions of
    /// `generation` (a number its caller gives each set of subscriptions), as remembered by
    /// ``apply(_:domain:payload:receivedAt:acceptedBy:)``: the topic need not be checked again.
    func isAccepted(_ target: Target, generation: UInt32) -> Bool {
        guard let index = target.index, index < 64, target.state.acceptedGeneration == generation else { return false }
        return target.state.acceptedDomains & (1 << UInt64(index)) != 0
    }

    /// Applies a decoded payload to a target found by ``target(path:hash:domain:untracked:)`` (`domain`
    /// makes its domain's name, asked for only when the location has no value of it yet),
    /// and remembers that the subscriptions of `generation` accept its topic.
    func apply(
        _ target: Target, domain: @autoclosure () -> String, payload: LivePayload, receivedAt now: LiveTimestamp,
        acceptedBy generation: UInt32
    ) -> Outcome {
        let state = target.state
        // Where the value is, or will be once appended (a removal moves values: nothing is
        // remembered for it).
        if !payload.isRemoval, case let position = target.index ?? state.values.count, position < 64 {
            if state.acceptedGeneration != generation {
                state.acceptedGeneration = generation
                state.acceptedDomains = 0
            }
            state.acceptedDomains |= 1 << UInt64(position)
        }
        return apply(
            state, domain: target.index.map { state.values[$0].domain } ?? domain(), at: target.index,
            properties: payload.properties, timestamp: payload.timestamp ?? now, stampedOnReceipt: payload.timestamp == nil,
            isRemoval: payload.isRemoval, now: now)
    }

    /// `index`: where the domain's value is in `state.values`, if it has one.
    private func apply(
        _ state: LocationState, domain: String, at index: Int?, properties: LiveProperties, timestamp: LiveTimestamp,
        stampedOnReceipt: Bool = false, isRemoval: Bool, now: LiveTimestamp
    ) -> Outcome {
        if index == nil, !isRemoval, state.values.count >= maximumDomains { return .tooManyDomains }
        if isRemoval {
            guard let index else { return .unchanged }
            state.removeValue(at: index)
            counters.removals += 1
        } else {
            let staleNumber = staleNumber(domain)
            let staleAfter = staleNumber.map { self.staleAfter[$0] }
            let stale = staleAfter.map { timestamp.adding(milliseconds: $0) <= now } ?? false
            if let index {
                // An update without a timestamp of its own is ordered by its arrival (the
                // broker keeps a topic's order): were it judged by its receipt time, a step
                // back of the clock would make every such update older than the stored one.
                if !stampedOnReceipt, timestamp < state.values[index].timestamp {
                    counters.ignoredOutOfOrder += 1
                    return .ignoredOutOfOrder
                }
                // The same values again (sensors repeat themselves): rules read values, not
                // timestamps, so only the timestamp and the expiry move on — unless nothing
                // is published where the location is (it has just moved).
                if !stale, !state.values[index].stale, state.values[index].properties == properties,
                    state.published != nil || state.foreign != nil
                {
                    state.values[index].timestamp = timestamp
                    state.values[index].stampedOnReceipt = stampedOnReceipt
                    if let staleNumber, let staleAfter {
                        schedule(state, number: staleNumber, deadline: timestamp.adding(milliseconds: staleAfter))
                    }
                    counters.applied += 1
                    markDirty(state)
                    return .unchanged
                }
                // In place: the properties are written into the value's own storage, so
                // that the decoded ones' storage can be used again by the caller.
                state.values[index].properties.replace(with: properties)
                state.values[index].timestamp = timestamp
                state.values[index].stale = stale
                state.values[index].stampedOnReceipt = stampedOnReceipt
            } else {
                // A copy the size of its properties: a decoded payload's storage has room for
                // more, and a million locations would keep that room.
                state.appendValue(
                    DomainValue(
                        domain: domain, properties: properties.compacted(), timestamp: timestamp, stale: stale,
                        stampedOnReceipt: stampedOnReceipt))
            }
            if let staleNumber, let staleAfter, !stale {
                schedule(state, number: staleNumber, deadline: timestamp.adding(milliseconds: staleAfter))
            }
        }
        counters.applied += 1
        markDirty(state)
        return rederive(
            state, now: now, changedDomain: domain, placementChanged: domain.isSameIdentifier(as: Self.placementDomain))
    }

    /// Marks values whose `staleAfter` has passed as absent and re-derives their locations.
    /// - Returns: the changes that causes.
    public func expire(now: LiveTimestamp) -> [DerivedChange] {
        var changes: [DerivedChange] = []
        expire(now: now) { changes.append($0) }
        return changes
    }

    /// Marks the values due at `now` stale, passing each change to `body` as it is made
    /// (a start that publishes none of them keeps none).
    public func expire(now: LiveTimestamp, _ body: (DerivedChange) -> Void) {
        for entry in expiries.popDue(now) {
            let state = entry.location
            let number = Int(entry.domain)
            state.scheduledExpiries &= ~(1 << UInt64(number))
            guard let index = state.index(of: staleDomains[number]), !state.values[index].stale else { continue }
            // A newer value arrived since this was scheduled: wait for its own deadline.
            let deadline = state.values[index].timestamp.adding(milliseconds: staleAfter[number])
            if deadline > now {
                schedule(state, number: number, deadline: deadline)
                continue
            }
            state.values[index].stale = true
            counters.expired += 1
            markDirty(state)
            let placementChanged = staleDomains[number].isSameIdentifier(as: Self.placementDomain)
            if case .changed(let change) = rederive(state, now: now, placementChanged: placementChanged) { body(change) }
        }
    }

    // MARK: - Whole-store changes

    /// Hides or shows a layer; locations in it are re-published (as not visible when hidden).
    public func setLayer(_ layer: String, hidden: Bool, now: LiveTimestamp) -> [DerivedChange] {
        let changed = hidden ? hiddenLayers.insert(layer).inserted : hiddenLayers.remove(layer) != nil
        return changed ? rederiveAll(now: now) : []
    }

    /// Takes new rules (a reloaded config) and re-derives every location.
    public func replaceRuleEngine(_ ruleEngine: RuleEngine, now: LiveTimestamp) -> [DerivedChange] {
        let old = self.ruleEngine
        self.ruleEngine = ruleEngine
        numberStaleDomains()
        expiries.removeAll()
        outOfScopeSelections.removeAll()
        // Every location's style is foreign to the new rules until derived again.
        styleKeys = StyleKeyPool()
        // Legend-state numbers and stale-domain numbers belong to the old rules: start over.
        summaries.resetTotals(titles: ruleEngine.legendTitles)
        for state in locations.locations {
            let published = state.publishedStyle(old)
            state.setPublished(
                published.map { .foreign(ForeignStyle($0, selection: ruleEngine.selection(named: $0.rules))) } ?? .none, keys: &styleKeys)
            state.contribution = nil
            state.outOfScope = 0
            state.scheduledExpiries = 0
            scheduleAll(state)
        }
        return rederiveAll(now: now)
    }

    /// Re-derives every location (after a restore, a rules change, a layer toggle).
    public func rederiveAll(now: LiveTimestamp) -> [DerivedChange] {
        var changes: [DerivedChange] = []
        rederiveAll(now: now) { changes.append($0) }
        return changes.sorted { $0.address.path < $1.address.path }
    }

    /// Derives every location again, passing each change to `body` as it is made.
    public func rederiveAll(now: LiveTimestamp, _ body: (DerivedChange) -> Void) {
        for state in locations.locations {
            if case .changed(let change) = rederive(state, now: now) {
                markDirty(state)
                body(change)
            }
        }
    }

    // MARK: - Deriving

    /// The location with this address's identity (its dataset and id), and whether it is
    /// placed there; a new one (placed there) when none is tracked.
    /// `nil` when it would be new and ``maximumLocations`` are tracked. `hash`: the address's
    /// ``LocationTable/hash(_:)``; `untracked`: none has its identity (found just now).
    private func location(
        _ address: LocationAddress, hash: UInt64, untracked: Bool = false
    ) -> (LocationState, samePlacement: Bool)? {
        if !untracked, let found = address.withPathBytes({ locations.find($0, hash: hash) }) {
            return (found, found.address == address)
        }
        guard locations.count < maximumLocations else { return nil }
        return (insert(address, values: [], version: 0, hash: hash, published: .none), true)
    }

    /// `hash`: the address's ``LocationTable/hash(_:)``; `row`: its row in the state file,
    /// or 0 for the next one.
    func insert(
        _ address: consuming LocationAddress, values: consuming [DomainValue], version: UInt64, hash: UInt64,
        published: consuming PublishedStyle, row: Int64 = 0
    ) -> LocationState {
        let floor = summaries.floorAggregate(for: address)
        // Most new locations are of the dataset the last one was of: compared in place.
        let newDataset = lastDataset.map { !address.has(.dataset, $0) } ?? true
        // The address, values and style go into the state as they are, with no copy.
        let state = LocationState(address, values: values, version: version, published: published, floor: floor, keys: &styleKeys)
        if row > 0, let number = UInt32(exactly: row) {
            state.row = number
            nextRow = max(nextRow, row + 1)
        } else {
            if row > 0 { vacated.append(row) }
            state.row = takeRow()
        }
        locations.insert(state, hash: hash)
        floorIndex.insert(state)
        if newDataset {
            let dataset = state.address.dataset
            datasets.insert(dataset)
            lastDataset = dataset
        }
        return state
    }

    /// A row for a new location. Rows only grow: a location is never forgotten, and a
    /// start carries on after the highest row of the file.
    private func takeRow() -> UInt32 {
        defer { nextRow += 1 }
        return UInt32(truncatingIfNeeded: nextRow)
    }

    private func schedule(_ state: LocationState, number: Int, deadline: LiveTimestamp) {
        let bit: UInt64 = 1 << UInt64(number)
        guard state.scheduledExpiries & bit == 0 else { return }
        state.scheduledExpiries |= bit
        expiries.push(.init(deadline: deadline, location: state, domain: Int32(number)))
    }

    /// Schedules the expiry of every fresh value of a location.
    func scheduleAll(_ state: LocationState) {
        // Rules with no `staleAfter`: nothing to schedule, and no value read (each a copy:
        // a restore of a million would take and drop a reference to every one).
        guard !staleDomains.isEmpty else { return }
        for value in state.values where !value.stale {
            if let number = staleNumber(value.domain) {
                schedule(state, number: number, deadline: value.timestamp.adding(milliseconds: staleAfter[number]))
            }
        }
    }

    @inline(__always)
    func markDirty(_ state: LocationState) {
        if !state.dirty && !allDirty {
            state.dirty = true
            dirty.append(state)
            if dirty.count >= Self.wholeTableDirty(of: locations.count) { markAllDirty() }
        }
    }

    /// How many changed locations make the next snapshot write every location rather than
    /// a list of them: a quarter of the locations, and never fewer than 65,536.
    static func wholeTableDirty(of count: Int) -> Int { max(1 << 16, count / 4) }

    /// The next snapshot writes every location (``allDirty``): the list is let go.
    @inline(never)
    func markAllDirty() {
        for state in dirty { state.dirty = false }
        dirty = []
        allDirty = true
    }

    /// Re-derives a location's style; with `changedDomain`, only the rules that read that
    /// domain are evaluated again (the others keep their last result). The diff compares
    /// style keys; the style itself is built when the change is published.
    ///
    /// `placementChanged`: the location's fresh position (``BuiltInDomain/placement``)
    /// changed, appeared or went away; a change is then published even when the style is
    /// the same, since it carries the position a map client places the marker by.
    private func rederive(
        _ state: LocationState, now: LiveTimestamp, changedDomain: String? = nil, placementChanged: Bool = false
    ) -> Outcome {
        // Read once: every use of the stored property would retain and release it again.
        let ruleEngine = self.ruleEngine
        var values = LiveValues(domains: state.values)
        values.domainTags = state.domainTags
        let outOfScope: RuleSelection
        if state.outOfScope != 0 {
            outOfScope = outOfScopeSelections[state.outOfScope]
        } else {
            outOfScope = ruleEngine.outOfScope(state.address)
            state.outOfScope = outOfScopeSelections.number(of: outOfScope)
        }
        // The published key is taken out of the location (and put back, or replaced).
        let published = state.foreign == nil ? state.published.take() : nil
        let key = ruleEngine.styleKey(
            state.address, values: values, hiddenLayers: hiddenLayers, previous: published?.key, changedDomain: changedDomain,
            outOfScope: outOfScope)
        let legendState = ruleEngine.legendStateID(key.selection)
        if let changedDomain, !changedDomain.isSameIdentifier(as: Self.headcountDomain), var contribution = state.contribution {
            // People and capacity come from the headcount domain alone: only the legend state can move.
            contribution.state = legendState ?? -1
            summaries.update(state, contribution)
        } else {
            summaries.update(
                state,
                Self.contribution(
                    state.address, legendState: legendState, values: values.domains, headcount: state.headcountIndex,
                    ruleEngine: ruleEngine))
        }
        let before: DerivedChange.Before
        let shared: SharedStyleKey
        if let foreign = state.foreign {
            state.foreign = nil
            shared = styleKeys.share(key)
            state.published = shared
            if !placementChanged, foreign.selection == key.selection, foreign.derived.style == ruleEngine.style(key, at: state.address) {
                return .unchanged
            }
            before = .style(foreign)
        } else if let previous = published {
            if previous.key == key, !placementChanged {
                state.published = previous
                return .unchanged
            }
            shared = styleKeys.share(key)
            state.published = shared
            before = .key(previous)
        } else {
            shared = styleKeys.share(key)
            state.published = shared
            before = .none
        }
        state.version += 1
        counters.changes += 1
        return .changed(
            DerivedChange(
                address: state.address, key: shared, before: before, ruleEngine: ruleEngine, values: state.values,
                version: state.version, updatedAt: now))
    }

    /// What a location adds to its summaries: its legend state, the people its headcount
    /// domain (``BuiltInDomain/headcount``) counts and its capacity (that domain's, else the
    /// catalog's). `headcount`: where that domain's value is in `values`.
    static func contribution(
        _ address: LocationAddress, legendState: Int32?, values: [DomainValue], headcount: Int?, ruleEngine: RuleEngine
    ) -> SummaryTracker.Contribution {
        var people: Int32 = 0
        var capacity: Int32?
        if let index = headcount, !values[index].stale {
            people = values[index].properties[BuiltInDomain.people].flatMap { Int32($0) } ?? 0
            capacity = values[index].properties[BuiltInDomain.capacity].flatMap { Int32($0) }
        }
        // Without a catalog, no id is looked up (nor made into a string).
        let catalog = ruleEngine.ruleSet.catalog
        let total = capacity ?? (catalog.isEmpty ? nil : catalog[address.location]?.capacity.map { Int32(clamping: $0) }) ?? 0
        return .init(state: legendState ?? -1, people: people, capacity: total)
    }

    /// Summaries due for publishing (see ``SummaryTracker/takeDue(now:all:)``).
    public func takeDueSummaries(now: LiveTimestamp, all: Bool = false) -> [SummaryTracker.Summary] {
        summaries.takeDue(now: now, all: all)
    }
}

extension LiveTimestamp {
    /// This time plus a duration.
    public func adding(_ duration: Duration) -> LiveTimestamp {
        adding(milliseconds: duration.milliseconds)
    }

    /// This time plus some milliseconds.
    func adding(milliseconds: Int64) -> LiveTimestamp {
        LiveTimestamp(millisecondsSince1970: millisecondsSince1970 + milliseconds)
    }
}
