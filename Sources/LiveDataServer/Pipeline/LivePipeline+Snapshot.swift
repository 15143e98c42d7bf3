import CMalloc
import LiveStatePersistence

/// The snapshot's bookkeeping: the state file's writer, the journal positions it covers,
/// its last fault, and when the heap was last trimmed.
struct SnapshotState {
    /// Set once the start has restored the state file and handed it to the writer.
    var writer: StoreWriter?
    /// The journal position of the last update applied: a snapshot written now covers it.
    var appliedPosition: UInt64 = 0
    /// The journal position the last written snapshot covers.
    var coveredPosition: UInt64?
    /// Why the last snapshot could not be written, until one is.
    var fault: String?
    var failures = 0
    var faultLog = RateLimitedLog(interval: .seconds(10))
    var lastWritten = ContinuousClock.now
    /// A burst (a long output line, a large snapshot) leaves its passing allocations as
    /// free heap that the C library keeps; set when one happened.
    var burstToTrim = false
    var lastTrim = (at: ContinuousClock.now, processed: 0)
}

/// Write-behind: every `store.snapshotInterval` the changed locations go to the state file,
/// and the journal's segments they cover are deleted.
extension LivePipeline {
    /// Once a burst or many updates are over (nothing waits for the broker), hands the
    /// free heap's pages back to the system, so that the resident memory is the state's
    /// again: at most every 5 s (a trim walks the heap's free lists: milliseconds).
    func trimHeapAfterBurst() {
        if publisher.waiting >= Self.burstSize { snapshots.burstToTrim = true }
        guard snapshots.burstToTrim || processed - snapshots.lastTrim.processed >= Self.burstSize, publisher.waiting == 0,
            ContinuousClock.now - snapshots.lastTrim.at >= .seconds(5)
        else { return }
        snapshots.burstToTrim = false
        snapshots.lastTrim = (.now, processed)
        livedata_release_free_heap()
    }

    /// How many waiting publications, changed locations in one snapshot, or updates since
    /// the last trim make a burst.
    static let burstSize = 65_536

    /// Writes every changed location to the state file, with the journal position they
    /// bring the snapshot up to (the journal's segments before it are then deleted).
    public func flush() async {
        snapshots.lastWritten = .now
        guard let writer = snapshots.writer else {
            // Nothing is written: forget the changes without building records of them.
            core.discardDirty()
            _ = core.store.takeVacated()
            return
        }
        let changed = core.store.takeChangedLocations()
        if changed.count >= Self.burstSize { snapshots.burstToTrim = true }
        let vacated = core.store.takeVacated()
        let position = intake.journal != nil ? snapshots.appliedPosition : nil
        guard changed.count > 0 || !vacated.isEmpty || position != snapshots.coveredPosition else { return }
        // In parts, each its own transaction, so that the records of a large batch are never
        // all in memory at once; the journal position goes with the last part, once
        // everything it covers is written.
        var start = 0
        repeat {
            let end = min(start + Self.snapshotPart, changed.count)
            let records = EncodedRecords(changed, in: start..<end, of: core.store)
            let isLast = end == changed.count
            if let failure = await writer.write(
                records, deleting: start == 0 ? vacated : [], journalPosition: isLast ? position : nil,
                journal: isLast ? intake.journal : nil)
            {
                // Kept for the next try: the store still holds these records, and the journal
                // everything since the last snapshot.
                core.store.markDirty(changed, in: start..<changed.count)
                if start == 0 { core.store.returnVacated(vacated) }
                snapshots.failures += 1
                snapshots.fault = "cannot write the state file: \(failure)"
                if let suppressed = snapshots.faultLog.admit() {
                    let more = suppressed > 0 ? " (\(suppressed) more failures since the last report)" : ""
                    logger.error(
                        "cannot write the state file (\(failure)); the journal keeps every update until it can\(more)",
                        metadata: ["store.path": "\(config.store.path)"])
                }
                return
            }
            start = end
        } while start < changed.count
        if snapshots.fault != nil {
            logger.notice("the state file is writable again", metadata: ["store.path": "\(config.store.path)"])
        }
        snapshots.fault = nil
        snapshots.coveredPosition = position
    }

    /// How many records a snapshot writes in one transaction at most. The changed locations
    /// come in the order of their rows (``LiveStore/takeChangedLocations()``), so parts do
    /// not rewrite each other's pages, and a part can be small: its records (a style inline
    /// each, a few hundred bytes) are passing memory, fresh pages the kernel clears. At a
    /// million new locations, 8,192 instead of 65,536 took the peak resident memory from
    /// 506–507 to 492–494 MB, and the CPU per update from 16.1–16.8 to 15.3–15.8 µs.
    static let snapshotPart = 8_192

    /// Why updates cannot be kept right now (the journal or the state file cannot be
    /// written), if they cannot: readiness reports it.
    public var storageFault: String? { intake.storageFault ?? snapshots.fault }
}
