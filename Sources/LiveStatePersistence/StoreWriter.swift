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

    /// Writes a batch in one transaction; a failure is logged and the batch kept for the next try.
    /// - Returns: whether it was written.
    @discardableResult
    public func write(_ records: [LocationRecord], deleting vacated: [LocationAddress] = []) -> Bool {
        do {
            try database.write(records, deleting: vacated)
            written += records.count
            return true
        } catch {
            logger.error("\(error)", metadata: ["store.path": "\(database.path)"])
            return false
        }
    }
}
