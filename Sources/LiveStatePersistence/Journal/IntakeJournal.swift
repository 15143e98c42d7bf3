import Foundation
import LiveTopics
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The intake journal: every update the broker hands over, appended before the broker is
/// told it arrived, so that a crash of the daemon loses nothing acknowledged.
///
/// A folder of segment files, each named by the position (a byte offset counted over the
/// whole journal) of its first record. A record is its body's length and CRC-32C, then the
/// body: receipt time, flags, topic, payload. The state file records the position its
/// snapshot covers; a start replays what follows, and segments the snapshot covers are
/// deleted. Records are staged, then committed together in a single `write(2)` (to the
/// page cache, which a killed process does not take with it); a thread of its own calls
/// `fdatasync` every `syncInterval`, for a machine that loses power.
///
/// One thread appends; ``covered(through:)`` and the statistics may be called from others.
public final class IntakeJournal: Sendable {
    /// A failed system call, with the file and the error.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var operation: String
        public var path: String
        public var code: Int32
        public var description: String {
            "intake journal: \(operation) \(path) failed: \(String(cString: strerror(code)))"
        }
        /// The disk is full (or over quota): appending resumes when space returns.
        public var isNoSpace: Bool { code == ENOSPC || code == EDQUOT }
    }

    /// One replayed record.
    public struct Record: Sendable, Equatable {
        public var topic: String
        public var payload: [UInt8]
        public var receivedAt: LiveTimestamp
        public var retain: Bool
        /// The position just after the record: a snapshot that has applied it covers this much.
        public var end: UInt64
    }

    /// What a replay found.
    public struct ReplayStatistics: Sendable, Equatable {
        public var records = 0
        /// Records whose checksum or length did not hold, skipped.
        public var corrupt = 0
        /// Bytes of an incomplete last record (a write cut short by the crash), dropped.
        public var tornBytes = 0

        public init(records: Int = 0, corrupt: Int = 0, tornBytes: Int = 0) {
            self.records = records
            self.corrupt = corrupt
            self.tornBytes = tornBytes
        }
    }

    public struct Statistics: Sendable, Equatable {
        /// Bytes in the journal's files now.
        public var bytes: UInt64
        /// The position the next record gets.
        public var end: UInt64
        public var segments: Int
        public var appended: Int
    }

    static let headerSize = 8
    /// Receipt time (8), flags (1), topic length (2).
    static let bodyPrefix = 11
    /// Larger than any payload the daemon takes, smaller than a corrupt length usually is.
    static let maximumBody = 16 << 20

    public let directory: String
    let segmentSize: UInt64

    struct State {
        /// Start positions of the segment files, ascending; the last one is appended to.
        var segments: [UInt64] = []
        var descriptor: Int32 = -1
        /// The position of the active segment's end: where the next record goes.
        var end: UInt64 = 0
        var bytes: UInt64 = 0
        var appended = 0
        /// Records staged for the next ``commit()``, and how many.
        var staged: [UInt8] = []
        var stagedRecords = 0
        var closed = false
        /// Bytes of an incomplete last record cut off at open, reported by the next replay.
        var droppedTail = 0
        /// Finished segments' descriptors, for the sync thread to bring to the disk and close
        /// (off the appending thread: an fdatasync of a whole segment takes milliseconds).
        var retired: [Int32] = []
    }

    let state: Mutex<State>
    private let syncStop = Atomic<Bool>(false)
    private let syncWakeup = DispatchSemaphore(value: 0)
    private let syncDone = DispatchSemaphore(value: 0)
    private let syncs = Atomic<Int>(0)
    private let syncRunning = Atomic<Bool>(false)

    /// Opens the journal in `directory` (created if missing), cutting an incomplete last
    /// record off the last segment; appending continues after the last whole record.
    /// - Parameters:
    ///   - segmentSize: a new segment starts once the active one is this large.
    ///   - syncInterval: how often the data reaches the disk (`nil`: never by itself).
    /// - Throws: ``Failure``.
    public init(directory: String, segmentSize: Int = 64 << 20, syncInterval: Duration? = .seconds(1)) throws(Failure) {
        self.directory = directory
        self.segmentSize = UInt64(max(segmentSize, 4096))
        if mkdir(directory, 0o750) != 0 && errno != EEXIST {
            throw Failure(operation: "creating", path: directory, code: errno)
        }
        var initial = State()
        initial.segments = try Self.listSegments(directory)
        var bytes: UInt64 = 0
        for start in initial.segments.dropLast() {
            var info = stat()
            if stat(Self.path(directory, start), &info) == 0 { bytes += UInt64(info.st_size) }
        }
        if let last = initial.segments.last {
            let path = Self.path(directory, last)
            let descriptor = open(path, O_RDWR | O_APPEND | O_CLOEXEC)
            guard descriptor >= 0 else { throw Failure(operation: "opening", path: path, code: errno) }
            let valid = try Self.validLength(of: path)
            var info = stat()
            fstat(descriptor, &info)
            if UInt64(info.st_size) > valid {
                guard ftruncate(descriptor, off_t(valid)) == 0 else {
                    let code = errno
                    Glibc.close(descriptor)
                    throw Failure(operation: "cutting the incomplete last record off", path: path, code: code)
                }
                initial.droppedTail = Int(UInt64(info.st_size) - valid)
            }
            initial.descriptor = descriptor
            initial.end = last + valid
            bytes += valid
        }
        initial.bytes = bytes
        initial.staged.reserveCapacity(4096)
        state = Mutex(initial)
        if let syncInterval { startSyncThread(every: syncInterval) }
    }

    deinit {
        close()
    }

    /// Stops the sync thread (after a last sync) and closes the file.
    public func close() {
        if !syncStop.exchange(true, ordering: .acquiringAndReleasing) && syncRunning.load(ordering: .acquiring) {
            syncWakeup.signal()
            syncDone.wait()
        }
        state.withLock { state in
            for descriptor in state.retired + (state.descriptor >= 0 ? [state.descriptor] : []) {
                _ = fdatasync(descriptor)
                _ = Glibc.close(descriptor)
            }
            state.retired = []
            state.descriptor = -1
            state.closed = true
        }
    }

    // MARK: - Appending

    /// Appends one update, in one `write(2)` (with whatever was staged before it).
    /// - Returns: the position after it.
    /// - Throws: ``Failure`` (a full disk: ``Failure/isNoSpace``); nothing of the record
    ///   stays in the file then, and the caller may try again.
    @discardableResult
    public func append(
        topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retain: Bool
    ) throws(Failure) -> UInt64 {
        let end = stage(topic: topic, payload: payload, receivedAt: receivedAt, retain: retain)
        try commit()
        return end
    }

    /// Adds one update to the records that ``commit()`` writes together.
    /// - Returns: the position after it, once committed.
    public func stage(
        topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retain: Bool
    ) -> UInt64 {
        state.withLock { state -> UInt64 in
            let bodyLength = Self.bodyPrefix + topic.count + payload.count
            let start = state.staged.count
            Self.appendUInt32(UInt32(bodyLength), to: &state.staged)
            Self.appendUInt32(0, to: &state.staged)  // the checksum, filled in below
            var time = UInt64(bitPattern: receivedAt.millisecondsSince1970).littleEndian
            withUnsafeBytes(of: &time) { state.staged.append(contentsOf: $0) }
            state.staged.append(retain ? 1 : 0)
            state.staged.append(UInt8(topic.count & 0xFF))
            state.staged.append(UInt8(topic.count >> 8))
            state.staged.append(contentsOf: topic)
            state.staged.append(contentsOf: payload)
            state.staged.withUnsafeMutableBytes { bytes in
                let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[(start + Self.headerSize)...]))
                bytes.storeBytes(of: crc.littleEndian, toByteOffset: start + 4, as: UInt32.self)
            }
            state.stagedRecords += 1
            return state.end + UInt64(state.staged.count)
        }
    }

    /// Writes every staged record, in one `write(2)`.
    /// - Throws: ``Failure`` (a full disk: ``Failure/isNoSpace``); nothing of them stays in
    ///   the file then, they stay staged, and the caller may try again.
    public func commit() throws(Failure) {
        try state.withLock { state throws(Failure) in
            guard !state.staged.isEmpty else { return }
            let length = state.staged.count
            // Records that would take the active segment past its size start the next one
            // (an empty segment takes them whatever their size).
            let used = state.end - (state.segments.last ?? 0)
            if state.descriptor < 0 || (used > 0 && used + UInt64(length) > segmentSize) {
                try startSegment(&state)
            }
            let descriptor = state.descriptor
            let written = state.staged.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written == length else {
                let code = written < 0 ? errno : ENOSPC
                // A part of the records may be in the file: take it out, so that the next
                // try starts where this one did.
                let start = state.end - (state.segments.last ?? 0)
                _ = ftruncate(state.descriptor, off_t(start))
                throw Failure(operation: "appending to", path: Self.path(directory, state.segments.last ?? 0), code: code)
            }
            state.end += UInt64(length)
            state.bytes += UInt64(length)
            state.appended += state.stagedRecords
            state.stagedRecords = 0
            // A flood's buffer is not kept for ever.
            if state.staged.capacity > Self.stagedCapacityKept {
                state.staged = []
            } else {
                state.staged.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Forgets what is staged (its updates were not acknowledged; the broker sends them again).
    public func discardStaged() {
        state.withLock { state in
            state.staged.removeAll(keepingCapacity: true)
            state.stagedRecords = 0
        }
    }

    static let stagedCapacityKept = 1 << 20

    private func startSegment(_ state: inout State) throws(Failure) {
        let start = state.end
        let path = Self.path(directory, start)
        let descriptor = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw Failure(operation: "creating", path: path, code: errno) }
        if state.descriptor >= 0 {
            if syncRunning.load(ordering: .acquiring) {
                state.retired.append(state.descriptor)
            } else {
                _ = Glibc.close(state.descriptor)
            }
        }
        if state.segments.last != start { state.segments.append(start) }
        state.descriptor = descriptor
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            _ = Glibc.close(folder)
        }
    }

    /// Makes the next record's position at least `position` (the position the snapshot
    /// covers): a journal folder that was emptied or lost must not hand out positions the
    /// snapshot already counts as applied.
    public func resume(atLeast position: UInt64) {
        state.withLock { state in
            guard state.end < position else { return }
            if state.descriptor >= 0 { _ = Glibc.close(state.descriptor) }
            for start in state.segments { unlink(Self.path(directory, start)) }
            state.segments = []
            state.descriptor = -1
            state.bytes = 0
            state.end = position
        }
    }

    // MARK: - Covering and statistics

    /// The snapshot now covers everything before `position`: deletes the segments that end
    /// at or before it.
    /// - Returns: how many segments were deleted.
    @discardableResult
    public func covered(through position: UInt64) -> Int {
        let doomed = state.withLock { state -> [UInt64] in
            var doomed: [UInt64] = []
            while state.segments.count > 1 && state.segments[1] <= position {
                doomed.append(state.segments.removeFirst())
            }
            return doomed
        }
        var freed: UInt64 = 0
        for start in doomed {
            let path = Self.path(directory, start)
            var info = stat()
            if stat(path, &info) == 0 { freed += UInt64(info.st_size) }
            unlink(path)
        }
        if freed > 0 { state.withLock { $0.bytes -= min($0.bytes, freed) } }
        return doomed.count
    }

    public var statistics: Statistics {
        state.withLock {
            Statistics(bytes: $0.bytes, end: $0.end, segments: $0.segments.count, appended: $0.appended)
        }
    }

    /// How many times the sync thread has brought the journal to the disk.
    public var syncCount: Int { syncs.load(ordering: .relaxed) }

    /// Brings what was appended to the disk now.
    public func sync() {
        let (descriptor, retired) = state.withLock { state in
            defer { state.retired = [] }
            return (state.descriptor >= 0 ? dup(state.descriptor) : -1, state.retired)
        }
        for finished in retired {
            _ = fdatasync(finished)
            _ = Glibc.close(finished)
        }
        guard descriptor >= 0 else { return }
        _ = fdatasync(descriptor)
        _ = Glibc.close(descriptor)
        syncs.add(1, ordering: .relaxed)
    }

    private func startSyncThread(every interval: Duration) {
        syncRunning.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            let nanoseconds = max(1_000_000, Int(interval.nanoseconds))
            while !syncStop.load(ordering: .acquiring) {
                _ = syncWakeup.wait(timeout: .now() + .nanoseconds(nanoseconds))
                sync()
            }
            syncDone.signal()
        }
        thread.name = "journal sync"
        thread.start()
    }

    // MARK: - Replay

    /// Reads every whole record from `position` on, in order: what the snapshot does not
    /// cover. A record whose checksum fails is counted and skipped (the reader finds the
    /// next whole record after it); an incomplete last record is dropped.
    /// - Throws: ``Failure`` when a segment cannot be read.
    @discardableResult
    public func replay(from position: UInt64, _ body: (Record) throws -> Void) throws -> ReplayStatistics {
        try replayInPlace(from: position) { views in
            for view in views {
                try body(
                    Record(
                        topic: String(decoding: view.topic, as: UTF8.self), payload: Array(view.payload), receivedAt: view.receivedAt,
                        retain: view.retain, end: view.end))
            }
        }
    }

    /// One replayed record read where it lies in the segment: its bytes are valid only
    /// during the call its batch is passed to.
    public struct RecordView {
        public var topic: UnsafeRawBufferPointer
        public var payload: UnsafeRawBufferPointer
        public var receivedAt: LiveTimestamp
        public var retain: Bool
        /// The position just after the record.
        public var end: UInt64
    }

    /// ``replay(from:_:)`` without copying each record's topic and payload out of the
    /// segment, in batches of up to `batchSize` (a caller can then load the memory a batch
    /// needs at once): for a start that replays a million records.
    @discardableResult
    public func replayInPlace(
        from position: UInt64, batchSize: Int = 16, _ body: ([RecordView]) throws -> Void
    ) throws -> ReplayStatistics {
        var batch: [RecordView] = []
        batch.reserveCapacity(batchSize)
        let (segments, end, dropped) = state.withLock { state in
            defer { state.droppedTail = 0 }
            return (state.segments, state.end, state.droppedTail)
        }
        var statistics = ReplayStatistics(tornBytes: dropped)
        for (index, start) in segments.enumerated() {
            let segmentEnd = index + 1 < segments.count ? segments[index + 1] : end
            guard segmentEnd > position else { continue }
            let path = Self.path(directory, start)
            let data = try Self.read(path)
            try data.withUnsafeBytes { bytes in
                var scanner = Scanner(bytes: bytes, base: start)
                var scanned = ReplayStatistics()
                while let record = scanner.next(statistics: &scanned) {
                    guard record.end > position else { continue }
                    statistics.records += 1
                    batch.append(record)
                    if batch.count >= batchSize {
                        try body(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
                // The views point into this segment's bytes: handed over before it goes.
                if !batch.isEmpty {
                    try body(batch)
                    batch.removeAll(keepingCapacity: true)
                }
                statistics.corrupt += scanned.corrupt
                statistics.tornBytes += scanned.tornBytes
            }
        }
        return statistics
    }

    /// Walks a segment's bytes record by record.
    struct Scanner {
        let bytes: UnsafeRawBufferPointer
        let base: UInt64
        var offset = 0

        init(bytes: UnsafeRawBufferPointer, base: UInt64) {
            self.bytes = bytes
            self.base = base
        }

        /// The next whole record; `nil` at the end (an incomplete tail counted as torn).
        mutating func next(statistics: inout ReplayStatistics) -> RecordView? {
            while offset < bytes.count {
                switch check(at: offset) {
                case .whole(let length):
                    defer { offset += length }
                    statistics.records += 1
                    return record(at: offset, length: length)
                case .incomplete:
                    // Only a tail can be incomplete; anything after a corrupt record that
                    // looks incomplete is searched for a whole record first.
                    if let next = nextWhole(after: offset) {
                        statistics.corrupt += 1
                        offset = next
                        continue
                    }
                    statistics.tornBytes += bytes.count - offset
                    offset = bytes.count
                    return nil
                case .corrupt:
                    statistics.corrupt += 1
                    guard let next = nextWhole(after: offset) else {
                        offset = bytes.count
                        return nil
                    }
                    offset = next
                }
            }
            return nil
        }

        /// The offset just after the last whole record.
        mutating func validLength() -> Int {
            var statistics = ReplayStatistics()
            var valid = 0
            while next(statistics: &statistics) != nil { valid = offset }
            return valid
        }

        enum Check { case whole(Int), incomplete, corrupt }

        func check(at offset: Int) -> Check {
            guard bytes.count - offset >= IntakeJournal.headerSize else { return .incomplete }
            let bodyLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            guard bodyLength >= IntakeJournal.bodyPrefix && bodyLength <= IntakeJournal.maximumBody else { return .corrupt }
            let length = IntakeJournal.headerSize + bodyLength
            guard bytes.count - offset >= length else { return .incomplete }
            let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
            let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + IntakeJournal.headerSize)..<(offset + length)])
            guard CRC32C.checksum(body) == stored else { return .corrupt }
            let topicLength = Int(body[9]) | Int(body[10]) << 8
            guard IntakeJournal.bodyPrefix + topicLength <= bodyLength else { return .corrupt }
            return .whole(length)
        }

        /// The first offset after `offset` where a whole record starts.
        func nextWhole(after offset: Int) -> Int? {
            var candidate = offset + 1
            while bytes.count - candidate >= IntakeJournal.headerSize + IntakeJournal.bodyPrefix {
                if case .whole = check(at: candidate) { return candidate }
                candidate += 1
            }
            return nil
        }

        func record(at offset: Int, length: Int) -> RecordView {
            let body = offset + IntakeJournal.headerSize
            let time = Int64(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: body, as: UInt64.self)))
            let flags = bytes[body + 8]
            let topicLength = Int(bytes[body + 9]) | Int(bytes[body + 10]) << 8
            let topicStart = body + IntakeJournal.bodyPrefix
            let payloadStart = topicStart + topicLength
            return RecordView(
                topic: UnsafeRawBufferPointer(rebasing: bytes[topicStart..<payloadStart]),
                payload: UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<(offset + length)]),
                receivedAt: LiveTimestamp(millisecondsSince1970: time), retain: flags & 1 == 1,
                end: base + UInt64(offset + length))
        }
    }

    // MARK: - Files

    static func path(_ directory: String, _ start: UInt64) -> String {
        let hex = String(start, radix: 16)
        return "\(directory)/\(String(repeating: "0", count: max(0, 16 - hex.count)))\(hex).journal"
    }

    static func listSegments(_ directory: String) throws(Failure) -> [UInt64] {
        guard let folder = opendir(directory) else { throw Failure(operation: "reading", path: directory, code: errno) }
        defer { closedir(folder) }
        var starts: [UInt64] = []
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            guard name.hasSuffix(".journal"), let start = UInt64(name.dropLast(8), radix: 16) else { continue }
            starts.append(start)
        }
        return starts.sorted()
    }

    static func read(_ path: String) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(operation: "opening", path: path, code: errno) }
        defer { _ = Glibc.close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Failure(operation: "reading", path: path, code: errno) }
        var data = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < data.count {
            let count = data.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                if count == 0 { break }
                throw Failure(operation: "reading", path: path, code: errno)
            }
            done += count
        }
        if done < data.count { data.removeLast(data.count - done) }
        return data
    }

    static func validLength(of path: String) throws(Failure) -> UInt64 {
        let data = try read(path)
        return data.withUnsafeBytes { bytes in
            var scanner = Scanner(bytes: bytes, base: 0)
            return UInt64(scanner.validLength())
        }
    }

    static func appendUInt32(_ value: UInt32, to buffer: inout [UInt8]) {
        buffer.append(UInt8(value & 0xFF))
        buffer.append(UInt8((value >> 8) & 0xFF))
        buffer.append(UInt8((value >> 16) & 0xFF))
        buffer.append(UInt8(value >> 24))
    }
}
