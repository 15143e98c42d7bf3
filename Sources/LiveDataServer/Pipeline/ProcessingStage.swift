import CMalloc
import LiveState
import LiveStatePersistence
import LiveTopics
import Logging

/// The processing stage: the core (``LiveCore``) through its own interface. It turns an
/// update into a change (or a logged, counted refusal), and restores the state at the
/// start; the owner routes what it returns.
final class ProcessingStage {
    let core: LiveCore
    /// Updates handed to the core since the start (replayed ones included).
    private(set) var processed = 0
    /// While the start replays the journal: changes are not published.
    private(set) var replaying = false
    /// What the start's journal replay found.
    private(set) var replayed = IntakeJournal.ReplayStatistics()
    private var rejections = RateLimitedLog()
    private var clock = ClockStepWatch()
    private let logger: Logger

    init(core: LiveCore, logger: Logger) {
        self.core = core
        self.logger = logger
    }

    /// Processes one update whose topic and payload are read in place; `pathHash`, its
    /// topic's path hash when known (see ``LiveCore/process(topicBytes:payload:receivedAt:retained:pathHash:)``).
    /// - Returns: the change it made, if any.
    @inline(__always)
    func process(
        topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retain: Bool, pathHash: UInt64
    ) -> DerivedChange? {
        processed += 1
        switch core.process(topicBytes: topic, payload: payload, receivedAt: receivedAt, retained: retain, pathHash: pathHash) {
        case .changed(let change):
            return change
        case .rejected(let reason, let text):
            logRejection(reason, text, topic: topic)
        case .unchanged, .ignoredOutOfOrder, .notSubscribed:
            break
        }
        return nil
    }

    /// Looks for a step of the wall clock since the last look (each tick, before values are
    /// aged): the values stamped on receipt move with it.
    func followClockSteps() {
        guard let step = clock.step() else { return }
        let started = ContinuousClock.now
        let moved = core.clockStepped(by: step.milliseconds, stampedAfter: step.stampedAfter)
        let direction = step.milliseconds > 0 ? "forward" : "back"
        logger.warning(
            "the system clock was stepped \(direction) by \(Duration.milliseconds(abs(step.milliseconds))): \(moved) values stamped on receipt moved with it (\(ContinuousClock.now - started))",
            metadata: ["clock.step_ms": "\(step.milliseconds)"])
    }

    /// Logs a dropped update, at most once a second with a count of the ones not logged.
    private func logRejection(_ reason: LiveCore.RejectReason, _ text: String, topic: UnsafeRawBufferPointer) {
        guard let suppressed = rejections.admit() else { return }
        let more = suppressed > 0 ? " (and \(suppressed) more since the last report)" : ""
        logger.warning(
            "dropped an update: \(text)\(more)",
            metadata: ["mqtt.topic": "\(String(decoding: topic, as: UTF8.self))", "update.rejected": "\(reason.rawValue)"])
    }

    /// Applies a copied state (``PeerState``'s lines) as updates: a value older than the
    /// one held (a queued update already applied) is ignored as out of order.
    /// - Returns: the values applied, and the lines read.
    func importState(_ body: [UInt8]) -> (applied: Int, lines: Int) {
        var applied = 0
        var lines = 0
        let now = LiveTimestamp.now
        body.withUnsafeBytes { bytes in
            PeerState.forEachLine(bytes) { topic, payload in
                lines += 1
                if case .changed = core.process(topic: topic, payload: payload, receivedAt: now) { applied += 1 }
            }
        }
        return (applied, lines)
    }

    // MARK: - The start

    /// Restores the state file (`progress` follows it). A file that is not a readable
    /// database is moved aside (no restart would read it) and the start goes on with no
    /// state: the journal, the sensors' next updates and the broker's queue fill it again.
    /// - Throws: when the state file cannot be opened or read.
    /// `keeping`: which stored locations to put back (see ``LiveCore/restore(fromFile:progress:keeping:)``).
    func restore(fromFile path: String, keeping: ((LocationAddress) -> Bool)?, progress: StartProgress) throws -> RestoredState {
        let started = ContinuousClock.now
        var restored: RestoredState
        do {
            restored = try core.restore(
                fromFile: path, progress: { done, total in progress.set(.restoring(done: done, of: total)) }, keeping: keeping,
                shouldStop: { [progress] in progress.isStopRequested })
        } catch let failure as StateDatabase.Failure where failure.isUnreadableFile {
            let aside = try StateDatabase.setAside(path)
            logger.critical(
                "the state file is not a readable database (\(failure.message)): moved it to \(aside) and starting with no state",
                metadata: ["store.path": "\(path)"])
            restored = RestoredState()
        }
        if let migrated = restored.migrated {
            logger.notice(
                "moved the state file's \(migrated) locations to numbered rows (the layout of this version; an older version cannot read the file any more)",
                metadata: ["store.path": "\(path)"])
        }
        if restored.unreadable > 0 {
            logger.warning("skipped \(restored.unreadable) stored locations that could not be read", metadata: ["store.path": "\(path)"])
        }
        logger.info(
            "restored \(restored.count) locations",
            metadata: ["store.path": "\(path)", "restore.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
        return restored
    }

    /// Replays the journal from `position` through `handle` (the owner's way in, as for
    /// live updates), publishing nothing meanwhile.
    func replay(
        _ journal: IntakeJournal, from position: UInt64, progress: StartProgress, handle: (IntakeJournal.RecordView) -> Void
    ) throws {
        replaying = true
        defer { replaying = false }
        var records = 0
        progress.set(.replaying(records: 0))
        let replay = try journal.replay(from: position, prefetchingFor: core) { record in
            if progress.isStopRequested { throw CancellationError() }
            handle(record)
            records += 1
            if records & 4095 == 0 { progress.set(.replaying(records: records)) }
        }
        journal.resume(atLeast: position)
        replayed = replay
        if replay.records > 0 || replay.corrupt > 0 || replay.tornBytes > 0 {
            let corrupt = replay.corrupt > 0 ? "; skipped \(replay.corrupt) corrupt records" : ""
            let torn = replay.tornBytes > 0 ? "; dropped an incomplete last record (\(replay.tornBytes) bytes)" : ""
            logger.info("replayed \(replay.records) journaled updates\(corrupt)\(torn)", metadata: ["journal.path": "\(journal.directory)"])
        }
    }

    /// After the replay: staleness caught up (and everything derived again under changed
    /// rules) once, and the start's passing allocations handed back to the system, so that
    /// what stays resident is the state.
    func finishRestore(_ restored: inout RestoredState) {
        core.finishRestore(&restored, now: .now)
        livedata_release_free_heap()
    }
}
