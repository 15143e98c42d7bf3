import CSQLite

/// The retained topics (styles, summaries) the daemon cleared and has not published since:
/// what a bridge to a central broker may have lost while its link was down, to be cleared
/// there again when it comes back. Kept in the state file so that a restart forgets none.
///
/// One row per topic, keyed by it (a topic cleared again keeps its latest time), no row
/// number: the table is read in topic order, a batch at a time, and pruned by age.
extension StateDatabase {
    func createClearedTopicsTable() throws(Failure) {
        try execute(
            "CREATE TABLE IF NOT EXISTS cleared_topics (topic TEXT PRIMARY KEY, cleared_at INTEGER NOT NULL) WITHOUT ROWID")
    }

    /// Records topics as cleared, each at its time (milliseconds since 1970), in one
    /// transaction; a topic recorded already keeps the later of its two times.
    /// - Throws: ``Failure``; the transaction is rolled back.
    public func recordCleared(_ topics: [String: Int64]) throws(Failure) {
        guard !topics.isEmpty else { return }
        try inTransaction { () throws(Failure) in try insertCleared(topics) }
    }

    /// Records topics as cleared within the caller's transaction.
    func insertCleared(_ topics: [String: Int64]) throws(Failure) {
        guard !topics.isEmpty else { return }
        let statement = try prepare(
            "INSERT INTO cleared_topics (topic, cleared_at) VALUES (?1, ?2) ON CONFLICT (topic) DO UPDATE SET cleared_at = max(cleared_at, excluded.cleared_at)"
        )
        defer { sqlite3_finalize(statement) }
        for (topic, time) in topics {
            sqlite3_reset(statement)
            sqlite3_bind_text(statement, 1, topic, -1, transient)
            sqlite3_bind_int64(statement, 2, time)
            guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("recording the cleared topic \(topic)") }
        }
    }

    /// Forgets these topics (a style was published there again, or the topic is no longer
    /// this daemon's), in one transaction.
    /// - Throws: ``Failure``; the transaction is rolled back.
    public func forgetCleared(_ topics: [String]) throws(Failure) {
        guard !topics.isEmpty else { return }
        let statement = try prepare("DELETE FROM cleared_topics WHERE topic = ?1")
        defer { sqlite3_finalize(statement) }
        try inTransaction { () throws(Failure) in
            for topic in topics {
                sqlite3_reset(statement)
                sqlite3_bind_text(statement, 1, topic, -1, transient)
                guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("forgetting the cleared topic \(topic)") }
            }
        }
    }

    /// Forgets the topics cleared before `time` (milliseconds since 1970).
    /// - Returns: how many.
    /// - Throws: ``Failure``.
    @discardableResult
    public func forgetCleared(before time: Int64) throws(Failure) -> Int {
        let statement = try prepare("DELETE FROM cleared_topics WHERE cleared_at < ?1")
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_int64(statement, 1, time)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("forgetting the topics cleared before \(time)") }
        return Int(sqlite3_changes64(sqlite3_db_handle(statement)))
    }

    /// At most `limit` recorded topics that come after `topic` (from the first with `nil`),
    /// in topic order: a walk of the table a batch at a time, with no statement left open
    /// between batches (the table may be written meanwhile).
    /// - Throws: ``Failure``.
    public func clearedTopics(after topic: String?, limit: Int) throws(Failure) -> [String] {
        let statement = try prepare("SELECT topic FROM cleared_topics WHERE topic > ?1 ORDER BY topic LIMIT ?2")
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_text(statement, 1, topic ?? "", -1, transient)
        sqlite3_bind_int64(statement, 2, Int64(limit))
        var topics: [String] = []
        topics.reserveCapacity(limit)
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { throw failure("reading the cleared topics") }
            topics.append(String(cString: text))
        }
        return topics
    }

    /// How many topics are recorded (a walk of the table).
    /// - Throws: ``Failure``.
    public func countCleared() throws(Failure) -> Int {
        let statement = try prepare("SELECT count(*) FROM cleared_topics")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw failure("counting the cleared topics") }
        return Int(sqlite3_column_int64(statement, 0))
    }

    private func inTransaction(_ body: () throws(Failure) -> Void) throws(Failure) {
        try execute("BEGIN")
        do throws(Failure) {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}
