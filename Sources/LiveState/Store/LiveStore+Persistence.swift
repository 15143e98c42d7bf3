import CPrefetch
import DisplayRules
import LiveTopics

/// What persistence reads from the store and puts back into it.
extension LiveStore {
    /// The records of the locations changed since the last call, with their rows.
    public func takeDirty() -> [LocationRow] {
        let changed = takeChangedLocations()
        return records(changed, in: 0..<changed.count)
    }

    /// The locations changed since the last call, for the write-behind writer to make
    /// records of a part at a time (``records(_:in:)``): after a fill of a million
    /// locations, not a million records at once. A location that changes again before its
    /// part is written is taken again by the next call.
    ///
    /// In the order of their rows in the state file, so that consecutive parts write
    /// consecutive rows: no page of the table is written by two parts of one snapshot
    /// (each transaction copies every page it touches into the write-ahead log), however
    /// small the parts. A fill's locations are in that order already (rows are numbered
    /// as locations come), which the sort sees in one pass. When every location is to be
    /// written (``allDirty``), they are taken as the location table holds them, in the
    /// order they came, by position: nothing is listed.
    public func takeChangedLocations() -> ChangedLocations {
        if allDirty {
            allDirty = false
            return ChangedLocations(listed: nil, count: locations.count)
        }
        for state in dirty { state.dirty = false }
        defer { dirty = [] }
        dirty.sort { $0.row < $1.row }
        return ChangedLocations(listed: dirty, count: dirty.count)
    }

    /// Locations taken by ``takeChangedLocations()``: a list of them, or (`listed` nil) the
    /// first `count` of the location table, which only grows.
    public struct ChangedLocations {
        fileprivate let listed: [LocationState]?
        public let count: Int
    }

    /// Calls `body` with each of `changed[range]`.
    private func forEachState(_ changed: ChangedLocations, in range: Range<Int>, _ body: (LocationState) -> Void) {
        if let listed = changed.listed {
            for state in listed[range] { body(state) }
        } else {
            for index in range { body(locations.locations[index]) }
        }
    }

    /// Calls `body` with the parts of the record of each of some of the changed locations,
    /// as they are now, with its row: what ``records(_:in:)`` gives, read from the locations
    /// in place (a snapshot encodes them at once; no record is built or copied).
    package func forEachRecord(
        _ changed: ChangedLocations, in range: Range<Int>,
        _ body: (_ row: Int64, _ address: LocationAddress, _ values: [DomainValue], _ published: RecordStyle, _ version: UInt64) -> Void
    ) {
        let ruleEngine = self.ruleEngine
        forEachState(changed, in: range) { state in
            body(Int64(state.row), state.address, state.values, state.recordStyle(ruleEngine), state.version)
        }
    }

    /// The records of some of the changed locations, as they are now, with their rows.
    public func records(_ changed: ChangedLocations, in range: Range<Int>) -> [LocationRow] {
        var records: [LocationRow] = []
        records.reserveCapacity(range.count)
        forEachState(changed, in: range) { records.append(LocationRow(row: Int64($0.row), record: $0.record(ruleEngine))) }
        return records
    }

    /// Marks some of the changed locations for writing again (their write failed).
    public func markDirty(_ changed: ChangedLocations, in range: Range<Int>) {
        forEachState(changed, in: range) { markDirty($0) }
    }

    /// Forgets which locations changed, when nothing is written (an in-memory store).
    public func discardDirty() {
        for state in dirty { state.dirty = false }
        dirty.removeAll(keepingCapacity: true)
        allDirty = false
    }

    /// Puts back persisted locations: values, last published style and version. Staleness is
    /// rescheduled; call ``expire(now:)`` and ``rederiveAll(now:)`` after it to catch up.
    public func restore(_ restored: [LocationRecord]) {
        locations.reserveCapacity(locations.count + restored.count)
        for record in restored { restore(record) }
    }

    /// Puts back one persisted location (see ``restore(_:)-([LocationRecord])``); `row`: its
    /// row in the state file (0: it gets a new one).
    public func restore(_ record: LocationRecord, row: Int64 = 0) {
        restore(Self.prepare(LocationRow(row: row, record: record), ruleEngine: ruleEngine, sameRules: false), preparedUnder: ruleEngine)
    }

    /// A persisted location made ready to put back: what can be worked out without the
    /// store (its key, its published style as the rules tell it, what it adds to its
    /// summaries) is, so that a restore can do that on the thread that reads the file.
    ///
    /// It holds the record's parts but not its published style, which `published` stands for:
    /// a record holds a style inline (hundreds of bytes, a reference per text). Nor does it
    /// hold the rules it was prepared under: one object's count of references, changed by
    /// the thread that prepares and the one that restores, a million times, is a line of
    /// memory going back and forth between their cores.
    package struct PreparedLocation: Sendable {
        package let address: LocationAddress
        let values: [DomainValue]
        let version: UInt64
        /// Its row in the state file (0: none yet).
        let row: Int64
        /// Its identity's hash in the location table.
        let hash: UInt64
        let published: PublishedStyle
        let contribution: SummaryTracker.Contribution
        /// The rules whose criteria leave it out (``RuleEngine/outOfScope(_:)``).
        let outOfScope: RuleSelection
    }

    /// Prepares a persisted location for ``restore(_:)-(PreparedLocation)`` under `ruleEngine`
    /// (the store's); safe on any thread. `sameRules`: the record was written under these
    /// very rules (equal fingerprints), so its style need not be checked against them.
    package static func prepare(_ row: LocationRow, ruleEngine: RuleEngine, sameRules: Bool) -> PreparedLocation {
        let record = row.record
        return prepare(
            address: record.address, values: record.values, version: record.version, row: row.row,
            published: PublishedStyle(record.published, at: record.address, ruleEngine: ruleEngine, trusted: sameRules),
            ruleEngine: ruleEngine)
    }

    /// Prepares a persisted location from its parts, its published style already what the
    /// store keeps of it (a restore that reads the state file straight into this form).
    package static func prepare(
        address: consuming LocationAddress, values: consuming [DomainValue], version: UInt64, row: Int64,
        published: consuming PublishedStyle, ruleEngine: RuleEngine
    ) -> PreparedLocation {
        let selection: RuleSelection? = switch published {
        case .none: nil
        case .key(let key): key.selection
        case .foreign(let foreign): foreign.selection
        }
        let contribution = contribution(
            address, legendState: selection.flatMap { ruleEngine.legendStateID($0) }, values: values,
            headcount: values.withUnsafeBufferPointer {
                LiveValues.index(ofDomain: BuiltInDomain.headcount.rawValue, in: $0, tags: nil)
            },
            ruleEngine: ruleEngine)
        let outOfScope = ruleEngine.outOfScope(address)
        let hash = LocationTable.hash(address)
        return PreparedLocation(
            address: address, values: values, version: version, row: row, hash: hash, published: published,
            contribution: contribution, outOfScope: outOfScope)
    }

    /// Starts loading what restoring a prepared location first reads and writes: its slot in
    /// the table of locations, and its path's and values' storage, whose counts of references
    /// the store changes as it keeps them, and which the thread that prepared it wrote last
    /// (lines of memory in the other core's cache). Read where it lies, not copied, and no
    /// reference taken: taking one is the very write that would wait for the line.
    package func prefetch(_ prepared: UnsafePointer<PreparedLocation>) {
        locations.prefetch(hash: prepared.pointee.hash)
        // The path's storage and the values' buffer, their addresses read as words where
        // they lie: reading the properties themselves copied them (a retain and a release
        // of each, on the other thread's objects).
        let raw = UnsafeRawPointer(prepared)
        livedata_prefetch_for_writing(Self.storageHint(stringAt: raw + Self.pathOffset))
        livedata_prefetch_for_writing(UnsafeRawPointer(bitPattern: raw.load(fromByteOffset: Self.valuesOffset, as: UInt.self)))
    }

    /// Where a prepared location's path (a `String`: its two words) and its values (an
    /// array: one word, its buffer's address) lie in it.
    private static let pathOffset = MemoryLayout<PreparedLocation>.offset(of: \PreparedLocation.address)!
        + MemoryLayout<LocationAddress>.offset(of: \LocationAddress.path)!
    private static let valuesOffset = MemoryLayout<PreparedLocation>.offset(of: \PreparedLocation.values)!

    /// Starts loading a prepared location itself, further ahead than ``prefetch(_:)`` reads
    /// it: the thread that prepared it wrote it last, so its lines are in the other core's
    /// cache, and reading its hash and its parts' addresses there would wait for them.
    package func prefetchPrepared(_ prepared: UnsafePointer<PreparedLocation>) {
        let bytes = UnsafeRawPointer(prepared)
        for offset in stride(from: 0, to: MemoryLayout<PreparedLocation>.stride, by: 64) { livedata_prefetch(bytes + offset) }
    }

    /// Leaves out a stored location a restore does not keep (one outside the daemon's
    /// partition): its row goes with the next snapshot, and is never given to another.
    package func drop(_ prepared: consuming PreparedLocation) {
        guard prepared.row > 0 else { return }
        vacated.append(prepared.row)
        nextRow = max(nextRow, prepared.row + 1)
    }

    /// Puts back one location prepared under `engine` (see ``restore(_:)-([LocationRecord])``).
    /// Taken, not copied: a new location keeps its parts as they are (a copy would retain
    /// each of its references, and its end release them, a million times in a restore).
    package func restore(_ prepared: consuming PreparedLocation, preparedUnder engine: RuleEngine) {
        guard engine === ruleEngine else {
            // Prepared under rules the store no longer has: prepared again under these.
            let published: DerivedStyle? = switch prepared.published {
            case .none: nil
            case .key(let key): engine.derivedStyle(key, at: prepared.address)
            case .foreign(let foreign): foreign.derived
            }
            let record = LocationRecord(address: prepared.address, values: prepared.values, published: published, version: prepared.version)
            return restore(record, row: prepared.row)
        }
        let state: LocationState
        // The table finds the location by its identity, wherever it is placed: one lookup.
        if let existing = prepared.address.withPathBytes({ locations.find($0, hash: prepared.hash) }) {
            let samePlacement = existing.address.path == prepared.address.path
            var version = prepared.version
            if !samePlacement {
                // Two stored placements of one location (a file written before locations
                // moved): the one with the newer values stays, the other's row and style go.
                version = max(version, existing.version)
                guard Self.newest(prepared.values) > Self.newest(existing.values) else {
                    existing.version = version
                    if prepared.row > 0 && prepared.row != Int64(existing.row) { vacated.append(prepared.row) }
                    staleStyleAddresses.append(prepared.address)
                    return
                }
                staleStyleAddresses.append(existing.address)
                move(existing, to: prepared.address, counted: false)
            }
            state = existing
            state.setValues(prepared.values)
            state.setPublished(prepared.published, keys: &styleKeys)
            state.version = version
            if prepared.row > 0 && prepared.row != Int64(existing.row) {
                // The location stays in its first row, which now takes these values.
                vacated.append(prepared.row)
                markDirty(state)
            }
        } else {
            state = insert(
                prepared.address, values: prepared.values, version: prepared.version, hash: prepared.hash, published: prepared.published,
                row: prepared.row)
        }
        state.outOfScope = outOfScopeSelections.number(of: prepared.outOfScope)
        scheduleAll(state)
        summaries.update(state, prepared.contribution)
    }

    /// The newest timestamp among some values.
    private static func newest(_ values: [DomainValue]) -> Int64 {
        values.lazy.map(\.timestamp.millisecondsSince1970).max() ?? .min
    }

    /// Rows no location holds any more, for persistence to delete (and forget).
    public func takeVacated() -> [Int64] {
        defer { vacated.removeAll() }
        return vacated
    }

    /// Puts back rows whose deletion failed, for the next write.
    public func returnVacated(_ rows: [Int64]) {
        vacated.insert(contentsOf: rows, at: 0)
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
