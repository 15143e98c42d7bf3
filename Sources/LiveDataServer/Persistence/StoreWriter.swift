import LiveState
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

    /// Every stored location.
    public func restore() throws -> [LocationRecord] {
        let (records, unreadable) = try database.readAll()
        if unreadable > 0 {
            logger.warning("skipped \(unreadable) stored locations that could not be read", metadata: ["store.path": "\(database.path)"])
        }
        return records
    }

    /// Writes a batch in one transaction; a failure is logged and the batch kept for the next try.
    /// - Returns: whether it was written.
    @discardableResult
    public func write(_ records: [LocationRecord]) -> Bool {
        do {
            try database.write(records)
            written += records.count
            return true
        } catch {
            logger.error("\(error)", metadata: ["store.path": "\(database.path)"])
            return false
        }
    }
}
