import CSQLite
import Foundation
import LiveState
import LiveTopics

/// The SQLite file behind the store: one row per location, its record in a compact binary
/// form. Written in batches (write-behind), read once at start.
///
/// A location's row is a number the store gives it when it first sees the location, in
/// order of arrival, and keeps as the location moves (``LocationRow``). New locations append
/// to the table's last page, and a move rewrites its row in place: a snapshot after a fill
/// of a million new locations writes about one page per 30 of them, where rows keyed by
/// their address landed all over the table and rewrote a page each. Files of the first
/// layout (rows keyed by address) are migrated when opened.
///
/// Not thread-safe: one owner (the store writer) uses it.
public final class StateDatabase {
    /// A failed SQLite call, with the statement or function and SQLite's message.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var operation: String
        public var message: String
        /// SQLite's result code, when SQLite gave one.
        public var code: Int32 = 0
        public var description: String { "state database: \(operation) failed: \(message)" }

        /// The file is there but is not an SQLite database (SQLITE_NOTADB), or is damaged
        /// past reading (SQLITE_CORRUPT): no restart will read it.
        public var isUnreadableFile: Bool { code == SQLITE_NOTADB || code == SQLITE_CORRUPT }
    }

    public let path: String
    private var db: OpaquePointer?
    private var upsert: OpaquePointer?
    /// ``upsert`` for ``rowsAtOnce`` rows (see ``write(_:deleting:cleared:journalPosition:)``).
    private var upsertMany: OpaquePointer?
    private var delete: OpaquePointer?

    /// How many rows one statement writes in a snapshot. Each step of a statement starts
    /// its program again and each reset tears it down: at one row a statement, SQLite's part
    /// of a new location's write was about 4,000 instructions, at 32 about 2,800.
    static let rowsAtOnce = 32

    /// Opens (creating if needed) the file and its folder.
    /// - Throws: ``Failure`` naming what failed.
    public init(path: String) throws(Failure) {
        self.path = path
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw Failure(operation: "creating the folder \(directory)", message: "\(error)")
            }
        }
        _ = Self.libraryConfigured
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &db, flags, nil)
        guard code == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "code \(code)"
            sqlite3_close(db)
            db = nil
            throw Failure(operation: "opening \(path)", message: message)
        }
        // Another connection (the writer's, a reader at start, an operator's sqlite3) may hold
        // a lock for a moment: wait for it rather than fail.
        sqlite3_busy_timeout(db, 5_000)
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=NORMAL")
        // Debian's SQLite zeroes the space a replaced row leaves (SECURE_DELETE): the file
        // holds nothing a rewrite should scrub, and each rewritten location would cost a
        // page's worth of clearing.
        try execute("PRAGMA secure_delete=OFF")
        try execute("CREATE TABLE IF NOT EXISTS location_rows (row INTEGER PRIMARY KEY, record BLOB NOT NULL)")
        try execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        try createClearedTopicsTable()
        migrated = try migrateAddressKeyedRows()
        upsert = try prepare("INSERT OR REPLACE INTO location_rows (row, record) VALUES (?1, ?2)")
        let values = (0..<Self.rowsAtOnce).map { "(?\(2 * $0 + 1), ?\(2 * $0 + 2))" }.joined(separator: ", ")
        upsertMany = try prepare("INSERT OR REPLACE INTO location_rows (row, record) VALUES \(values)")
        delete = try prepare("DELETE FROM location_rows WHERE row = ?1")
    }

    /// Set once, before the first connection: SQLite's count of its memory off (see
    /// `livedata_sqlite_memory_count_off`). The daemon never asks SQLite how much it holds.
    private static let libraryConfigured: Bool = livedata_sqlite_memory_count_off() == SQLITE_OK

    /// How many rows opening the file moved from the first layout (rows keyed by address)
    /// to numbered rows; `nil` when the file had the current layout.
    public private(set) var migrated: Int?

    /// Moves the rows of a file of the first layout to numbered rows (in address order, the
    /// order they were stored in) and drops the old table, in one transaction: a stop
    /// halfway leaves the file as it was.
    private func migrateAddressKeyedRows() throws(Failure) -> Int? {
        guard try hasAddressKeyedTable() else { return nil }
        // Another connection (the reader at start) may be migrating too: the one that takes
        // the write lock first does it, the other finds it done.
        try execute("BEGIN IMMEDIATE")
        do throws(Failure) {
            guard try hasAddressKeyedTable() else {
                try execute("COMMIT")
                return nil
            }
            try execute("INSERT INTO location_rows (record) SELECT record FROM locations ORDER BY address")
            let moved = Int(sqlite3_changes(db))
            try execute("DROP TABLE locations")
            try execute("COMMIT")
            return moved
        } catch {
            _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    private func hasAddressKeyedTable() throws(Failure) -> Bool {
        let probe = try prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'locations'")
        defer { sqlite3_finalize(probe) }
        return sqlite3_step(probe) == SQLITE_ROW
    }

    /// A stored setting (such as the fingerprint of the rules the styles were derived with).
    public func meta(_ key: String) throws(Failure) -> String? {
        let statement = try prepare("SELECT value FROM meta WHERE key = ?1")
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_text(statement, 1, key, -1, transient)
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { return nil }
        return String(cString: text)
    }

    public func setMeta(_ key: String, _ value: String) throws(Failure) {
        let statement = try prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
        defer { sqlite3_finalize(statement) }
        sqlite3_bind_text(statement, 1, key, -1, transient)
        sqlite3_bind_text(statement, 2, value, -1, transient)
        guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("writing \(key)") }
    }

    deinit {
        sqlite3_finalize(upsert)
        sqlite3_finalize(upsertMany)
        sqlite3_finalize(delete)
        sqlite3_close(db)
    }

    /// The meta key of the checkpoint a clean stop recorded (see `RestoredState.checkpoint`).
    public static let checkpointKey = "checkpoint"

    /// The intake journal position the stored snapshot covers (0: none recorded).
    public func journalPosition() throws(Failure) -> UInt64 {
        try meta(Self.journalKey).flatMap { UInt64($0) } ?? 0
    }

    static let journalKey = "journal"

    /// Writes these rows (see ``write(_:deleting:cleared:journalPosition:)``).
    public func write(
        _ rows: [LocationRow], deleting vacated: [Int64] = [], journalPosition: UInt64? = nil
    ) throws(Failure) {
        try write(EncodedRecords(rows), deleting: vacated, journalPosition: journalPosition)
    }

    /// Deletes the rows of `vacated` (the second rows of locations a restore found stored
    /// twice) and writes these records under their rows, in one transaction, with the
    /// topics cleared up to the state they hold (see ``recordCleared(_:)``) and the journal
    /// position they bring the snapshot up to.
    /// - Throws: ``Failure``; the transaction is rolled back.
    public func write(
        _ records: EncodedRecords, deleting vacated: [Int64] = [], cleared: [String: Int64] = [:],
        journalPosition: UInt64? = nil
    ) throws(Failure) {
        guard !records.isEmpty || !vacated.isEmpty || !cleared.isEmpty || journalPosition != nil else { return }
        try execute("BEGIN")
        do throws(Failure) {
            try insertCleared(cleared)
            for row in vacated {
                sqlite3_reset(delete)
                sqlite3_bind_int64(delete, 1, row)
                guard sqlite3_step(delete) == SQLITE_DONE else { throw failure("deleting row \(row)") }
            }
            try records.withRecords { (record) throws(Failure) in
                let rows = records.rows
                var start = 0
                while rows.count - start >= Self.rowsAtOnce {
                    for index in 0..<Self.rowsAtOnce {
                        let parameter = Int32(2 * index + 1)
                        let bytes = record(start + index)
                        sqlite3_bind_int64(upsertMany, parameter, rows[start + index])
                        // Bound in place, not copied (see `upsert(row:record:)`).
                        _ = sqlite3_bind_blob(upsertMany, parameter + 1, bytes.baseAddress, Int32(bytes.count), inPlace)
                    }
                    defer { sqlite3_reset(upsertMany) }
                    guard sqlite3_step(upsertMany) == SQLITE_DONE else {
                        throw failure("writing rows \(rows[start])…\(rows[start + Self.rowsAtOnce - 1])")
                    }
                    start += Self.rowsAtOnce
                }
                for index in start..<rows.count { try upsert(row: rows[index], record: record(index)) }
            }
            if let journalPosition { try setMeta(Self.journalKey, String(journalPosition)) }
            try execute("COMMIT")
        } catch {
            _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    /// Writes one row: a record's bytes under its number (outside a transaction, its own).
    func upsert(row: Int64, record blob: [UInt8]) throws(Failure) {
        // `withUnsafeBytes` rethrows untyped errors: the typed one is carried out.
        try blob.withUnsafeBytes { bytes in Result { () throws(Failure) in try upsert(row: row, record: bytes) } }.get()
    }

    private func upsert(row: Int64, record blob: UnsafeRawBufferPointer) throws(Failure) {
        sqlite3_bind_int64(upsert, 1, row)
        // The bytes are bound in place, not copied (they outlive the step); the statement is
        // reset after it, and every use binds its values afresh: the pointer it keeps is
        // never read again.
        _ = sqlite3_bind_blob(upsert, 2, blob.baseAddress, Int32(blob.count), inPlace)
        defer { sqlite3_reset(upsert) }
        guard sqlite3_step(upsert) == SQLITE_DONE else { throw failure("writing row \(row)") }
    }

    /// Reads every stored location.
    /// - Throws: ``Failure`` when the file cannot be read; a record that cannot be decoded is
    ///   skipped and counted in `unreadable`.
    public func readAll() throws(Failure) -> (records: [LocationRecord], unreadable: Int) {
        var records: [LocationRecord] = []
        if let count = try? highestRow() { records.reserveCapacity(count) }
        let unreadable = try forEachRecord { records.append($0.record) }
        return (records, unreadable)
    }

    /// Calls `body` with every stored location and its row, in row order (the order the
    /// locations first arrived in), without holding them all.
    /// - Returns: how many records could not be decoded (and were skipped).
    /// - Throws: ``Failure`` when the file cannot be read.
    @discardableResult
    public func forEachRecord(_ body: (LocationRow) -> Void) throws(Failure) -> Int {
        try forEachStoredRecord { row, bytes in
            guard let record = try? RecordCodec.decode(bytes) else { return false }
            body(LocationRow(row: row, record: record))
            return true
        }
    }

    /// Calls `body` with every stored record's row and bytes (valid during the call only), in
    /// row order; `body` says whether it could read the record.
    /// - Returns: how many records `body` could not read.
    /// - Throws: ``Failure`` when the file cannot be read.
    func forEachStoredRecord(_ body: (Int64, UnsafeRawBufferPointer) -> Bool) throws(Failure) -> Int {
        let statement = try prepare("SELECT row, record FROM location_rows")
        defer { sqlite3_finalize(statement) }
        var unreadable = 0
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw failure("reading the locations") }
            let row = sqlite3_column_int64(statement, 0)
            let bytes = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 1), count: Int(sqlite3_column_bytes(statement, 1)))
            if !body(row, bytes) { unreadable += 1 }
        }
        return unreadable
    }

    /// The highest row number the file holds (0 when it holds none): at least how many
    /// locations it holds, and that many unless rows were deleted (the second of two stored
    /// placements of one location, see `LiveStore.restore`). Read from the end of the
    /// table's tree: a count would read every page of it before a restore could start.
    public func highestRow() throws(Failure) -> Int {
        let statement = try prepare("SELECT max(row) FROM location_rows")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw failure("finding the highest row") }
        return Int(sqlite3_column_int64(statement, 0))
    }

    /// How many locations are stored.
    public func countRows() throws(Failure) -> Int {
        let statement = try prepare("SELECT count(*) FROM location_rows")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw failure("counting the locations") }
        return Int(sqlite3_column_int64(statement, 0))
    }

    func execute(_ sql: String) throws(Failure) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(db, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(message)
            throw Failure(operation: sql, message: text, code: code & 0xFF)
        }
    }

    func prepare(_ sql: String) throws(Failure) -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw failure(sql) }
        return statement
    }

    func failure(_ operation: String) -> Failure {
        Failure(
            operation: operation, message: db.map { String(cString: sqlite3_errmsg($0)) } ?? "no database",
            code: db.map { sqlite3_errcode($0) & 0xFF } ?? 0)
    }

    /// Moves an unreadable state file (and SQLite's side files) aside, to
    /// `{path}.corrupt-{time}`, so that the daemon can start with an empty one.
    /// - Returns: where it went.
    /// - Throws: when it cannot be renamed.
    public static func setAside(_ path: String, at time: LiveTimestamp = .now) throws -> String {
        let aside = "\(path).corrupt-\(time.description.replacingOccurrences(of: ":", with: "-"))"
        try FileManager.default.moveItem(atPath: path, toPath: aside)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try? FileManager.default.moveItem(atPath: path + suffix, toPath: aside + suffix)
        }
        return aside
    }
}

/// SQLite copies bound values at once (`SQLITE_TRANSIENT`).
let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
/// SQLITE_STATIC: the caller keeps the bytes alive while the statement uses them.
private let inPlace = unsafeBitCast(0, to: sqlite3_destructor_type.self)
