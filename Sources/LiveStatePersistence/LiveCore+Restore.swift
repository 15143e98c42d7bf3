import LiveState
import LiveTopics

/// What a start read from the state file.
public struct RestoredState {
    public var count = 0
    /// Records that could not be decoded, skipped.
    public var unreadable = 0
    /// Styles that changed while the daemon was down (staleness, other rules).
    public var changes: [DerivedChange] = []
    /// The intake journal position the snapshot covers: replay starts there.
    public var journalPosition: UInt64 = 0

    public init() {}
}

extension LiveCore {
    /// Restores every location stored in the state file at `path` (read on a second thread
    /// while this one fills the store), then catches up on staleness and, when the rules
    /// differ from the ones the stored styles were derived with, re-derives everything.
    /// - Throws: ``StateDatabase/Failure`` when the file cannot be opened or read.
    public func restore(fromFile path: String, now: LiveTimestamp) throws -> RestoredState {
        let database = try StateDatabase(path: path)
        var restored = RestoredState()
        restored.journalPosition = try database.journalPosition()
        let ruleEngine = store.ruleEngine
        let fingerprint = ruleEngine.fingerprint
        let sameRules = try database.meta("rules") == fingerprint
        store.reserveCapacity(try database.countRows())
        var count = 0
        let unreadable = try StateDatabase.readAll(path: path, preparing: {
            LiveStore.prepare($0, ruleEngine: ruleEngine, sameRules: sameRules)
        }) { batch in
            for location in batch { store.restore(location) }
            count += batch.count
        }
        restored.changes = catchUp(now: now, sameRules: sameRules)
        try database.setMeta("rules", fingerprint)
        restored.count = count
        restored.unreadable = unreadable
        return restored
    }
}
