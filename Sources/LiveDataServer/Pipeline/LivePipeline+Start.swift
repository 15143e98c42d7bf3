import CMalloc
import LiveState
import LiveStatePersistence

/// The start: the state file restored and the journal's tail replayed, before the broker is
/// connected; the first convergence then follows the connection (see ``connected()``).
extension LivePipeline {
    /// Restores the stored state and replays the journal's tail (publishing nothing yet);
    /// ``startProgress`` follows it. A stop asked for meanwhile
    /// (``StartProgress/requestStop()``) ends it after the restore or at the next replayed
    /// update, with nothing written: the state file and the journal are as they were.
    /// - Throws: when the state file cannot be opened or read; `CancellationError` when
    ///   stopped.
    public func start() throws {
        defer { if snapshots.writer != nil || config.store.isInMemory { startProgress.set(.started) } }
        if config.store.isInMemory { return }
        let started = ContinuousClock.now
        // Read with a connection of our own, then hand the file to the writer.
        var restored: RestoredState
        let progress = startProgress
        do {
            restored = try core.restore(fromFile: config.store.path) { done, total in
                progress.set(.restoring(done: done, of: total))
            }
        } catch let failure as StateDatabase.Failure where failure.isUnreadableFile {
            // No restart would read it: keep it for a person to look at, start empty;
            // the journal, the sensors' next updates and the broker's queue fill the state
            // again, and convergence corrects the broker's retained styles.
            let aside = try StateDatabase.setAside(config.store.path)
            logger.critical(
                "the state file is not a readable database (\(failure.message)): moved it to \(aside) and starting with no state",
                metadata: ["store.path": "\(config.store.path)"])
            restored = RestoredState()
        }
        if let migrated = restored.migrated {
            logger.notice(
                "moved the state file's \(migrated) locations to numbered rows (the layout of this version; an older version cannot read the file any more)",
                metadata: ["store.path": "\(config.store.path)"])
        }
        if restored.unreadable > 0 {
            logger.warning(
                "skipped \(restored.unreadable) stored locations that could not be read",
                metadata: ["store.path": "\(config.store.path)"])
        }
        logger.info(
            "restored \(restored.count) locations",
            metadata: ["store.path": "\(config.store.path)", "restore.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
        if progress.isStopRequested { throw CancellationError() }
        markers.restoredCheckpoint = restored.checkpoint
        startedEmpty = restored.count == 0
        // The style topics of placements the file held twice are cleared. The styles that
        // changed while we were down (rules, staleness, the journal's tail) are not published
        // from here: the first convergence compares every retained style with the state and
        // publishes what differs, with versions above the ones the broker holds.
        for address in core.store.takeStaleStyleAddresses() { publisher.send(topics.clearing(styleOf: address)) }
        replaying = true
        defer { replaying = false }
        if let journal = intake.journal {
            // What arrived after the snapshot, through the same way in as live updates.
            snapshots.appliedPosition = restored.journalPosition
            var records = 0
            progress.set(.replaying(records: 0))
            let replay = try journal.replay(from: restored.journalPosition, prefetchingFor: core) { record in
                if progress.isStopRequested { throw CancellationError() }
                handle(
                    topic: record.topic, payload: record.payload, receivedAt: record.receivedAt,
                    retain: record.retain, journalEnd: record.end, arrived: nil)
                records += 1
                if records & 4095 == 0 { progress.set(.replaying(records: records)) }
            }
            journal.resume(atLeast: restored.journalPosition)
            replayed = replay
            if replay.records > 0 || replay.corrupt > 0 || replay.tornBytes > 0 {
                let corrupt = replay.corrupt > 0 ? "; skipped \(replay.corrupt) corrupt records" : ""
                let torn = replay.tornBytes > 0 ? "; dropped an incomplete last record (\(replay.tornBytes) bytes)" : ""
                logger.info(
                    "replayed \(replay.records) journaled updates\(corrupt)\(torn)",
                    metadata: ["journal.path": "\(journal.directory)"])
            }
        }
        // Staleness caught up (and everything derived again under changed rules) once, after
        // the journal brought the values up to date.
        core.finishRestore(&restored, now: .now)
        // The restore's and the replay's passing allocations (records read on other threads,
        // journal segments) leave free memory scattered over the heap: its pages go back to
        // the system, so that what stays resident is the state.
        livedata_release_free_heap()
        // The checkpoint vouches for the styles as they were at the stop: not for what the
        // journal or the catch-up changed since.
        if replayed.records > 0 || restored.changed > 0 {
            markers.restoredCheckpoint = nil
        }
        snapshots.writer = try StoreWriter(path: config.store.path, logger: logger)
    }
}
