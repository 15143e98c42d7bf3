import CMalloc
import LiveState
import LiveStatePersistence
import Logging
import Mosquitto

/// The checkpoint stage: what is written to the state file and what vouches for the broker.
/// It owns the snapshot's bookkeeping (the writer, the journal positions, the last fault,
/// the heap's trimming) and the sync markers (``SyncMarkers``: the retained markers at
/// `{prefix}/checkpoint/{client id}` and its alternate, the stop's checkpoint).
///
/// Write-behind: every `store.snapshotInterval` the changed locations go to the state file,
/// and the journal's segments they cover are deleted. The markers let a start after a clean
/// stop, or a reconnection the broker resumed, skip reading back every style.
final class CheckpointStage {
    private(set) var markers = SyncMarkers()
    /// Markers the broker acknowledged.
    private(set) var markersAcknowledged = 0
    /// Set once the start has restored the state file and handed it to the writer.
    private var writer: StoreWriter?
    /// The journal position of the last update applied: a snapshot written now covers it.
    private var appliedPosition: UInt64 = 0
    /// The journal position the last written snapshot covers.
    private var coveredPosition: UInt64?
    /// Why the last snapshot could not be written, until one is.
    private(set) var fault: String?
    private(set) var failures = 0
    private var faultLog = RateLimitedLog(interval: .seconds(10))
    private var lastWritten = ContinuousClock.now
    /// A burst (a long output line, a large snapshot) leaves its passing allocations as free
    /// heap that the C library keeps; set when one happened.
    private var burstToTrim = false
    private var lastTrim = (at: ContinuousClock.now, processed: 0)

    private let core: LiveCore
    private let output: OutputStage
    /// The output's connection, which the markers go on.
    private let client: MQTTClient
    private let journal: IntakeJournal?
    private let path: String
    private let interval: Duration
    private let logger: Logger
    /// `{prefix}/checkpoint/{client id}` and `{prefix}/checkpoint/{client id}/alternate`:
    /// where the markers and a clean stop's checkpoint go, taking turns (``SyncMarkers/slot``).
    let topics: [String]
    /// What the markers' counts are of: the partition's shares, or everything.
    let scope: String

    init(
        core: LiveCore, output: OutputStage, client: MQTTClient, journal: IntakeJournal?, path: String, interval: Duration,
        topic: String, scope: String, logger: Logger
    ) {
        self.core = core
        self.output = output
        self.client = client
        self.journal = journal
        self.path = path
        self.interval = interval
        topics = [topic, topic + "/alternate"]
        self.scope = scope
        self.logger = logger
    }

    /// How many waiting publications, changed locations in one snapshot, or updates since
    /// the last trim make a burst.
    static let burstSize = 65_536

    /// How many records a snapshot writes in one transaction at most: the changed locations
    /// come in the order of their rows, so parts do not rewrite each other's pages, and a
    /// small part keeps the records' passing memory small (docs/performance.md).
    static let snapshotPart = 8_192

    // MARK: - The start

    /// The start restored the state file (its checkpoint, and the journal position it
    /// covers), and may now write it.
    func restored(checkpoint: String?, journalPosition: UInt64) {
        markers.restoredCheckpoint = checkpoint
        appliedPosition = journalPosition
    }

    /// The journal or the catch-up changed the state since the last stop: its checkpoint no
    /// longer vouches for the styles.
    func forgetRestoredCheckpoint() { markers.restoredCheckpoint = nil }

    func open() throws { writer = try StoreWriter(path: path, logger: logger) }

    var isOpen: Bool { writer != nil }

    /// An update up to `journalEnd` was applied.
    func applied(journalEnd: UInt64) {
        if journalEnd > appliedPosition { appliedPosition = journalEnd }
    }

    // MARK: - Snapshots

    var isDue: Bool { ContinuousClock.now - lastWritten >= interval }

    /// Writes every changed location to the state file, with the journal position they
    /// bring the snapshot up to (the journal's segments before it are then deleted).
    nonisolated(nonsending) func flush() async {
        lastWritten = .now
        guard let writer else {
            // Nothing is written: forget the changes without building records of them.
            core.discardSnapshotChanges()
            return
        }
        let (changed, vacated) = core.takeSnapshotChanges()
        if changed.count >= Self.burstSize { burstToTrim = true }
        let position = journal != nil ? appliedPosition : nil
        guard changed.count > 0 || !vacated.isEmpty || position != coveredPosition else {
            _ = await writeClears()
            return
        }
        // In parts, each its own transaction, so that the records of a large batch are never
        // all in memory at once; the journal position goes with the last part, once
        // everything it covers is written. Each part carries the clears a bridge may lose
        // made up to the moment its records are encoded (the pipeline runs on while a part
        // is written, so a record may hold a later state than the part before): no record
        // and no journal position is ever written ahead of a clear it implies, since a
        // restart that finds a location already moved in its record, or the update that
        // moved it behind the journal position, has nothing to note that clear again from.
        var start = 0
        repeat {
            let end = min(start + Self.snapshotPart, changed.count)
            let records = EncodedRecords(changed, in: start..<end, of: core)
            let clears = output.takeUnwrittenClears()
            let isLast = end == changed.count
            if let failure = await writer.write(
                records, deleting: start == 0 ? vacated : [], cleared: clears, journalPosition: isLast ? position : nil,
                journal: isLast ? journal : nil)
            {
                // Kept for the next try: the store still holds these records, and the journal
                // everything since the last snapshot.
                output.returnUnwrittenClears(clears)
                core.returnSnapshotChanges(changed, in: start..<changed.count, vacated: start == 0 ? vacated : nil)
                noteWriteFailure(failure)
                return
            }
            start = end
        } while start < changed.count
        if fault != nil { logger.notice("the state file is writable again", metadata: ["store.path": "\(path)"]) }
        fault = nil
        coveredPosition = position
        // The clears made while the last part was written, and the horizon's prune when due.
        _ = await writeClears()
    }

    /// Writes the clears recorded since the last snapshot (with a watched bridge), and, when
    /// due, forgets those past the horizon.
    /// - Returns: whether they are written (else they are kept for the next try, and so is
    ///   the snapshot).
    nonisolated(nonsending) func writeClears(pruning: Bool = false) async -> Bool {
        guard let writer, output.recordsClears else { return true }
        let clears = output.takeUnwrittenClears()
        var failure = await writer.recordCleared(clears)
        if failure == nil, let cutoff = output.clearsPruneCutoff(always: pruning),
            case .failure(let error) = await writer.forgetCleared([], before: cutoff)
        {
            failure = error
        }
        guard let failure else { return true }
        output.returnUnwrittenClears(clears)
        noteWriteFailure(failure)
        return false
    }

    /// Counts a failed write of the state file, holds readiness on it, and logs it (at most
    /// as often as the fault log admits).
    private func noteWriteFailure(_ failure: StateDatabase.Failure) {
        failures += 1
        fault = "cannot write the state file: \(failure)"
        if let suppressed = faultLog.admit() {
            let more = suppressed > 0 ? " (\(suppressed) more failures since the last report)" : ""
            logger.error(
                "cannot write the state file (\(failure)); the journal keeps every update until it can\(more)",
                metadata: ["store.path": "\(path)"])
        }
    }

    /// The state file's recorded clears after `topic`, at most `limit`, in topic order;
    /// `nil` without a state file or when it cannot be read.
    nonisolated(nonsending) func clearedTopics(after topic: String?, limit: Int) async -> [String]? {
        guard let writer else { return nil }
        switch await writer.clearedTopics(after: topic, limit: limit) {
        case .success(let topics): return topics
        case .failure(let failure):
            logger.error("cannot read the cleared topics from the state file: \(failure)", metadata: ["store.path": "\(path)"])
            return nil
        }
    }

    /// Forgets recorded clears in the state file (their topics are published again, or not
    /// this daemon's).
    nonisolated(nonsending) func forgetCleared(_ topics: [String]) async {
        guard let writer, !topics.isEmpty else { return }
        if case .failure(let failure) = await writer.forgetCleared(topics) {
            logger.warning("cannot forget cleared topics in the state file: \(failure)", metadata: ["store.path": "\(path)"])
        }
    }

    /// Records the rules' fingerprint with the state (after a reload).
    nonisolated(nonsending) func setRulesFingerprint(_ fingerprint: String) async {
        await writer?.setRulesFingerprint(fingerprint)
    }

    /// Once a burst or many updates are over (nothing waits for the broker), hands the free
    /// heap's pages back to the system, so that the resident memory is the state's again:
    /// at most every 5 s (a trim walks the heap's free lists).
    func trimHeapAfterBurst(waiting: Int, processed: Int) {
        if waiting >= Self.burstSize { burstToTrim = true }
        guard burstToTrim || processed - lastTrim.processed >= Self.burstSize, waiting == 0,
            ContinuousClock.now - lastTrim.at >= .seconds(5)
        else { return }
        burstToTrim = false
        lastTrim = (.now, processed)
        livedata_release_free_heap()
    }

    // MARK: - Sync markers

    /// What the next convergence checks first, if anything.
    var check: SyncMarkers.Check? { markers.check }

    /// Sets what the next convergence checks first; nil for a full convergence.
    func setCheck(_ check: SyncMarkers.Check?) {
        markers.check = check
        if case .start = check { markers.restoredCheckpoint = nil }
    }

    /// A marker that waited for the connections' acknowledgements starts over.
    func dropBarrier() { markers.barrier = nil }

    /// A marker held by the broker was checked: everything handed over so far is marked.
    func adopt(_ payload: String, position: Int) { markers.adopt(payload, position: position) }

    /// The output's accepted connections now (``MQTTClient/acceptedConnections``): a run
    /// that checks the broker notes them as it begins, for ``verified(since:)``.
    var outputConnections: Int { client.acceptedConnections }

    /// A check of the last marker or a convergence that began under `connections` is done:
    /// markers go out again, unless the output reconnected meanwhile.
    func verified(since connections: Int) { markers.verified(since: connections, now: client.acceptedConnections) }

    /// The marker to publish now, if one is due (after a drain of what waits), with the
    /// publications it follows: only while the versions are known and the output is
    /// connected. A marker of an output of several connections waits for the others'
    /// acknowledgements first (``SyncMarkers/Barrier``).
    func dueMarker() -> Marker? {
        guard output.hasTrustedVersions, client.state == .connected else { return nil }
        let connections = client.acceptedConnections
        if markers.barrier == nil {
            guard markers.isDue(now: .now, handedOver: output.handedOver, connections: connections) else { return nil }
            output.drain()
            guard client.connectionCount > 1 else {
                return nextMarker(position: output.handedOver, locations: markedLocations, connections: connections)
            }
            markers.barrier = SyncMarkers.Barrier(
                position: output.handedOver, targets: (1..<client.connectionCount).map { client.handedOver(connection: $0).sent },
                locations: markedLocations, connections: connections)
        }
        guard let barrier = markers.barrier else { return nil }
        // Acknowledgements counted across a reconnection may be a restarted broker's.
        guard barrier.connections == connections else {
            markers.barrier = nil
            return nil
        }
        guard barrier.targets.indices.allSatisfy({ client.handedOver(connection: $0 + 1).acknowledged >= barrier.targets[$0] }) else {
            return nil
        }
        markers.barrier = nil
        return nextMarker(position: barrier.position, locations: barrier.locations, connections: connections)
    }

    /// Locations with a style handed over: every waiting publication may be a location's
    /// first style, and those are not counted.
    private var markedLocations: Int { core.locationCount - output.waiting }

    /// The next marker, after the first `position` publications, fallen due while the
    /// output's accepted connections were `connections`, and the topic it goes to.
    private func nextMarker(position: Int, locations: Int, connections: Int) -> Marker {
        let payload = markers.next(locations: locations, scope: scope, connections: connections)
        return Marker(payload: payload, position: position, topic: topics[markers.slot])
    }

    /// A sync marker to publish: its payload, the publications it follows, its topic.
    struct Marker: Sendable {
        var payload: String
        var position: Int
        var topic: String
    }

    /// Publishes a marker and notes whether the broker acknowledged it (`timeout`: how long
    /// to wait for that, at most) on the connections it fell due on. What it covers is then
    /// known to be stored.
    /// - Returns: whether it vouches for what it covers.
    @discardableResult
    nonisolated(nonsending) func deliver(_ marker: Marker, timeout: Duration? = nil) async -> Bool {
        let acknowledged = await publishRetained(marker.payload, to: marker.topic, timeout: timeout)
        guard markers.done(marker.payload, position: marker.position, acknowledged: acknowledged, connections: client.acceptedConnections)
        else { return false }
        markersAcknowledged += 1
        output.forgetRecent(before: marker.position)
        return true
    }

    /// Publishes `payload` retained at QoS 1 on the output's first connection.
    /// - Returns: whether the broker acknowledged it within `timeout` (nil: no bound).
    private nonisolated(nonsending) func publishRetained(_ payload: String, to topic: String, timeout: Duration?) async -> Bool {
        let client = client
        let publish: @Sendable () async throws -> Void = {
            try await client.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)
        }
        guard let timeout else { return (try? await publish()) != nil }
        return ((try? await withTimeout(timeout, publish)) ?? nil) != nil
    }

    // MARK: - The stop's checkpoint

    /// At a clean stop, while still connected: waits (at most `timeout`) until everything
    /// put in line has been acknowledged, then publishes a retained checkpoint to both
    /// markers' topics and waits (at most 2 s each) for their acknowledgements. If nothing is put in line after it, the state file
    /// records it with the last snapshot (``recordCheckpoint()``); the next start, finding the
    /// same checkpoint at a broker that resumed its session, skips reading every style back.
    ///
    /// `receiving` tells whether updates still come in: a checkpoint then cannot hold (what
    /// comes after it is replayed from the journal at the next start), and the wait ends
    /// after `settle` instead of `timeout`.
    nonisolated(nonsending) func stop(timeout: Duration, settle: Duration = .milliseconds(500), receiving: () -> Bool) async {
        guard writer != nil, output.hasTrustedVersions, client.state == .connected else { return }
        guard isVerifiedNow() else { return }
        let started = ContinuousClock.now
        while output.waiting > 0 || client.inFlight > 0 || markers.inFlight {
            let waited = ContinuousClock.now - started
            guard waited < timeout, client.state == .connected, waited < settle || !receiving() else {
                logger.notice(
                    "stopping with \(output.waiting + client.inFlight) publications not yet acknowledged\(receiving() ? " while updates still come in" : ""): the next start converges with the broker")
                return
            }
            output.drain()
            try? await Task.sleep(for: .milliseconds(10))
        }
        let puts = output.puts
        let connections = client.acceptedConnections
        guard isVerifiedNow() else { return }
        // Nothing is in flight on any connection: the marker covers everything handed over.
        markers.barrier = nil
        let marker = nextMarker(position: output.handedOver, locations: markedLocations, connections: connections)
        // At both topics: the next start finds it at both, unless a marker was published since
        // (another run's under this client id), and then reads every style back.
        if await deliver(marker, timeout: .seconds(2)),
            await publishRetained(marker.payload, to: topics[1 - markers.slot], timeout: .seconds(2)),
            markers.isVerified(under: client.acceptedConnections)
        {
            markers.stopCheckpoint = (marker.payload, puts)
        } else {
            logger.notice("the broker did not acknowledge the stop's marker: the next start converges with the broker")
        }
    }

    /// Whether what the broker holds was verified since the output's last reconnection;
    /// if not, a stop's checkpoint would vouch for what a restarted broker may lack.
    private func isVerifiedNow() -> Bool {
        guard markers.isVerified(under: client.acceptedConnections) else {
            logger.notice(
                "stopping before what the broker holds was checked since the output's last reconnection: the next start converges with the broker")
            return false
        }
        return true
    }

    /// Writes the stop's checkpoint into the state file when it still holds: nothing was put
    /// in line after it, and the last snapshot was written.
    nonisolated(nonsending) func recordCheckpoint() async {
        guard let writer, let stop = markers.stopCheckpoint else { return }
        guard output.puts == stop.puts, fault == nil else {
            logger.notice(
                "\(fault == nil ? "\(output.puts - stop.puts) publications went out after the stop's marker" : "the last snapshot failed"): the next start converges with the broker")
            return
        }
        await writer.setCheckpoint(stop.payload)
    }
}
