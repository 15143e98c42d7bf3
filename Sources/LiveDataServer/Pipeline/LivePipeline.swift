import AsyncAlgorithms
import DisplayRules
import LiveDataConfiguration
import LiveState
import LiveStatePersistence
import LiveTopics
import Logging
import Mosquitto

/// The processor: takes each received update to the core and carries its outcome to the
/// outputs, and runs the periodic work. One actor, so that an update crosses one thread
/// (the network thread's intake to here) before the publisher's client takes it; its jobs
/// live in files of their own, each with the state it keeps as a value:
/// - the start (restore, replay): `LivePipeline+Start.swift`;
/// - the MQTT side (subscriptions, what follows a connection, `offline`): `+Connection`;
/// - the outputs of an update (publisher, coalescer, events, legends): `+Output`;
/// - convergence with the broker (``ConvergenceRuns``): `+Convergence`;
/// - sync markers and the stop's checkpoint (``SyncMarkers``): `+Markers`;
/// - write-behind to the state file (``SnapshotState``): `+Snapshot`;
/// - rules reloaded and layers toggled: `+Reload`; counts: `+Statistics`.
/// The HTTP routes and the event stream ask through ``LiveQueries``, never the store.
/// docs/architecture.md follows one update through all of it.
public actor LivePipeline {
    /// The connection that receives: subscriptions, the updates, and the session the
    /// broker keeps while the daemon is down.
    nonisolated let client: MQTTClient
    /// The connection that publishes: styles, summaries, legends, status and sync markers,
    /// all on one connection so that the broker stores them in the order handed over.
    /// The receiving one, or a second connection (``BrokerSettings/outputConnection``).
    nonisolated let output: MQTTClient
    /// The daemon's connections, each once: the receiving one, then the output one when it
    /// is a second connection.
    nonisolated let connections: [MQTTClient]
    let logger: Logger
    var config: LiveDataConfig
    let core: LiveCore
    /// The formats, with the failover epoch while active (see `LivePipeline+Failover.swift`).
    var topics: OutputFormat
    public nonisolated let intake: Intake
    /// What the start's journal replay found.
    public internal(set) var replayed = IntakeJournal.ReplayStatistics()
    var snapshots = SnapshotState()
    var markers = SyncMarkers()
    var runs = ConvergenceRuns()
    /// What the connections' event streams said (see ``ConnectionPair``).
    var connectionPair: ConnectionPair
    /// Filters the broker refused (not retried; the others go on).
    var refusedFilters: [String] = []
    /// Retained legends found differing from this daemon's (another daemon's rules).
    var legendConflicts = 0
    /// `{prefix}/arrival/`, where partitioned daemons announce locations they took (see
    /// `LivePipeline+Handover.swift`); nil without a partition.
    let arrivalPrefix: String?
    /// Locations handed over to another partition's daemon.
    var handOvers = 0
    /// `$SYS/broker/connection/{partition.bridge}/state`, when a bridge is watched, and its
    /// last value (see ``bridgeState(_:)``).
    let bridgeStateTopic: String?
    var bridgeUp: Bool?
    /// Times the watched bridge came back and the recent clears went out again.
    var bridgeRecoveries = 0
    /// The receiving connection has been connected before; reconnections that found the
    /// session gone (see ``noteSession()``).
    var connectedBefore = false
    var sessionsLost = 0
    /// With `partition.failover`: which replica publishes (see `LivePipeline+Failover.swift`),
    /// the connection that holds the lease while claiming or active, and the retained
    /// lease's topic. Nil without failover.
    var failover: FailoverState?
    /// `failover != nil`, fixed at the start: the test every change makes reads this flag
    /// instead of copying the state out to compare it with nil.
    let isReplica: Bool
    var holder: MQTTClient?
    let ownerTopic: String?
    /// Times this replica stopped being active (or gave a claim up).
    var depositions = 0
    /// The start restored no location: a failover replica copies a peer's state before it
    /// may take over (see ``join()``). Known at the restore, before the broker's queue for
    /// the session can add any.
    var startedEmpty = true
    /// When ``failoverTick()`` last ran (a long gap is a pause).
    var lastFailoverTick: ContinuousClock.Instant?
    /// Opens once the replica may serve: subscribed, and its state copied when it started
    /// with none (see ``join()``).
    let joined = StartupGate()
    /// While the start replays the journal: changes are not published (see ``converge()``).
    var replaying = false
    /// Until the first convergence after the start has finished, the versions the state
    /// holds may be lower than the broker's (a crashed predecessor may have raised them
    /// without recording it), so a change is not published under them: updates are
    /// processed all the same, and the convergence publishes what they changed, with
    /// versions above the broker's (see ``queue(_:arrived:)``).
    ///
    /// Until the start knows which (a full convergence, or the checkpoint of the last clean
    /// stop found at the broker), changes are held: a checkpoint that holds sends them under
    /// their versions; a convergence drops them and publishes from the state instead.
    var versions = Versions.inDoubt
    enum Versions {
        case inDoubt
        case trusted
    }
    /// While the versions are in doubt and no convergence runs: the changes made meanwhile.
    /// They go out if the checkpoint holds (the versions were right after all); a
    /// convergence drops them (`nil`). A property of its own, not a payload of ``versions``:
    /// mutated in place, never copied.
    var held: PendingOutput? = PendingOutput()
    var publisher: Publisher
    /// Wakes the drain when the broker's window has room again.
    let window: OutputWindow
    /// `output.minInterval`, when set.
    var coalescer: PublishCoalescer?
    var rejections = RateLimitedLog()
    /// Publications the broker refused and the MQTT library refused, as of the last report.
    var reportedRefusals = (broker: 0, library: 0)
    var refusalLog = RateLimitedLog(interval: .seconds(10))
    /// Restored, connected and subscribed (see ``isReady``).
    var isSubscribed = false
    /// Restored, connected, subscribed and converged with the broker at least once.
    /// A failover replica: subscribed and joined (see ``join()``), and, when active,
    /// converged.
    public var isReady: Bool {
        guard let failover else { return isSubscribed && hasConverged }
        return isSubscribed && failover.eligible && (!failover.isActive || hasConverged)
    }
    /// The first convergence (or a checkpoint that made it needless) has finished.
    public var hasConverged: Bool { if case .trusted = versions { true } else { false } }
    let metrics: DaemonMetrics
    /// The floor view's live feed: what is published, for the viewers in scope.
    public nonisolated let events: EventHub
    var lastHeartbeat = ContinuousClock.now
    static let heartbeatInterval = Duration.seconds(15)

    /// Builds the core; ``start()`` restores the stored state.
    public init(
        config: LiveDataConfig, client: MQTTClient, output: MQTTClient? = nil, intake: Intake,
        metrics: DaemonMetrics = DaemonMetrics(), logger: Logger, events: EventHub = EventHub(), window: OutputWindow = OutputWindow()
    ) {
        self.config = config
        self.window = window
        self.events = events
        self.metrics = metrics
        self.client = client
        self.output = output ?? client
        connections = output.map { $0 === client ? [client] : [client, $0] } ?? [client]
        connectionPair = ConnectionPair(shared: connections.count == 1)
        self.intake = intake
        self.logger = logger
        topics = config.outputFormat
        arrivalPrefix = config.partition != nil ? "\(config.output.prefix)/arrival/" : nil
        bridgeStateTopic = config.bridge.map { "$SYS/broker/connection/\($0)/state" }
        if config.failover, let partition = config.partition {
            ownerTopic = topics.owner(partition.name)
            failover = FailoverState(instance: config.instanceName, keepalive: max(config.broker.keepalive, .seconds(5)))
            isReplica = true
        } else {
            ownerTopic = nil
            isReplica = false
        }
        publisher = Publisher(client: self.output, qos: MQTTQoS(rawValue: Int32(config.output.qos)) ?? .atLeastOnce, topics: topics)
        coalescer = config.output.minInterval > .zero ? PublishCoalescer(interval: config.output.minInterval) : nil
        core = LiveCore(
            ruleSet: config.ruleSet, subscriptions: config.subscriptions, summaryInterval: config.output.summaryInterval,
            limits: LiveLimits(
                payload: config.limits.payload, locations: config.limits.locations, domains: config.limits.domains,
                futureSkew: config.limits.futureSkew),
            partition: config.partition)
    }

    /// How far ``start()`` has come, read without this actor (a restore keeps it busy).
    public nonisolated let startProgress = StartProgress()

    public func markReady() { isSubscribed = true }

    /// Updates handed to the core since the start (replayed ones included).
    var processed = 0
    /// Holds the processing of updates while set: for the test of the watchdog, which must
    /// see a pipeline that does not move.
    var stallForTesting: StartupGate?

    /// Stops processing updates until ``resumeProcessing()`` (tests only).
    package func stallProcessing() { stallForTesting = StartupGate() }

    package func resumeProcessing() async {
        await stallForTesting?.open()
        stallForTesting = nil
    }

    /// Processes received updates, a batch at a time, until the intake closes. It starts at
    /// once, convergence or not: a backlog at the broker must never wait for a convergence
    /// whose own read it would hold up (see ``versions``).
    ///
    /// A batch is what one network pass read, and passes are at least a millisecond apart
    /// while the stream is busy (`MQTTConfiguration.passInterval`), so the pipeline is woken
    /// once a pass, not once a message. (It used to sleep a millisecond after a small batch
    /// as well: a timer that woke libdispatch's manager thread and then a worker, for
    /// batches the passes already gathered. Without it, a third fewer system calls at a
    /// million locations.)
    public func run() async {
        // While a full convergence reads the broker's retained styles, the live updates are
        // taken a few at a time and the read's batches (up to 1,024) go first: the start is
        // not ready, and a live change of a location whose retained style is still to be
        // read waits for the read, until it ends. The intake meanwhile fills its queue, and
        // TCP holds the rest at the broker.
        while let batch = await intake.queue.next(limit: runs.reader == nil ? .max : Self.liveBatchWhileReading) {
            await stallForTesting?.wait()
            handle(batch)
            intake.queue.recycle(batch)
            drainOutput()
        }
    }

    /// The most live updates handled at a time while a full convergence reads (see ``run()``).
    static let liveBatchWhileReading = 64

    /// Runs everything until the client disconnects: messages, `connected()` after every
    /// (re)connection, and ``tick()`` every `tickInterval`. Then writes what is left.
    public func serve(tickInterval: Duration = .milliseconds(100)) async {
        // Every (re)connection, the one before this call included, is in the event stream.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            group.addTask {
                for await event in self.client.events {
                    if case .state(let state) = event { await self.connection(.receiving, state) }
                }
                // The client has ended: nothing more comes in; what waits is still processed.
                self.intake.queue.close()
            }
            if connections.count > 1 {
                group.addTask {
                    for await event in self.output.events {
                        if case .state(let state) = event { await self.connection(.output, state) }
                    }
                }
            }
            group.addTask {
                // The broker's window has room again.
                for await _ in self.window.opened { await self.drainOutput() }
            }
            group.addTask {
                await self.tick()
                for await _ in AsyncTimerSequence(interval: tickInterval, clock: .continuous) { await self.tick() }
            }
            if let interval = coalescer?.interval {
                // The trailing edge of `output.minInterval`: late by at most a quarter of it.
                let cadence = max(min(interval / 4, .milliseconds(100)), .milliseconds(5))
                group.addTask {
                    for await _ in AsyncTimerSequence(interval: cadence, clock: .continuous) { await self.sendDueCoalesced() }
                }
            }
            // The message stream ends when the client disconnects: stop the rest.
            await group.next()
            window.finish()
            group.cancelAll()
        }
        runs.task?.cancel()
        await runs.task?.value
        sendAllCoalesced()
        await flush()
        await recordCheckpoint()
    }

    /// Processes a batch of messages, sixteen at a time, each group's places in the store
    /// loading first (``LiveCore/prefetch(_:into:withTopic:)``), with the hashes of their
    /// paths that this worked out. The time each change took from its arrival is measured
    /// at its group's end: one clock read for sixteen updates, not one each.
    public func handle(_ messages: [IntakeMessage]) {
        // The batch's publications wake the output's network thread once, at the end.
        publisher.client.withBatchedSends {
            withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 16) { hashes in
                var start = 0
                while start < messages.count {
                    let end = min(start + 16, messages.count)
                    core.prefetch(end - start, into: hashes) { index, hash in messages[start + index].withTopic(hash) }
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

    /// Processes one received update; `pathHash`, its topic's path hash when known (see
    /// ``LiveCore/process(topicBytes:payload:receivedAt:retained:pathHash:)``).
    /// - Returns: whether it changed a location (its time in the pipeline is measured).
    private func process(_ message: IntakeMessage, pathHash: UInt64 = 0) -> Bool {
        message.withTopic { topic in
            message.withPayload { payload in
                handle(
                    topic: topic, payload: payload, receivedAt: message.receivedAt, retain: message.retain,
                    journalEnd: message.journalEnd, arrived: message.arrived, pathHash: pathHash)
            }
        }
    }

    /// Processes one update whose topic and payload are read in place.
    /// - Returns: whether it changed a location.
    @discardableResult
    func handle(
        topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retain: Bool, journalEnd: UInt64,
        arrived: MonotonicInstant?, pathHash: UInt64 = 0
    ) -> Bool {
        if journalEnd > snapshots.appliedPosition { snapshots.appliedPosition = journalEnd }
        if let arrivalPrefix, topic.starts(with: arrivalPrefix.utf8) {
            arrival(payload)
            return false
        }
        if let bridgeStateTopic, topic.elementsEqual(bridgeStateTopic.utf8) {
            bridgeState(payload)
            return false
        }
        if let ownerTopic, topic.elementsEqual(ownerTopic.utf8) {
            ownerMessage(payload)
            return false
        }
        processed += 1
        switch core.process(topicBytes: topic, payload: payload, receivedAt: receivedAt, retained: retain, pathHash: pathHash) {
        case .changed(let change):
            publishLegend(of: change.address)
            queue(change, arrived: arrived)
            return true
        case .rejected(let reason, let text):
            logRejection(reason, text, topic: String(decoding: topic, as: UTF8.self))
        case .unchanged, .ignoredOutOfOrder, .notSubscribed:
            break
        }
        return false
    }

    /// Periodic work: staleness, due summaries, and every `store.snapshotInterval` the
    /// snapshot.
    public func tick() async {
        failoverTick()
        let now = LiveTimestamp.now
        for change in core.expire(now: now) { queue(change, arrived: nil) }
        let summaries = core.takeDueSummaries(now: now)
        // A standby keeps its summaries and publishes none.
        let publishing = publishes
        for summary in summaries where publishing {
            let publication = topics.publication(summary, updatedAt: now)
            if events.hasViewers { events.publish("summary", place: summary.key, json: publication.payload) }
            publisher.send(summary: publication)
        }
        if ContinuousClock.now - lastHeartbeat >= Self.heartbeatInterval {
            lastHeartbeat = .now
            events.heartbeat()
        }
        drainOutput()
        publishMarkerIfDue()
        reportRefusals()
        if ContinuousClock.now - snapshots.lastWritten >= config.store.snapshotInterval { await flush() }
        trimHeapAfterBurst()
    }
}
