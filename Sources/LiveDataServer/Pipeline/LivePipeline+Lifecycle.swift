import LiveDataConfiguration
import LiveState
import LiveStatePersistence
import Mosquitto

/// The pipeline's interface to its services (start, subscriptions, stop), its routing of
/// what stages return, and its answers to the HTTP queries.
extension LivePipeline {
    public typealias Statistics = PipelineStatistics

    // MARK: - The start

    /// Restores the stored state and replays the journal's tail, publishing nothing yet
    /// (``startProgress`` follows it; a stop asked for meanwhile ends it with nothing
    /// written). The first convergence follows the connection (see ``connected()``).
    /// - Throws: when the state file cannot be opened or read; `CancellationError` when
    ///   stopped.
    public func start() throws {
        defer { if checkpoints.isOpen || config.store.isInMemory { startProgress.set(.started) } }
        if config.store.isInMemory { return }
        var restored = try processing.restore(fromFile: config.store.path, keeping: partition?.keeps, progress: startProgress)
        if startProgress.isStopRequested { throw CancellationError() }
        partition?.dropped(restored.dropped, path: config.store.path)
        checkpoints.restored(checkpoint: restored.checkpoint, journalPosition: restored.journalPosition)
        replica?.startedEmpty = restored.count == 0
        // Placements the file held twice are cleared; what changed while the daemon was
        // down, the first convergence publishes.
        for address in processing.core.takeStaleStyleAddresses() { publishing.send(publishing.topics.clearing(styleOf: address)) }
        if let journal = intake.journal {
            // What arrived after the snapshot, through the same way in as live updates.
            try processing.replay(journal, from: restored.journalPosition, progress: startProgress) { record in
                handle(
                    topic: record.topic, payload: record.payload, receivedAt: record.receivedAt, retain: record.retain,
                    journalEnd: record.end, arrived: nil)
            }
        }
        processing.finishRestore(&restored)
        // The checkpoint vouches for the styles at the stop, not for what changed since.
        if processing.replayed.records > 0 || restored.changed > 0 { checkpoints.forgetRestoredCheckpoint() }
        try checkpoints.open()
    }

    /// What the start's journal replay found.
    public var replayed: IntakeJournal.ReplayStatistics { processing.replayed }

    // MARK: - The broker

    /// Subscribes the criteria, the arrivals, the lease and the bridge's state (again by the
    /// client after every reconnection); a refused filter is kept in ``refusedSubscriptions``.
    /// - Throws: when the client cannot subscribe at all (it is shut down).
    public func subscribe() async throws {
        let qos = MQTTQoS(rawValue: Int32(config.broker.qos)) ?? .atLeastOnce
        for criteria in config.partitionSubscriptions { try await connection.subscribe(criteria.filter.string, qos: qos) }
        for filter in partition?.arrivalFilters ?? [] { try await connection.subscribe(filter, qos: .atLeastOnce) }
        if let replica {
            try await connection.subscribe(replica.ownerTopic, qos: .atLeastOnce)
            try await connection.subscribe(replica.syncTopic, qos: .atLeastOnce)
            replica.watching()
        }
        if let bridge = partition?.bridgeStateTopic { try await connection.subscribe(bridge, qos: .atLeastOnce) }
    }

    public func markReady() { connection.markSubscribed() }

    func connectionChanged(_ which: ConnectionPair.Connection, _ state: MQTTConnectionState) {
        if connection.changed(which, to: state, cleanStart: config.broker.cleanStart) { connected() }
    }

    /// Publishes `online`, and converges unless nothing can have diverged; after every
    /// (re)connection (of either connection, once both are up).
    public func connected() {
        let status = publishing.topics.statusPublication(online: true)
        if let replica {
            // A replica's status goes on the connection of its own, whatever its role.
            try? output.send(status.topic, payload: status.payload, qos: .atLeastOnce, retain: status.retain)
            replica.reconnected()
            return
        }
        publishing.send(status)
        checkpoints.dropBarrier()
        // The legends wait for the retained ones to be read: only those that differ go out.
        publishing.holdLegends()
        // The broker kept both sessions, so its store: a marker it holds tells what it has.
        let present = client.session.present && output.session.present
        if present, publishing.hasTrustedVersions, publishing.recentIsWhole, let acknowledged = checkpoints.markers.acknowledged {
            // What was handed over after the last marker it acknowledged is sent again.
            checkpoints.setCheck(.resumed(acknowledged))
        } else if present, !publishing.hasTrustedVersions, let restored = checkpoints.markers.restoredCheckpoint {
            // A start after a clean stop: what came in meanwhile is held until it is known.
            checkpoints.setCheck(.start(restored))
        } else {
            checkpoints.setCheck(nil)
        }
        startConvergence()
        drainOutput()
    }

    func startConvergence() {
        if convergence.request() { jobs.start(.converge) }
    }

    /// Runs a job of a stage's (see ``PipelineJobs``).
    func perform(_ job: PipelineJobs.Job) async {
        switch job {
        case .converge:
            let stop = convergence.stopSignal()
            var again = false
            await withTaskGroup(of: Bool.self) { group in
                group.addTask { await self.convergeUntilCurrent() }
                group.addTask {
                    await stop.wait()
                    return false
                }
                again = await group.next() ?? false
                group.cancelAll()
            }
            if again { startConvergence() }
        case .hold(let holder, let epoch):
            if let step = await replica?.hold(holder, epoch: epoch, isolation: self) { route(step) }
        case .renew(let holder, let epoch):
            await replica?.publishLease(on: holder, epoch: epoch)
        case .disconnect(let connection):
            await connection.disconnect()
        case .marker(let marker):
            await checkpoints.deliver(marker)
        case .republishClears:
            if await partition?.republishClears(checkpoints: checkpoints, publishing: { self.publishes }) == true {
                jobs.start(.republishClears)
            }
        case .open(let gate):
            await gate.open()
        }
    }

    /// - Returns: whether another run was asked for after this one was stopped.
    private func convergeUntilCurrent() async -> Bool {
        await convergence.runUntilCurrent(isolation: self, configuration: client.configuration) { self.knownDatasets() }
    }

    /// Carries out what the replica stage decided.
    func route(_ step: ReplicaStage.Step) {
        switch step {
        case .none:
            break
        case .hold(let holder, let epoch):
            jobs.start(.hold(holder, epoch: epoch))
        case .renew(let holder, let epoch):
            jobs.start(.renew(holder, epoch: epoch))
        case .activate(let holder, let epoch, let resending):
            publishing.publish(on: holder, epoch: epoch)
            checkpoints.setCheck(nil)
            if let resending {
                convergence.takeOver(resending: resending, datasets: knownDatasets())
                jobs.start(.open(convergence.converged))
            } else {
                startConvergence()
            }
            drainOutput()
        case .depose(let reason, let closing):
            let wasActive = publishing.isOnLease
            publishing.publish(on: publishing.home, epoch: nil)
            checkpoints.setCheck(nil)
            convergence.stop()
            publishing.resetCoalescer()
            if let closing { jobs.start(.disconnect(closing)) }
            logger.warning(
                wasActive ? "standing by, publishing nothing: \(reason)" : "gave up the claim: \(reason)",
                metadata: ["failover.epoch": "\(replica?.highestEpoch ?? 0)"])
        }
    }

    /// The datasets this daemon serves: its partition's, or those its subscriptions name,
    /// and those it holds locations of.
    func knownDatasets() -> Set<String> {
        let configured = config.partition?.datasets ?? Set(config.subscriptions.compactMap { $0[.dataset] })
        return configured.union(processing.core.datasets)
    }

    /// Publishes a sync marker when one is due. A failover replica's lease connection ends
    /// with its epoch: the active publishes the failover markers instead, in line after its
    /// styles, which its standbys follow (``FailoverMarkers``).
    func publishMarkerIfDue() {
        if let replica {
            guard publishing.hasTrustedVersions, let marker = replica.dueMarker(idle: publishing.isIdle) else { return }
            publishing.send(marker)
            drainOutput()
            return
        }
        guard let marker = checkpoints.dueMarker() else { return }
        jobs.start(.marker(marker))
    }

    /// Writes every changed location to the state file (see ``CheckpointStage/flush()``).
    public func flush() async { await checkpoints.flush() }

    // MARK: - The stop

    /// Publishes the styles that wait for their interval, then `offline`.
    public func publishOffline() async {
        publishing.sendCoalesced(all: true)
        drainOutput()
        await publishing.publishOffline()
    }

    /// At a clean stop: the stop's checkpoint (``CheckpointStage/stop(timeout:settle:receiving:)``),
    /// after every summary that waits for its interval: one published after the marker would
    /// void it.
    public func checkpoint(timeout: Duration = .seconds(5)) async {
        guard replica == nil else { return }
        publishSummaries(now: .now, all: true)
        drainOutput()
        var processed = processing.processed
        await checkpoints.stop(timeout: timeout) {
            defer { processed = processing.processed }
            return processing.processed != processed
        }
    }

    /// At a clean stop: the active hands on what waits, then releases its lease.
    public func releaseLease(timeout: Duration = .seconds(3)) async {
        await replica?.release(
            timeout: timeout, pending: { publishing.waiting > 0 || publishing.client.inFlight > 0 }, drain: { drainOutput() },
            stopPublishing: { route($0) })
    }

    // MARK: - What the services and the HTTP routes ask

    public var statistics: Statistics { Statistics(self) }

    /// Restored, connected, subscribed and converged with the broker at least once. A
    /// failover replica: subscribed and joined, and, when active, converged.
    public var isReady: Bool {
        guard let replica else { return connection.isSubscribed && hasConverged }
        return connection.isSubscribed && replica.eligible && (!replica.isActive || hasConverged)
    }

    /// The first convergence (or a checkpoint that made it needless) has finished.
    public var hasConverged: Bool { publishing.hasTrustedVersions }
    /// Why the last convergence failed, until one finishes.
    public var convergenceFault: String? { convergence.fault }
    /// Why updates cannot be kept right now (the journal or the state file cannot be
    /// written), if they cannot: readiness reports it.
    public var storageFault: String? { intake.storageFault ?? checkpoints.fault }
    /// Filters the broker refused (not retried; the others go on). Readiness names them.
    public var refusedSubscriptions: [String] { connection.refused }

    /// The broker connection's state: the first of the connections that is not connected
    /// (the receiving one before the output one), else connected.
    public nonisolated var brokerState: MQTTConnectionState {
        connections.lazy.map(\.state).first { $0 != .connected } ?? .connected
    }

    /// Returns once the first convergence has finished (see ``isReady``).
    public func waitUntilConverged() async { await convergence.converged.wait() }

    /// Returns once the daemon may serve: converged, or, a failover replica, joined (a
    /// standby converges nothing until it takes over).
    public func waitUntilServing() async {
        if let replica { await replica.joined.wait() } else { await waitUntilConverged() }
    }

    /// Stops processing updates until ``resumeProcessing()`` (tests only).
    package func stallProcessing() { stallForTesting = StartupGate() }

    package func resumeProcessing() async {
        await stallForTesting?.open()
        stallForTesting = nil
    }

    // MARK: - Failover

    /// This replica's role, as `/readyz`, `/metrics` and `STATUS=` say it; nil without
    /// failover.
    public var replicaRole: ReplicaRole? { replica?.role }

    /// Becomes able to take over (see ``ReplicaStage/join(importState:)``).
    public func join() async {
        await replica?.join { processing.importState($0) }
    }

    /// A part of the state for a replica that copies it (`GET /v1/state`): the values of up
    /// to ``PeerState/partSize`` locations from `position`, in the order they were first
    /// seen; nil while this replica has not joined (its own state may be incomplete). The
    /// route asks for one part at a time and encodes it off the pipeline, which takes
    /// updates between two parts: a copy of a million locations never holds it up for more
    /// than a part's worth of copying.
    func stateCopyPart(from position: Int) -> PeerState.Part? {
        guard replica?.eligible ?? true else { return nil }
        let end = position + PeerState.partSize
        let locations = processing.core.values(ofLocationsAt: position..<end)
        return PeerState.Part(locations: locations, next: end < processing.core.locationCount ? end : nil)
    }

    // MARK: - Changes while running

    /// Hides or shows a layer and re-publishes what that changes.
    /// - Returns: how many locations changed.
    @discardableResult
    public func setLayer(_ layer: String, hidden: Bool) -> Int {
        let changes = processing.core.setLayer(layer, hidden: hidden, now: .now)
        for change in changes { queue(change, arrived: nil) }
        drainOutput()
        return changes.count
    }

    /// Takes a reloaded config's rules, styles and criteria (not its broker settings, its
    /// instance or its partition: those take a restart) and re-publishes what changed.
    /// - Returns: how many locations changed.
    @discardableResult
    public func reload(_ newConfig: LiveDataConfig) async -> Int {
        if newConfig.partition != config.partition || newConfig.instance != config.instance {
            logger.warning("the reloaded config changes instance or partition: that takes a restart; the rest is taken now")
        }
        let oldFilters = Set(config.partitionSubscriptions.map(\.filter.string))
        config.ruleSet = newConfig.ruleSet
        config.subscriptions = newConfig.subscriptions
        publishing.ruleSet = newConfig.ruleSet
        let newFilters = Set(config.partitionSubscriptions.map(\.filter.string))
        let changes = processing.core.reload(ruleSet: newConfig.ruleSet, subscriptions: newConfig.subscriptions, now: .now)
        replica?.rulesReloaded()
        for change in changes { queue(change, arrived: nil) }
        await flush()
        await checkpoints.setRulesFingerprint(processing.core.rulesFingerprint)
        publishing.forgetLegends()
        for dataset in knownDatasets() { publishing.publishLegend(dataset) }
        drainOutput()
        await connection.resubscribe(from: oldFilters, to: newFilters, qos: MQTTQoS(rawValue: Int32(config.broker.qos)) ?? .atLeastOnce)
        return changes.count
    }
}
