import LiveState
import LiveTopics

extension LiveCore {
    /// Restores every location stored in the state file at `path` (read on a second thread
    /// while this one fills the store), then catches up on staleness and, when the rules
    /// differ from the ones the stored styles were derived with, re-derives everything.
    /// - Returns: how many were restored, how many records could not be read (skipped), and
    ///   the changes to publish.
    /// - Throws: ``StateDatabase/Failure`` when the file cannot be opened or read.
    public func restore(fromFile path: String, now: LiveTimestamp) throws -> (count: Int, unreadable: Int, changes: [DerivedChange]) {
        let database = try StateDatabase(path: path)
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
        let changes = catchUp(now: now, sameRules: sameRules)
        try database.setMeta("rules", fingerprint)
        return (count, unreadable, changes)
    }
}
