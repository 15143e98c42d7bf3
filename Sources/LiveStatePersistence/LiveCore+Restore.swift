import LiveState
import LiveTopics

/// What a start read from the state file.
public struct RestoredState {
    public var count = 0
    /// Records that could not be decoded, skipped.
    public var unreadable = 0
    /// Styles that changed while the daemon was down (staleness, other rules).
    public var changed = 0
    /// Stored locations the restore left out (outside the partition it keeps), their rows
    /// deleted by the next snapshot.
    public var dropped = 0
    /// The intake journal position the snapshot covers: replay starts there.
    public var journalPosition: UInt64 = 0
    /// Whether the stored styles were derived with the current rules.
    public var sameRules = true
    /// The retained checkpoint the last stop published once the broker had acknowledged
    /// every publication before it, if the last stop was clean. Taken out of the file as it
    /// is read: a run that does not stop cleanly leaves none.
    public var checkpoint: String?
    /// How many rows opening the file moved from the first layout of the state file (rows
    /// keyed by address) to numbered rows, if it had that layout.
    public var migrated: Int?

    public init() {}
}

extension LiveCore {
    /// Restores every location stored in the state file at `path`, then catches up on
    /// staleness and, when the rules differ from the ones the stored styles were derived
    /// with, re-derives everything.
    /// - Throws: ``StateDatabase/Failure`` when the file cannot be opened or read.
    public func restore(fromFile path: String, now: LiveTimestamp) throws -> RestoredState {
        var restored = try restore(fromFile: path)
        finishRestore(&restored, now: now)
        return restored
    }

    /// Restores every location stored in the state file at `path` (read on a second thread
    /// while this one fills the store), without catching up: a start replays the journal's
    /// tail first, then calls ``finishRestore(_:now:)`` once, so that a location the journal
    /// updates is not expired and derived again for nothing.
    /// `progress` is told the locations read so far and how many the file holds (its highest
    /// row, ``StateDatabase/highestRow()``: a file whose rows have gaps ends below it), after
    /// each batch.
    /// `keeping`, when given, says which stored locations to put back (those of the
    /// daemon's partition); the others are left out and counted in ``RestoredState/dropped``.
    /// Once `shouldStop` says so, the rest of the file is left unread: the store then holds
    /// part of it, and the caller gives the start up.
    /// - Throws: ``StateDatabase/Failure`` when the file cannot be opened or read.
    public func restore(
        fromFile path: String, progress: (_ done: Int, _ total: Int) -> Void = { _, _ in },
        keeping: ((LocationAddress) -> Bool)? = nil, shouldStop: @escaping @Sendable () -> Bool = { false }
    ) throws -> RestoredState {
        let database = try StateDatabase(path: path)
        var restored = RestoredState()
        restored.migrated = database.migrated
        restored.journalPosition = try database.journalPosition()
        if let checkpoint = try database.meta(StateDatabase.checkpointKey), !checkpoint.isEmpty {
            restored.checkpoint = checkpoint
            try database.setMeta(StateDatabase.checkpointKey, "")
        }
        let ruleEngine = store.ruleEngine
        let fingerprint = ruleEngine.fingerprint
        let sameRules = try database.meta("rules") == fingerprint
        let total = try database.highestRow()
        store.reserveCapacity(total)
        progress(0, total)
        var count = 0
        var dropped = 0
        let unreadable = try StateDatabase.readAll(
            path: path,
            preparing: {
                var cache = RecordCodec.PreparationCache()
                return { row, bytes in try RecordCodec.prepare(bytes, row: row, ruleEngine: ruleEngine, sameRules: sameRules, cache: &cache) }
            }, shouldStop: shouldStop
        ) { batch in
            let size = batch.count
            // Each location moved out of the batch into the store, with what finding it
            // reads asked for a few locations ahead (its slot in the table, and its path:
            // memory the reading thread wrote, in another core's cache).
            batch.moveAll { locations in
                guard let first = locations.baseAddress else { return }
                for index in locations.indices {
                    // The prepared location itself further ahead: its hash and its parts'
                    // addresses are read there.
                    if index + 2 * Self.restoreLookahead < locations.count {
                        store.prefetchPrepared(first + index + 2 * Self.restoreLookahead)
                    }
                    if index + Self.restoreLookahead < locations.count { store.prefetch(first + index + Self.restoreLookahead) }
                    let location = locations.moveElement(from: index)
                    if let keeping, !keeping(location.address) {
                        store.drop(location)
                        dropped += 1
                        continue
                    }
                    store.restore(location, preparedUnder: ruleEngine)
                }
            }
            count += size
            progress(count, total)
        }
        try database.setMeta("rules", fingerprint)
        restored.sameRules = sameRules
        restored.count = count - dropped
        restored.dropped = dropped
        restored.unreadable = unreadable
        return restored
    }

    /// How many locations ahead a restore asks for the memory it will read.
    static let restoreLookahead = 8

    /// Catches up on staleness at `now` and, when the rules differ from the stored styles'
    /// ones, re-derives everything: how many styles changed goes into `restored.changed`.
    public func finishRestore(_ restored: inout RestoredState, now: LiveTimestamp) {
        restored.changed = catchUp(now: now, sameRules: restored.sameRules)
    }
}

extension IntakeJournal {
    /// Replays the records from `position` on in place, in batches whose locations `core`
    /// prefetches together (``LiveCore/prefetch(_:topicBytes:)``) before `body` sees each
    /// record of the batch: the way a start brings a core up to date.
    @discardableResult
    public func replay(
        from position: UInt64, prefetchingFor core: LiveCore, _ body: (RecordView) throws -> Void
    ) throws -> ReplayStatistics {
        try replayInPlace(from: position) { batch in
            core.prefetch(batch.count) { batch[$0].topic }
            for record in batch { try body(record) }
        }
    }
}
