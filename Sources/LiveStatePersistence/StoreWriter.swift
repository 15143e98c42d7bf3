import LiveState
import LiveTopics
import Logging

/// Writes changed locations to the SQLite file behind the pipeline, in batches, and reads
/// them back at start. An actor: the database has one owner.
public actor StoreWriter {
    private let database: StateDatabase
    private let logger: Logger
    public private(set) var written = 0

    /// Opens the file.
    /// - Throws: ``StateDatabase/Failure``.
    public init(path: String, logger: Logger) throws {
        database = try StateDatabase(path: path)
        self.logger = logger
    }

    /// Records the fingerprint of the rules the stored styles now follow.
    public func setRulesFingerprint(_ fingerprint: String) {
        do {
            try database.setMeta("rules", fingerprint)
        } catch {
            logger.error("\(error)", metadata: ["store.path": "\(database.path)"])
        }
    }

    /// Records the checkpoint a clean stop left at the broker (see `RestoredState.checkpoint`).
    public func setCheckpoint(_ payload: String) {
        do {
            try database.setMeta(StateDatabase.checkpointKey, payload)
        } catch {
            logger.error("\(error)", metadata: ["store.path": "\(database.path)"])
        }
    }

    /// Writes a batch in one transaction, with the topics cleared up to the state it holds
    /// and the journal position the snapshot then covers; the journal's segments before it
    /// are deleted.
    /// - Returns: `nil` when written, or the failure (the caller keeps the batch for the next try).
    @discardableResult
    public func write(
        _ records: EncodedRecords, deleting vacated: [Int64] = [], cleared: [String: Int64] = [:],
        journalPosition: UInt64? = nil, journal: IntakeJournal? = nil
    ) -> StateDatabase.Failure? {
        do {
            try database.write(records, deleting: vacated, cleared: cleared, journalPosition: journalPosition)
            written += records.count
            if let journal, let journalPosition { journal.covered(through: journalPosition) }
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Cleared topics (see `StateDatabase+ClearedTopics`)

    /// Records topics as cleared, each at its time (milliseconds since 1970).
    /// - Returns: `nil` when written, or the failure (the caller keeps them for the next try).
    public func recordCleared(_ topics: [String: Int64]) -> StateDatabase.Failure? {
        do {
            try database.recordCleared(topics)
            return nil
        } catch {
            return error
        }
    }

    /// Forgets these cleared topics, and those cleared before `before` when given.
    /// - Returns: how many were cleared before `before`, or the failure.
    public func forgetCleared(_ topics: [String], before: Int64? = nil) -> Result<Int, StateDatabase.Failure> {
        do {
            try database.forgetCleared(topics)
            guard let before else { return .success(0) }
            return .success(try database.forgetCleared(before: before))
        } catch {
            return .failure(error)
        }
    }

    /// At most `limit` cleared topics after `topic`, in topic order.
    public func clearedTopics(after topic: String?, limit: Int) -> Result<[String], StateDatabase.Failure> {
        do {
            return .success(try database.clearedTopics(after: topic, limit: limit))
        } catch {
            return .failure(error)
        }
    }
}
