import AsyncAlgorithms
import LiveDataConfiguration
import LiveState
import LiveTopics
import Logging
import Mosquitto

/// The pipeline: one actor, so that an update crosses one thread (the network thread's
/// intake to here) before the output's client takes it, composed of stages that each own
/// their state and offer a small interface:
/// - ``ProcessingStage``: the core, an update into a change;
/// - ``OutputStage``: what goes to the broker, and when (publisher, coalescer, versions,
///   held changes, legends);
/// - ``ConvergenceStage``: agreeing with what the broker retains;
/// - ``CheckpointStage``: the state file's snapshots and the sync markers;
/// - ``ConnectionStage``: subscriptions and what the connections said;
/// - ``ReplicaStage`` (failover only) and ``PartitionStage`` (a partition only);
/// - ``ViewerFeed``: the floor view's events.
/// The pipeline holds the stages and routes what one returns to the next; it keeps no
/// job's state itself. Work that outlives a call runs as a child task of ``serve(tickInterval:)``
/// (``PipelineJobs``). The HTTP routes and the event stream ask through ``LiveQueries``.
/// docs/architecture.md follows one update through all of it.
public actor LivePipeline {
    /// The connection that receives: subscriptions, the updates, the session.
    nonisolated let client: MQTTClient
    /// The connection that publishes everything, in the order handed over: the receiving
    /// one, or a second connection (``BrokerSettings/outputConnection``).
    nonisolated let output: MQTTClient
    /// The daemon's connections, each once (receiving, then output).
    nonisolated let connections: [MQTTClient]
    public nonisolated let intake: Intake
    /// The floor view's live feed: what is published, for the viewers in scope.
    public nonisolated let events: EventHub
    /// How far ``start()`` has come, read without this actor (a restore keeps it busy).
    public nonisolated let startProgress = StartProgress()
    let logger: Logger
    let metrics: DaemonMetrics
    /// The configuration; a reload replaces its rules and criteria.
    var config: LiveDataConfig

    let processing: ProcessingStage
    let publishing: OutputStage
    let convergence: ConvergenceStage
    let checkpoints: CheckpointStage
    let connection: ConnectionStage
    let feed: ViewerFeed
    /// With `partition.failover`: which replica publishes.
    let replica: ReplicaStage?
    /// With a partition: hand-overs and the watched bridge.
    let partition: PartitionStage?
    let jobs = PipelineJobs()
    /// Holds the processing of updates while set (tests of the watchdog).
    var stallForTesting: StartupGate?
    /// Whether a batch is taken and held by ``stallForTesting`` (tests of the watchdog).
    package private(set) var holdsStalledBatch = false

    /// Builds the stages; ``start()`` restores the stored state.
    public init(
        config: LiveDataConfig, client: MQTTClient, output: MQTTClient? = nil, intake: Intake,
        metrics: DaemonMetrics = DaemonMetrics(), logger: Logger, events: EventHub = EventHub(), window: OutputWindow = OutputWindow()
    ) {
        self.config = config
        self.events = events
        self.metrics = metrics
        self.client = client
        self.output = output ?? client
        connections = output.map { $0 === client ? [client] : [client, $0] } ?? [client]
        self.intake = intake
        self.logger = logger
        let stages = PipelineStages(config: config, client: client, output: self.output, intake: intake, window: window, logger: logger)
        processing = stages.processing
        publishing = stages.publishing
        convergence = stages.convergence
        checkpoints = stages.checkpoints
        connection = ConnectionStage(client: client, shared: connections.count == 1, logger: logger)
        feed = ViewerFeed(hub: events)
        replica = stages.replica
        partition = stages.partition
        if let replica = stages.replica { stages.publishing.permit = { replica.mayPublish } }
    }

    /// Processes received updates, a batch (one network pass's) at a time, until the intake
    /// closes. It starts at once: a backlog must never wait for a convergence whose read it
    /// would hold up.
    public func run() async {
        // While a full convergence reads the broker's retained styles, the live updates are
        // taken a few at a time and the read's batches go first: a live change of a
        // location whose retained style is still to be read waits for the read.
        while let batch = await intake.queue.next(limit: convergence.isReading ? Self.liveBatchWhileReading : .max) {
            if let stall = stallForTesting {
                holdsStalledBatch = true
                await stall.wait()
                holdsStalledBatch = false
            }
            handle(batch)
            intake.queue.recycle(batch)
            drainOutput()
            // The active's last marker read back is covered once nothing waits.
            if let replica, publishing.isIdle { replica.outputIdle() }
        }
    }

    /// The most live updates handled at a time while a full convergence reads (see ``run()``).
    static let liveBatchWhileReading = 64

    /// Runs everything until the client disconnects: messages, what follows every
    /// (re)connection, ``tick()`` every `tickInterval`, and the stages' jobs. Then writes
    /// what is left.
    public func serve(tickInterval: Duration = .milliseconds(100)) async {
        // Every (re)connection, the one before this call included, is in the event stream.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            group.addTask {
                for await event in self.client.events {
                    if case .state(let state) = event { await self.connectionChanged(.receiving, state) }
                }
                // The client has ended: nothing more comes in; what waits is still processed.
                self.intake.queue.close()
            }
            if connections.count > 1 {
                group.addTask {
                    for await event in self.output.events {
                        if case .state(let state) = event { await self.connectionChanged(.output, state) }
                    }
                }
            }
            let window = publishing.window
            group.addTask {
                // The broker's window has room again.
                for await _ in window.opened { await self.drainOutput() }
            }
            group.addTask {
                await self.tick()
                for await _ in AsyncTimerSequence(interval: tickInterval, clock: .continuous) { await self.tick() }
            }
            if let interval = publishing.coalescingInterval {
                // The trailing edge of `output.minInterval`: late by at most a quarter of it.
                let cadence = max(min(interval / 4, .milliseconds(100)), .milliseconds(5))
                group.addTask {
                    for await _ in AsyncTimerSequence(interval: cadence, clock: .continuous) { await self.sendDueCoalesced() }
                }
            }
            group.addTask { await self.runJobs() }
            // The message stream ends when the client disconnects: stop the rest.
            await group.next()
            publishing.window.finish()
            jobs.finish()
            group.cancelAll()
        }
        publishing.sendCoalesced(all: true)
        drainOutput()
        await flush()
        await checkpoints.recordCheckpoint()
    }

    /// Runs each job a stage starts as a child task, until the pipeline stops.
    private func runJobs() async {
        await withDiscardingTaskGroup { group in
            for await job in jobs.jobs { group.addTask { await self.perform(job) } }
        }
    }

    /// Processes a batch of messages, sixteen at a time, each group's places in the store
    /// loading first (``LiveCore/prefetch(_:into:withTopic:)``), with the hashes of their
    /// paths that this worked out. The time each change took from its arrival is measured
    /// at its group's end: one clock read for sixteen updates.
    public func handle(_ messages: [IntakeMessage]) {
        // The batch's publications wake the output's network thread once, at the end.
        publishing.withBatchedSends {
            withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 16) { hashes in
                var start = 0
                while start < messages.count {
                    let end = min(start + 16, messages.count)
                    processing.core.prefetch(end - start, into: hashes) { index, hash in messages[start + index].withTopic(hash) }
                    var changed: UInt32 = 0
                    for index in start..<end where process(messages[index], pathHash: hashes[index - start]) {
                        changed |= 1 << UInt32(index - start)
                    }
                    if changed != 0 {
                        let now = MonotonicInstant.now
                        for index in start..<end where changed & (1 << UInt32(index - start)) != 0 {
                            metrics.processing.record(nanoseconds: now.nanoseconds(since: messages[index].arrived))
                        }
                    }
                    start = end
                }
            }
        }
    }

    /// Processes one received update.
    public func handle(_ message: IntakeMessage) {
        if process(message) { metrics.processing.record(nanoseconds: MonotonicInstant.now.nanoseconds(since: message.arrived)) }
    }

    private func process(_ message: IntakeMessage, pathHash: UInt64 = 0) -> Bool {
        message.withTopic { topic in
            message.withPayload { payload in
                handle(
                    topic: topic, payload: payload, receivedAt: message.receivedAt, retain: message.retain,
                    journalEnd: message.journalEnd, arrived: message.arrived, pathHash: pathHash)
            }
        }
    }

    /// Routes one update whose topic and payload are read in place: a partition's arrival
    /// or bridge state, the failover lease, or an update for the core.
    /// - Returns: whether it changed a location.
    @discardableResult
    func handle(
        topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retain: Bool, journalEnd: UInt64,
        arrived: MonotonicInstant?, pathHash: UInt64 = 0
    ) -> Bool {
        checkpoints.applied(journalEnd: journalEnd)
        if let partition {
            if topic.starts(with: partition.arrivalPrefix.utf8) {
                if let change = partition.arrival(payload) { queue(change, arrived: nil) }
                return false
            }
            if let bridge = partition.bridgeStateTopic, topic.elementsEqual(bridge.utf8) {
                // A replayed one is history: the broker sends the retained state again.
                if !processing.replaying, partition.bridgeState(payload, publishing: publishes) { jobs.start(.republishClears) }
                return false
            }
        }
        if let replica, topic.elementsEqual(replica.ownerTopic.utf8) {
            // A replayed one is history: the broker sends the retained lease again.
            if !processing.replaying { route(replica.observed(payload)) }
            return false
        }
        if let replica, topic.elementsEqual(replica.syncTopic.utf8) {
            if !processing.replaying { replica.markerRead(payload) }
            return false
        }
        guard let change = processing.process(topic: topic, payload: payload, receivedAt: receivedAt, retain: retain, pathHash: pathHash)
        else { return false }
        publishing.publishLegend(of: change.address)
        queue(change, arrived: arrived)
        return true
    }

    /// Puts a change in line for the broker and tells the floor view; `arrived`: when the
    /// update behind it reached the daemon.
    func queue(_ change: DerivedChange, arrived: MonotonicInstant?) {
        guard !processing.replaying else {
            // The run before the crash cleared the old topic: a bridge may still lose it.
            if let old = change.movedFrom, partition?.partition.owns(old) ?? true { publishing.noteCleared(styleOf: old) }
            return
        }
        // A location that moved: its old topic is cleared as the new one gets the style
        // (with a partition, only when the old one was this partition's).
        var clearing = change.movedFrom
        if let partition {
            guard case .owned(let announce, let old) = partition.route(change) else { return }
            if announce && publishes { partition.announceArrival(change) }
            clearing = old
        }
        // The floor view shows the state as it is, whenever the broker gets it.
        let payload = feed.hasViewers ? feed.change(change, topics: publishing.topics) : nil
        // A failover replica whose lease is not (or no longer) its own publishes nothing: the
        // tick that finds the lease unrenewed may not have come yet.
        if let replica, !replica.mayPublish {
            // The active clears it; this replica, active when the bridge is back, may have to again.
            if let clearing { publishing.noteCleared(styleOf: clearing) }
            // What a takeover publishes again when it may skip reading everything back.
            replica.standbyChanged(change.address, left: clearing)
            return
        }
        let seen = publishing.hasTrustedVersions || convergence.hasSeen(change.address)
        if publishing.put(change, arrived: arrived, seenByConvergence: seen, clearing: clearing, payload: payload) {
            convergence.published(change.address)
        }
    }

    /// Whether derived output may be published now: without failover, always; with it,
    /// while this replica is active and its lease is valid.
    var publishes: Bool { replica?.mayPublish ?? true }

    /// Hands the client what waits, as far as the broker's window has room (a failover
    /// replica: while its lease is its own).
    func drainOutput() { publishing.drain() }

    func sendDueCoalesced() {
        if publishing.sendCoalesced() { drainOutput() }
    }

    /// Periodic work: the lease, staleness, due summaries, sync markers, and every
    /// `store.snapshotInterval` the snapshot.
    public func tick() async {
        if let replica {
            // A replica that does not hear the broker (its receiving connection down) or has
            // not read all it was sent cannot know the lease is free: it claims nothing. Nor
            // does one whose reconnection is not handled yet (its last renewal heard is the
            // one before the link went down).
            let caughtUp = client.state == .connected && connection.isUp && intake.queue.statistics.depth == 0
            route(replica.tick(caughtUp: caughtUp))
        }
        processing.followClockSteps()
        let now = LiveTimestamp.now
        for change in processing.core.expire(now: now) { queue(change, arrived: nil) }
        publishSummaries(now: now)
        feed.heartbeatIfDue()
        drainOutput()
        publishMarkerIfDue()
        publishing.reportRefusals(broker: refusedPublishes)
        if checkpoints.isDue { await flush() }
        checkpoints.trimHeapAfterBurst(waiting: publishing.waiting, processed: processing.processed)
    }

    /// Publishes the summaries due at `now` (`all`: every one that changed, due or not). A
    /// standby keeps its summaries and publishes none.
    func publishSummaries(now: LiveTimestamp, all: Bool = false) {
        let summaries = processing.core.takeDueSummaries(now: now, all: all)
        guard publishes else { return }
        for summary in summaries {
            let publication = publishing.topics.publication(summary, updatedAt: now)
            feed.summary(summary.key, json: publication.payload)
            publishing.send(summary: publication)
        }
    }

    /// Publications the broker refused, on every connection, and the last refusal.
    nonisolated var refusedPublishes: (count: Int, last: MQTTError?) {
        let each = connections.map(\.refusedPublishes)
        return (each.reduce(0) { $0 + $1.count }, each.reversed().lazy.compactMap(\.last).first)
    }
}
