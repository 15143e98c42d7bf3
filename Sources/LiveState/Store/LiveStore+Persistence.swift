import DisplayRules
import LiveTopics

/// What persistence reads from the store and puts back into it.
extension LiveStore {
    /// The records of the locations changed since the last call.
    public func takeDirty() -> [LocationRecord] {
        let changed = takeChangedLocations()
        return records(changed, in: 0..<changed.count)
    }

    /// The locations changed since the last call, for the write-behind writer to make
    /// records of a part at a time (``records(_:in:)``): after a fill of a million
    /// locations, not a million records at once. A location that changes again before its
    /// part is written is taken again by the next call.
    public func takeChangedLocations() -> ChangedLocations {
        for state in dirty { state.dirty = false }
        defer { dirty = [] }
        return ChangedLocations(states: dirty)
    }

    /// Locations taken by ``takeChangedLocations()``.
    public struct ChangedLocations {
        fileprivate let states: [LocationState]
        public var count: Int { states.count }
    }

    /// The records of some of the changed locations, as they are now.
    public func records(_ changed: ChangedLocations, in range: Range<Int>) -> [LocationRecord] {
        changed.states[range].map { $0.record(ruleEngine) }
    }

    /// Marks some of the changed locations for writing again (their write failed).
    public func markDirty(_ changed: ChangedLocations, in range: Range<Int>) {
        for state in changed.states[range] { markDirty(state) }
    }

    /// Forgets which locations changed, when nothing is written (an in-memory store).
    public func discardDirty() {
        for state in dirty { state.dirty = false }
        dirty.removeAll(keepingCapacity: true)
    }

    /// Whether changes wait to be written.
    public var hasDirty: Bool { !dirty.isEmpty }

    /// Puts back persisted locations: values, last published style and version. Staleness is
    /// rescheduled; call ``expire(now:)`` and ``rederiveAll(now:)`` after it to catch up.
    public func restore(_ restored: [LocationRecord]) {
        locations.reserveCapacity(locations.count + restored.count)
        for record in restored { restore(record) }
    }

    /// Puts back one persisted location (see ``restore(_:)-([LocationRecord])``).
    public func restore(_ record: LocationRecord) {
        restore(Self.prepare(record, ruleEngine: ruleEngine, sameRules: false))
    }

    /// A persisted location made ready to put back: what can be worked out without the
    /// store (its key, its published style as the rules tell it, what it adds to its
    /// summaries) is, so that a restore can do that on the thread that reads the file.
    package struct PreparedLocation: Sendable {
        let record: LocationRecord
        /// Its identity's hash in the location table.
        let hash: UInt64
        let ruleEngine: RuleEngine
        let published: PublishedStyle
        let contribution: SummaryTracker.Contribution
        /// The rules whose criteria leave it out (``RuleEngine/outOfScope(_:)``).
        let outOfScope: RuleSelection
    }

    /// Prepares a persisted location for ``restore(_:)-(PreparedLocation)`` under `ruleEngine`
    /// (the store's); safe on any thread. `sameRules`: the record was written under these
    /// very rules (equal fingerprints), so its style need not be checked against them.
    package static func prepare(_ record: LocationRecord, ruleEngine: RuleEngine, sameRules: Bool) -> PreparedLocation {
        let published = PublishedStyle(record.published, at: record.address, ruleEngine: ruleEngine, trusted: sameRules)
        let selection: RuleSelection? = switch published {
        case .none: nil
        case .key(let key): key.selection
        case .foreign(let foreign): foreign.selection
        }
        return PreparedLocation(
            record: record, hash: LocationTable.hash(record.address),
            ruleEngine: ruleEngine, published: published,
            contribution: contribution(
                record.address, legendState: selection.flatMap { ruleEngine.legendStateID($0) }, values: record.values,
                headcount: record.values.withUnsafeBufferPointer {
                    LiveValues.index(ofDomain: BuiltInDomain.headcount.rawValue, in: $0, tags: nil)
                },
                ruleEngine: ruleEngine),
            outOfScope: ruleEngine.outOfScope(record.address))
    }

    /// Puts back one prepared location (see ``restore(_:)-([LocationRecord])``).
    package func restore(_ prepared: PreparedLocation) {
        guard prepared.ruleEngine === ruleEngine else {
            // Prepared under rules the store no longer has.
            return restore(prepared.record)
        }
        let record = prepared.record
        let state: LocationState
        // The table finds the location by its identity, wherever it is placed: one lookup.
        if let existing = record.address.withPathBytes({ locations.find($0, hash: prepared.hash) }) {
            let samePlacement = existing.address.path == record.address.path
            var version = record.version
            if !samePlacement {
                // Two stored placements of one location (a file written before locations
                // moved): the one with the newer values stays, the other's row and style go.
                version = max(version, existing.version)
                guard Self.newest(record.values) > Self.newest(existing.values) else {
                    existing.version = version
                    vacated.append(record.address)
                    staleStyleAddresses.append(record.address)
                    return
                }
                staleStyleAddresses.append(existing.address)
                move(existing, to: record.address, counted: false)
            }
            state = existing
            state.setValues(record.values)
            state.setPublished(prepared.published, keys: &styleKeys)
            state.version = version
        } else {
            state = insert(record, hash: prepared.hash, published: prepared.published)
        }
        state.outOfScope = outOfScopeSelections.number(of: prepared.outOfScope)
        scheduleAll(state)
        summaries.update(state, prepared.contribution)
    }

    /// The newest timestamp among some values.
    private static func newest(_ values: [DomainValue]) -> Int64 {
        values.lazy.map(\.timestamp.millisecondsSince1970).max() ?? .min
    }

    /// Addresses no location holds any more, for persistence to delete (and forget).
    public func takeVacated() -> [LocationAddress] {
        defer { vacated.removeAll() }
        return vacated
    }

    /// Puts back addresses whose deletion failed, for the next write.
    public func returnVacated(_ addresses: [LocationAddress]) {
        vacated.insert(contentsOf: addresses, at: 0)
    }

    /// Style topics to clear that no derived change clears: the placements dropped when a
    /// restore found one location stored at two (a derived change clears the old topic of a
    /// location that moves as it runs, see ``DerivedChange/movedFrom``).
    public func takeStaleStyleAddresses() -> [LocationAddress] {
        defer { staleStyleAddresses.removeAll() }
        return staleStyleAddresses
    }

    /// Makes room for this many locations.
    public func reserveCapacity(_ count: Int) {
        locations.reserveCapacity(count)
    }
}
