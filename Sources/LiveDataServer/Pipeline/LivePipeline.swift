import AsyncAlgorithms
import DisplayRules
import LiveDataConfiguration
import LiveState
import LiveStatePersistence
import LiveTopics
import CMalloc
import Logging
import Mosquitto

/// Wires the broker to the core: subscribes the configured criteria, hands every message to
/// the core, gives what comes out to the ``Publisher`` (changes, summaries, legends,
/// status), runs staleness and write-behind on a tick, and answers the HTTP interface's
/// queries. The core, the publisher and the rate-limited log are values it owns; it is the
/// one place they meet.
public actor LivePipeline {
    public struct Statistics: Sendable, Equatable {
        public var core = LiveCore.Counters()
        public var store = LiveStore.Counters()
        public var published = 0
        /// Derived changes that a later one of their location replaced within
        /// `output.minInterval`, never published.
        public var coalesced = 0
        public var summariesPublished = 0
        public var locations = 0
        public var refusedSubscriptions = 0
        public var intake = Intake.Statistics()
        public var replayed = IntakeJournal.ReplayStatistics()
        public var snapshotFailures = 0
        /// Publications the broker refused (PUBACK), and ones dropped after the library
        /// refused them ``Publisher/maximumAttempts`` times.
        public var publishesRefused = 0
        public var publishesDropped = 0
        /// Publications waiting for room in the broker's in-flight window (one per topic).
        public var outputWaiting = 0
        /// Our publications awaiting the broker's acknowledgement.
        public var outputInFlight = 0
        /// Convergences finished, failed, and skipped because nothing could have diverged;
        /// retained messages read by convergences in all.
        public var convergences = 0
        public var convergenceFailures = 0
        public var convergencesSkipped = 0
        public var convergenceRead = 0
        /// Retained messages the convergence under way has read (0 when none runs).
        public var convergenceProgress = 0
        /// Updates handed to the core (replayed ones included): the pipeline's progress.
        public var processed = 0
        /// The floor view's viewers.
        public var events = EventHub.Statistics()
        /// The daemon's connections whose socket calls go through the buffers.
        public var bufferedConnections = 0
    }

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
    private(set) var config: LiveDataConfig
    private var core: LiveCore
    private let topics: OutputFormat
    private var writer: StoreWriter?
    public nonisolated let intake: Intake
    /// The journal position of the last update applied: a snapshot written now covers it.
    private var appliedPosition: UInt64 = 0
    /// What the start's journal replay found.
    public private(set) var replayed = IntakeJournal.ReplayStatistics()
    /// The journal position the last written snapshot covers.
    private var coveredPosition: UInt64?
    /// Why the last snapshot could not be written, until one is.
    private var snapshotFault: String?
    private var snapshotFailures = 0
    private var snapshotFaultLog = RateLimitedLog(interval: .seconds(10))
    private var lastSnapshot = ContinuousClock.now
    /// While the start replays the journal: changes are not published (see ``converge()``).
    private var replaying = false
    /// Until the first convergence after the start has finished, the versions the state
    /// holds may be lower than the broker's (a crashed predecessor may have raised them
    /// without recording it), so a change is not published under them: updates are
    /// processed all the same, and the convergence publishes what they changed, with
    /// versions above the broker's (see ``queue(_:arrived:)``).
    ///
    /// Until the start knows which (a full convergence, or the checkpoint of the last clean
    /// stop found at the broker), changes are held: a checkpoint that holds sends them under
    /// their versions; a convergence drops them and publishes from the state instead.
    private var versions = Versions.inDoubt
    enum Versions {
        case inDoubt
        case trusted
    }
    /// While the versions are in doubt and no convergence runs: the changes made meanwhile.
    /// They go out if the checkpoint holds (the versions were right after all); a
    /// convergence drops them (`nil`). A property of its own, not a payload of ``versions``:
    /// mutated in place, never copied.
    private var held: PendingOutput? = PendingOutput()
    /// What the last clean stop left (see ``checkpoint(timeout:)``): the payload of the
    /// retained checkpoint it published, when nothing changed since.
    private var restoredCheckpoint: String?
    /// The checkpoint this run published while stopping, and the publications put in line
    /// by then: it holds for the state file only if nothing was put in line after it.
    private var stopCheckpoint: (payload: String, puts: Int)?
    private var publisher: Publisher
    /// Wakes the drain when the broker's window has room again.
    private let window: OutputWindow
    /// `output.minInterval`, when set.
    private var coalescer: PublishCoalescer?
    private var rejections = RateLimitedLog()
    /// Publications the broker refused and the publisher dropped, as of the last report.
    private var reportedRefusals = (broker: 0, library: 0)
    private var refusalLog = RateLimitedLog(interval: .seconds(10))
    /// Restored, connected and subscribed (see ``isReady``).
    private var isSubscribed = false
    /// Restored, connected, subscribed and converged with the broker at least once.
    public var isReady: Bool { isSubscribed && hasConverged }
    /// The first convergence (or a checkpoint that made it needless) has finished.
    public var hasConverged: Bool { if case .trusted = versions { true } else { false } }
    private let metrics: DaemonMetrics
    /// The floor view's live feed: what is published, for the viewers in scope.
    public nonisolated let events: EventHub
    private var lastHeartbeat = ContinuousClock.now
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
        topics = OutputFormat(prefix: config.output.prefix, retain: config.output.retain)
        publisher = Publisher(client: self.output, qos: MQTTQoS(rawValue: Int32(config.output.qos)) ?? .atLeastOnce, topics: topics)
        coalescer = config.output.minInterval > .zero ? PublishCoalescer(interval: config.output.minInterval) : nil
        core = LiveCore(
            ruleSet: config.ruleSet, subscriptions: config.subscriptions, summaryInterval: config.output.summaryInterval,
            limits: LiveLimits(
                payload: config.limits.payload, locations: config.limits.locations, domains: config.limits.domains,
                futureSkew: config.limits.futureSkew))
        writer = nil
    }

    /// How far ``start()`` has come, read without this actor (a restore keeps it busy).
    public nonisolated let startProgress = StartProgress()

    /// Restores the stored state and replays the journal's tail (publishing nothing yet);
    /// ``startProgress`` follows it. A stop asked for meanwhile
    /// (``StartProgress/requestStop()``) ends it after the restore or at the next replayed
    /// update, with nothing written: the state file and the journal are as they were.
    /// - Throws: when the state file cannot be opened or read; `CancellationError` when
    ///   stopped.
    public func start() throws {
        defer { if writer != nil || config.store.isInMemory { startProgress.set(.started) } }
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
        restoredCheckpoint = restored.checkpoint
        // The style topics of placements the file held twice are cleared. The styles that
        // changed while we were down (rules, staleness, the journal's tail) are not published
        // from here: the first convergence compares every retained style with the state and
        // publishes what differs, with versions above the ones the broker holds.
        for address in core.store.takeStaleStyleAddresses() { publisher.send(topics.clearing(styleOf: address)) }
        replaying = true
        defer { replaying = false }
        if let journal = intake.journal {
            // What arrived after the snapshot, through the same way in as live updates.
            appliedPosition = restored.journalPosition
            var records = 0
            progress.set(.replaying(records: 0))
            let replay = try journal.replay(from: restored.journalPosition, prefetchingFor: core) { record in
                if progress.isStopRequested { throw CancellationError() }
                handle(
                    topic: String(decoding: record.topic, as: UTF8.self), payload: record.payload, receivedAt: record.receivedAt,
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
        malloc_trim(0)
        // The checkpoint vouches for the styles as they were at the stop: not for what the
        // journal or the catch-up changed since.
        if replayed.records > 0 || restored.changed > 0 {
            restoredCheckpoint = nil
        }
        writer = try StoreWriter(path: config.store.path, logger: logger)
    }

    public func markReady() { isSubscribed = true }

    /// Updates handed to the core since the start (replayed ones included).
    private var processed = 0
    /// Holds the processing of updates while set: for the test of the watchdog, which must
    /// see a pipeline that does not move.
    private var stallForTesting: StartupGate?

    /// Stops processing updates until ``resumeProcessing()`` (tests only).
    package func stallProcessing() { stallForTesting = StartupGate() }

    package func resumeProcessing() async {
        await stallForTesting?.open()
        stallForTesting = nil
    }

    /// The broker connection's state: the first of the connections that is not connected
    /// (the receiving one before the output one), else connected.
    public nonisolated var brokerState: MQTTConnectionState {
        connections.lazy.map(\.state).first { $0 != .connected } ?? .connected
    }

    /// The records of every location with this id (the topic's location level): one per
    /// dataset that has it, in address order.
    public func records(id: String) -> [LocationRecord] {
        core.store.records(id: id)
    }

    /// Every location of a floor.
    public func floor(dataset: String, venue: String, building: String, floor: String) -> [LocationRecord] {
        core.store.records(floor: SummaryTracker.Key(dataset: dataset, venue: venue, building: building, floor: floor))
    }

    /// Every layer the rules and styles name, and whether it is hidden.
    public var layers: [(name: String, hidden: Bool)] {
        let hidden = core.store.hiddenLayers
        return Set(config.ruleSet.layers).union(hidden).sorted().map { ($0, hidden.contains($0)) }
    }

    public var statistics: Statistics {
        Statistics(
            core: core.counters, store: core.store.counters, published: publisher.changes,
            coalesced: (coalescer?.coalesced ?? 0) + publisher.pending.coalesced,
            summariesPublished: publisher.summaries, locations: core.store.count,
            refusedSubscriptions: refusedSubscriptions.count, intake: intake.statistics, replayed: replayed,
            snapshotFailures: snapshotFailures, publishesRefused: refusedPublishes.count, publishesDropped: publisher.dropped,
            outputWaiting: publisher.waiting, outputInFlight: output.inFlight, convergences: convergences,
            convergenceFailures: convergenceFailures, convergencesSkipped: convergencesSkipped,
            convergenceRead: convergenceRead + (reader?.count ?? 0), convergenceProgress: reader?.count ?? 0,
            processed: processed, events: events.statistics,
            bufferedConnections: connections.filter { $0.socketBuffered == true }.count)
    }

    /// Current record of a location.
    public func record(_ address: LocationAddress) -> LocationRecord? { core.store[address] }

    /// Filters the broker refused (not retried; the others go on). Readiness names them.
    public private(set) var refusedSubscriptions: [String] = []

    /// Subscribes the configured criteria (sent again by the client after every
    /// reconnection). A filter the broker refuses is logged, kept in
    /// ``refusedSubscriptions`` and not retried; the others still go on.
    /// - Throws: when the client cannot subscribe at all (it is shut down).
    public func subscribe() async throws {
        let qos = MQTTQoS(rawValue: Int32(config.broker.qos)) ?? .atLeastOnce
        for criteria in config.subscriptions {
            try await subscribe(criteria.filter.string, qos: qos)
        }
    }

    private func subscribe(_ filter: String, qos: MQTTQoS) async throws {
        do {
            _ = try await client.subscribe(filter, qos: qos)
            refusedSubscriptions.removeAll { $0 == filter }
        } catch MQTTError.subscriptionRefused(let filter, let code, let reason) {
            if !refusedSubscriptions.contains(filter) { refusedSubscriptions.append(filter) }
            logger.error(
                "the broker refused the subscription to \(filter): \(reason); the other subscriptions go on",
                metadata: ["mqtt.filter": "\(filter)", "mqtt.reason_code": "\(code)"])
        }
    }

    /// What the connections' event streams said (see ``ConnectionPair``).
    private var connectionPair: ConnectionPair

    /// A connection's state changed (from its event stream).
    private func connection(_ connection: ConnectionPair.Connection, _ state: MQTTConnectionState) {
        if connectionPair.changed(connection, to: state) == .connected { connected() }
    }

    /// Publishes `online`, the legends and whatever waits, and converges unless nothing can
    /// have diverged; call after every (re)connection (of either connection, once both are up).
    public func connected() {
        publisher.send(topics.statusPublication(online: true))
        publisher.forgetLegends()
        for dataset in knownDatasets() { publishLegend(dataset) }
        // The broker kept both sessions: it kept its store (a connection that did not drop
        // still reports the session of its last CONNACK).
        let present = client.session.present && output.session.present
        switch versions {
        case .trusted where present && acknowledgedMarker != nil && publisher.recentIsWhole:
            // The broker resumed our session, so it kept its store, or restored it from its
            // last save (mosquitto saves sessions and retained messages together, at times).
            // If its retained marker is the last one it acknowledged, it holds every style
            // acknowledged before that marker; what was handed over after it is sent again.
            // Nothing else can have diverged: a broker blip costs one retained message, not
            // a read of every style.
            markerCheck = .resumed(acknowledgedMarker!)
            startConvergence()
        case .inDoubt where present && restoredCheckpoint != nil:
            // A start after a clean stop: the retained marker tells whether the broker
            // holds what the state file says it acknowledged. What came in meanwhile is held.
            markerCheck = .start(restoredCheckpoint!)
            restoredCheckpoint = nil
            startConvergence()
        default:
            markerCheck = nil
            startConvergence()
        }
        drainOutput()
    }

    // MARK: - Sync markers

    /// The daemon's sync markers: about once a second while it publishes, a retained
    /// `{"token": …, "sequence": N}` at ``checkpointTopic``, handed to the client after
    /// everything before it. The broker handles a connection's messages in order, so once
    /// it acknowledges a marker it has stored every publication handed over before it. A
    /// broker that resumes the session and still holds the last acknowledged marker lacks
    /// at most what was handed over after it (``Publisher/recent``); one that holds another
    /// (it restored an older save) or none calls for a full convergence. A clean stop ends
    /// with a marker once everything is acknowledged, and the state file records it (see
    /// ``checkpoint(timeout:)``).
    private let runToken: String = {
        var random = SystemRandomNumberGenerator()
        return String(random.next(), radix: 16, uppercase: false)
    }()
    private var markerSequence = 0
    private var markerInFlight = false
    private var lastMarker = ContinuousClock.now
    /// The last marker the broker acknowledged, as published.
    private var acknowledgedMarker: String?
    static let markerInterval = Duration.seconds(1)

    /// What the next convergence checks first: a marker that, held by the broker, makes the
    /// full read needless.
    private var markerCheck: MarkerCheck?
    enum MarkerCheck {
        /// A start: the marker the last clean stop recorded.
        case start(String)
        /// A reconnection that resumed the session: the last marker acknowledged.
        case resumed(String)
    }

    private func nextMarkerPayload() -> String {
        markerSequence += 1
        return #"{"token": "\#(runToken)", "sequence": \#(markerSequence), "locations": \#(core.store.count)}"#
    }

    /// Publishes a marker when something was handed over since the last one, at most once
    /// a ``markerInterval``, one at a time, only while the versions are known.
    private func publishMarkerIfDue() {
        guard hasConverged, markerCheck == nil, !markerInFlight, output.state == .connected,
            ContinuousClock.now - lastMarker >= Self.markerInterval, publisher.handedOver > markedPosition
        else { return }
        drainOutput()
        lastMarker = .now
        sendMarker()
    }

    /// Publishes the next marker after everything handed over so far; ``markerDone(_:position:acknowledged:)``
    /// follows its acknowledgement.
    /// - Returns: its payload.
    @discardableResult
    private func sendMarker() -> String {
        let payload = nextMarkerPayload()
        let position = publisher.handedOver
        markerInFlight = true
        let client = output
        let topic = checkpointTopic
        Task {
            let acknowledged = (try? await client.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)) != nil
            self.markerDone(payload, position: position, acknowledged: acknowledged)
        }
        return payload
    }

    /// Publications handed over before the last marker sent.
    private var markedPosition = 0

    private func markerDone(_ payload: String, position: Int, acknowledged: Bool) {
        markerInFlight = false
        guard acknowledged else { return }
        markedPosition = max(markedPosition, position)
        acknowledgedMarker = payload
        publisher.forgetRecent(before: position)
    }

    // MARK: - Convergence

    /// Counts of the last finished convergence.
    public private(set) var lastConvergence: Convergence.Counts?
    public private(set) var convergences = 0
    private var convergenceFailures = 0
    private var convergencesSkipped = 0
    /// Retained messages read by finished convergences.
    private var convergenceRead = 0
    /// Why the last convergence failed, until one finishes.
    public private(set) var convergenceFault: String?
    private var converging: Task<Void, Never>?
    /// The one under way: changes published meanwhile count as seen at the broker.
    private var convergence: Convergence?
    private var reader: RetainedReader?
    private var convergeAgain = false
    static let convergenceRetry = MQTTBackoff(initial: .seconds(1), maximum: .seconds(60), jitter: 0)

    private func startConvergence() {
        guard converging == nil else {
            // Reconnected while one runs: another follows it (the broker may have lost
            // retained messages meanwhile).
            convergeAgain = true
            return
        }
        converging = Task { await self.convergeUntilCurrent() }
    }

    /// Converges until one finishes with nothing asking for another; a failed one is an
    /// error (log, metric, readiness) and is tried again after a growing delay.
    private func convergeUntilCurrent() async {
        var delay = Self.convergenceRetry.initial
        repeat {
            convergeAgain = false
            do {
                if let check = markerCheck {
                    // No marker goes out while one is checked (see publishMarkerIfDue()).
                    let held = try await markerHolds(check)
                    markerCheck = nil
                    if held { continue }
                }
                try await converge()
                delay = Self.convergenceRetry.initial
            } catch is CancellationError {
                break
            } catch {
                convergenceFailures += 1
                convergenceFault = "the convergence with the broker failed: \(error); trying again in \(delay)"
                logger.error("cannot converge with the broker: \(error); trying again in \(delay)")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, Self.convergenceRetry.maximum)
                convergeAgain = true
            }
        } while convergeAgain && !Task.isCancelled
        converging = nil
    }

    /// The state's versions are known to be at or above the broker's.
    private func trustVersions() {
        versions = .trusted
        convergenceFault = nil
        Task { [converged] in await converged.open() }
    }

    /// Opens once the first convergence (or a checkpoint that made it needless) is done.
    private let converged = StartupGate()

    /// Returns once the first convergence has finished (see ``isReady``).
    public func waitUntilConverged() async { await converged.wait() }

    /// `{prefix}/checkpoint/{client id}`: where a clean stop leaves its checkpoint.
    private var checkpointTopic: String { "\(topics.prefix)/checkpoint/\(client.configuration.clientID ?? "livedata")" }

    /// Reads the retained marker. At a start, when it is the one the state file recorded,
    /// the broker holds every style the state file says it acknowledged, and the changes
    /// held since the start go out under their versions. After a reconnection, when it is
    /// the last one acknowledged, what was handed over after it is sent again.
    /// - Returns: whether the marker held (else a full convergence follows).
    private func markerHolds(_ check: MarkerCheck) async throws -> Bool {
        let reader = try RetainedReader(
            configuration: client.configuration, prefix: topics.prefix, filters: [checkpointTopic], logger: logger)
        defer { convergenceRead += reader.count }
        reader.begin()
        var found: [UInt8]?
        while let batch = await reader.next() {
            for message in batch where message.retain && message.topic == checkpointTopic { found = message.payload }
        }
        try await reader.end()
        switch check {
        case .start(let expected):
            guard case .inDoubt = versions, var held = self.held.take(), found == Array(expected.utf8) else {
                self.held = nil
                logger.info("the broker does not hold the marker of the last stop: converging")
                return false
            }
            acknowledgedMarker = expected
            publisher.forgetRecent(before: publisher.handedOver)
            markedPosition = publisher.handedOver
            trustVersions()
            while let (_, entry) = held.take() { publisher.send(entry.item, since: entry.since) }
            logger.info("the broker holds the marker of the last stop: nothing to converge")
        case .resumed(let expected):
            guard found == Array(expected.utf8), publisher.recentIsWhole else {
                logger.info("the broker resumed the session without the last marker acknowledged: converging")
                return false
            }
            let again = resend(publisher.recent)
            logger.info("the broker resumed the session and holds the last marker: \(again) publications sent again, nothing else to converge")
        }
        convergencesSkipped += 1
        drainOutput()
        return true
    }

    /// Puts in line again, as the state has them now, the topics of publications the
    /// broker may have lost: styles (under a new version), clearings of places no location
    /// holds any more, and every summary.
    private func resend(_ recentTopics: [String]) -> Int {
        var count = 0
        let now = LiveTimestamp.now
        for topic in Set(recentTopics) {
            guard let address = topics.address(ofStyleTopic: topic) else { continue }
            if let change = core.store.republication(at: address, now: now) {
                publisher.send(change: change)
            } else if core.store[address] == nil {
                publisher.send(topics.clearing(styleOf: address))
            }
            count += 1
        }
        for summary in core.store.summaries.all() where summary.locations > 0 {
            publisher.send(summary: topics.publication(summary, updatedAt: now))
        }
        return count
    }

    /// Reads back the retained messages under the prefix and publishes what makes them
    /// agree with the state (see ``Convergence``). Live updates go on meanwhile.
    /// - Throws: ``RetainedReader/Failure`` when the read fails or stalls: nothing is
    ///   cleared or published for a read that did not end.
    func converge() async throws {
        let started = ContinuousClock.now
        let reader = try RetainedReader(
            configuration: client.configuration, prefix: topics.prefix,
            filters: ["\(topics.prefix)/style/#", "\(topics.prefix)/summary/#", "\(topics.prefix)/legend/#"], logger: logger)
        self.reader = reader
        convergence = Convergence(core: core, topics: topics)
        held = nil
        defer {
            convergence = nil
            self.reader = nil
            convergenceRead += reader.count
            // A full read's passing allocations (a message and a topic for each retained
            // style) go back to the system with it.
            if reader.count > 10_000 { malloc_trim(0) }
        }
        reader.begin()
        var legends: [String] = []
        while let batch = await reader.next(), !Task.isCancelled {
            let now = LiveTimestamp.now
            for message in batch {
                guard message.retain else {
                    convergence!.live(topic: message.topic)
                    continue
                }
                if message.topic.hasPrefix(topics.prefix + "/legend/") {
                    legends.append(message.topic)
                    continue
                }
                // Each is right on its own (a style above the retained version, or the clearing
                // of a topic the state does not hold), so it goes out at once; only what the
                // end of the read implies waits for the end.
                for item in convergence!.retained(topic: message.topic, payload: message.payload, now: now) {
                    publisher.send(item)
                }
            }
        }
        try await reader.end()
        for item in convergence!.finish(now: .now, retainedLegends: legends, datasets: knownDatasets()) {
            publisher.send(item)
        }
        trustVersions()
        let counts = convergence!.counts
        lastConvergence = counts
        convergences += 1
        drainOutput()
        logger.info(
            "converged with the broker: \(counts.read) retained messages read, \(counts.agreed) agreed, \(counts.republished) published again, \(counts.cleared) cleared",
            metadata: ["converge.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
    }

    /// Publishes `offline` at the status topic and waits for the broker to have it (a clean
    /// disconnect does not trigger the will).
    public func publishOffline() async {
        // Not connected: the broker has published the will already, or will.
        // The last styles that waited for their interval go out before `offline`.
        sendAllCoalesced()
        drainOutput()
        guard output.state == .connected else { return }
        let client = output
        let offline = topics.statusPublication(online: false)
        let published = Task {
            try await client.publish(offline.topic, payload: offline.payload, qos: .atLeastOnce, retain: offline.retain)
        }
        // Do not hold up a shutdown for an acknowledgement that may not come.
        let timeout = Task {
            try await Task.sleep(for: .seconds(2))
            published.cancel()
        }
        do {
            try await published.value
        } catch {
            logger.warning("could not publish offline: \(error)")
        }
        timeout.cancel()
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
        while let batch = await intake.queue.next() {
            await stallForTesting?.wait()
            handle(batch)
            intake.queue.recycle(batch)
            drainOutput()
        }
    }

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
        converging?.cancel()
        await converging?.value
        sendAllCoalesced()
        await flush()
        await recordCheckpoint()
    }

    // MARK: - Checkpoint

    /// At a clean stop, while still connected: waits (at most `timeout`) until everything
    /// put in line has left and been acknowledged by the broker, then publishes a retained
    /// checkpoint (a fresh token) at ``checkpointTopic`` and waits for its acknowledgement.
    /// If nothing is put in line after it, the state file records it with the last snapshot
    /// (``recordCheckpoint()``); the next start, finding the same checkpoint retained at a
    /// broker that resumed its session, knows the broker holds every style the state file
    /// holds, and skips reading them all back (see ``connected()``).
    public func checkpoint(timeout: Duration = .seconds(5)) async {
        guard writer != nil, hasConverged, output.state == .connected else { return }
        let deadline = ContinuousClock.now + timeout
        while publisher.waiting > 0 || output.inFlight > 0 || markerInFlight {
            guard ContinuousClock.now < deadline, output.state == .connected else {
                logger.notice(
                    "stopping with \(publisher.waiting + output.inFlight) publications not yet acknowledged: the next start converges with the broker")
                return
            }
            drainOutput()
            try? await Task.sleep(for: .milliseconds(10))
        }
        let puts = publisher.puts
        let payload = sendMarker()
        // Bounded: a stop does not wait long for an acknowledgement that may not come.
        let acknowledgedBy = ContinuousClock.now + .seconds(2)
        while markerInFlight && ContinuousClock.now < acknowledgedBy { try? await Task.sleep(for: .milliseconds(5)) }
        if acknowledgedMarker == payload {
            stopCheckpoint = (payload, puts)
        } else {
            logger.notice("the broker did not acknowledge the stop's marker: the next start converges with the broker")
        }
    }

    /// Writes the checkpoint into the state file when it still holds: nothing was put in
    /// line after it (the last snapshot is written before this).
    private func recordCheckpoint() async {
        guard let writer, let stopCheckpoint, publisher.puts == stopCheckpoint.puts, snapshotFault == nil else { return }
        await writer.setCheckpoint(stopCheckpoint.payload)
    }

    /// Processes messages in groups of 16 whose memory is loaded together (see
    /// ``LiveCore/prefetch(_:topic:)``).
    public func handle(_ messages: [IntakeMessage]) {
        // The batch's publications wake the output's network thread once, at the end.
        output.withBatchedSends {
            var start = 0
            while start < messages.count {
                let end = min(start + 16, messages.count)
                core.prefetch(end - start) { messages[start + $0].topic }
                for index in start..<end { handle(messages[index]) }
                start = end
            }
        }
    }

    /// Processes one received update.
    public func handle(_ message: IntakeMessage) {
        message.payload.withUnsafeBytes { payload in
            handle(
                topic: message.topic, payload: payload, receivedAt: message.receivedAt, retain: message.retain,
                journalEnd: message.journalEnd, arrived: message.arrived)
        }
    }

    private func handle(
        topic: String, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp, retain: Bool, journalEnd: UInt64,
        arrived: ContinuousClock.Instant?
    ) {
        if journalEnd > appliedPosition { appliedPosition = journalEnd }
        processed += 1
        switch core.process(topic: topic, payload: payload, receivedAt: receivedAt, retained: retain) {
        case .changed(let change):
            publishLegend(change.address.dataset)
            queue(change, arrived: arrived)
            // A replayed update's time in the pipeline is not measured.
            if let arrived { metrics.processing.record(duration: ContinuousClock.now - arrived) }
        case .rejected(let reason, let text):
            logRejection(reason, text, topic: topic)
        case .unchanged, .ignoredOutOfOrder, .notSubscribed:
            break
        }
    }

    /// Periodic work: staleness, due summaries, and every `store.snapshotInterval` the
    /// snapshot.
    public func tick() async {
        let now = LiveTimestamp.now
        for change in core.expire(now: now) { queue(change, arrived: nil) }
        for summary in core.takeDueSummaries(now: now) {
            let publication = topics.publication(summary, updatedAt: now)
            if events.hasViewers { events.publish("summary", place: EventHub.Place(summary.key), json: publication.payload) }
            publisher.send(summary: publication)
        }
        if ContinuousClock.now - lastHeartbeat >= Self.heartbeatInterval {
            lastHeartbeat = .now
            events.heartbeat()
        }
        publisher.retryRefused()
        drainOutput()
        publishMarkerIfDue()
        reportRefusals()
        if ContinuousClock.now - lastSnapshot >= config.store.snapshotInterval { await flush() }
        trimHeapAfterBurst()
    }

    /// A burst (a long output line, a large snapshot) leaves its passing allocations as
    /// free heap that the C library keeps; set when one happened.
    private var burstToTrim = false
    private var lastTrim = (at: ContinuousClock.now, processed: 0)

    /// Once a burst or many updates are over (nothing waits for the broker), hands the
    /// free heap's pages back to the system, so that the resident memory is the state's
    /// again: at most every 5 s (a trim walks the heap's free lists: milliseconds).
    private func trimHeapAfterBurst() {
        if publisher.waiting >= Self.burstSize { burstToTrim = true }
        guard burstToTrim || processed - lastTrim.processed >= Self.burstSize, publisher.waiting == 0,
            ContinuousClock.now - lastTrim.at >= .seconds(5)
        else { return }
        burstToTrim = false
        lastTrim = (.now, processed)
        malloc_trim(0)
    }

    /// How many waiting publications, changed locations in one snapshot, or updates since
    /// the last trim make a burst.
    static let burstSize = 65_536

    /// Writes every changed location to the state file, with the journal position they
    /// bring the snapshot up to (the journal's segments before it are then deleted).
    public func flush() async {
        lastSnapshot = .now
        guard let writer else {
            // Nothing is written: forget the changes without building records of them.
            core.discardDirty()
            _ = core.store.takeVacated()
            return
        }
        let changed = core.store.takeChangedLocations()
        if changed.count >= Self.burstSize { burstToTrim = true }
        let vacated = core.store.takeVacated()
        let position = intake.journal != nil ? appliedPosition : nil
        guard changed.count > 0 || !vacated.isEmpty || position != coveredPosition else { return }
        // In parts, each its own transaction, so that the records of a large batch are never
        // all in memory at once; the journal position goes with the last part, once
        // everything it covers is written.
        var start = 0
        repeat {
            let end = min(start + Self.snapshotPart, changed.count)
            let records = core.store.records(changed, in: start..<end)
            let isLast = end == changed.count
            if let failure = await writer.write(
                records, deleting: start == 0 ? vacated : [], journalPosition: isLast ? position : nil,
                journal: isLast ? intake.journal : nil)
            {
                // Kept for the next try: the store still holds these records, and the journal
                // everything since the last snapshot.
                core.store.markDirty(changed, in: start..<changed.count)
                if start == 0 { core.store.returnVacated(vacated) }
                snapshotFailures += 1
                snapshotFault = "cannot write the state file: \(failure)"
                if let suppressed = snapshotFaultLog.admit() {
                    let more = suppressed > 0 ? " (\(suppressed) more failures since the last report)" : ""
                    logger.error(
                        "cannot write the state file (\(failure)); the journal keeps every update until it can\(more)",
                        metadata: ["store.path": "\(config.store.path)"])
                }
                return
            }
            start = end
        } while start < changed.count
        if snapshotFault != nil {
            logger.notice("the state file is writable again", metadata: ["store.path": "\(config.store.path)"])
        }
        snapshotFault = nil
        coveredPosition = position
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
    public var storageFault: String? { intake.storageFault ?? snapshotFault }

    /// Hides or shows a layer and re-publishes what that changes.
    /// - Returns: how many locations changed.
    @discardableResult
    public func setLayer(_ layer: String, hidden: Bool) -> Int {
        let changes = core.setLayer(layer, hidden: hidden, now: .now)
        for change in changes { queue(change, arrived: nil) }
        return changes.count
    }

    /// Takes a reloaded config's rules, styles and criteria (not its broker settings) and
    /// re-publishes what changed.
    /// - Returns: how many locations changed.
    @discardableResult
    public func reload(_ newConfig: LiveDataConfig) async -> Int {
        let oldFilters = Set(config.subscriptions.map(\.filter.string))
        let newFilters = Set(newConfig.subscriptions.map(\.filter.string))
        config.ruleSet = newConfig.ruleSet
        config.subscriptions = newConfig.subscriptions
        let changes = core.reload(ruleSet: newConfig.ruleSet, subscriptions: newConfig.subscriptions, now: .now)
        for change in changes { queue(change, arrived: nil) }
        await flush()
        await writer?.setRulesFingerprint(core.store.ruleEngine.fingerprint)
        publisher.forgetLegends()
        for dataset in knownDatasets() { publishLegend(dataset) }
        let qos = MQTTQoS(rawValue: Int32(config.broker.qos)) ?? .atLeastOnce
        for filter in newFilters.subtracting(oldFilters).sorted() {
            do {
                try await subscribe(filter, qos: qos)
            } catch {
                logger.error("\(error)")
            }
        }
        for filter in oldFilters.subtracting(newFilters).sorted() {
            refusedSubscriptions.removeAll { $0 == filter }
            try? await client.unsubscribe(filter)
        }
        return changes.count
    }

    /// The legend for a dataset.
    public func legend(dataset: String?) -> Legend { config.ruleSet.legend(dataset: dataset) }

    // MARK: - Publishing

    /// Puts a change in line for the broker (and tells the floor view); `arrived`: when the
    /// update behind it reached the daemon.
    private func queue(_ change: DerivedChange, arrived: ContinuousClock.Instant?) {
        guard !replaying else { return }
        // The floor view shows the state as it is, whenever the broker gets it.
        var payload: [UInt8]?
        if events.hasViewers {
            payload = topics.payload(change)
            if let old = change.movedFrom { publishRemoval(old) }
            events.publish("change", place: change.address.place, json: payload!)
        }
        if case .inDoubt = versions, !(convergence?.hasSeen(change.address) ?? false) {
            // Its version may be below the broker's: the convergence publishes it (its
            // retained style is still to be read, or it is among those the end of the read
            // publishes), or, while the checkpoint is checked, it waits to be known right.
            if held != nil {
                if let old = change.movedFrom { held!.put(topics.clearing(styleOf: old), under: .style(old), since: arrived) }
                held!.put(change, since: arrived)
            }
            return
        }
        convergence?.published(change.address)
        // A location that moved: its old topic is cleared as the new one gets the style.
        if let old = change.movedFrom { clear(old) }
        guard coalescer != nil else {
            publisher.send(change: change, since: arrived)
            return
        }
        let publication = Publication(
            topic: topics.style(change.address), payload: payload ?? topics.payload(change), retain: topics.retain)
        if coalescer!.admit(publication, now: .now) { publisher.send(change: change, since: arrived) }
    }

    /// Hands the client what waits, as far as the broker's window has room; when it is
    /// full, the acknowledgement that halves it wakes this again (``OutputWindow``).
    private func drainOutput() {
        while true {
            switch publisher.drain() {
            case .empty, .disconnected: return
            case .more: continue
            case .windowFull:
                let size = output.session.sendWindow
                window.arm(window: size)
                // Acknowledgements that came between the drain and the arming woke nobody.
                if output.inFlight > size / 2 { return }
            }
        }
    }

    /// Sends the coalesced changes whose `output.minInterval` has ended.
    private func sendDueCoalesced() { sendCoalesced(coalescer?.due(now: .now)) }

    /// Sends every coalesced change that waits (on shutdown).
    private func sendAllCoalesced() { sendCoalesced(coalescer?.takeAll(now: .now)) }

    private func sendCoalesced(_ publications: [Publication]?) {
        guard let publications, !publications.isEmpty else { return }
        for publication in publications { publisher.send(changePublication: publication) }
        drainOutput()
    }

    /// Clears a style topic (the location left it).
    private func clear(_ address: LocationAddress) {
        let clearing = topics.clearing(styleOf: address)
        // A style waiting for its interval must not land after the clearing.
        coalescer?.drop(topic: clearing.topic)
        publisher.send(clearing)
        drainOutput()
    }

    /// Tells the floor view a location left `address`.
    private func publishRemoval(_ address: LocationAddress) {
        if events.hasViewers {
            var stream = JSONStream(capacity: 160)
            stream.beginObject()
            stream.add("location", address.location)
            stream.key("topic")
            address.write(to: &stream)
            stream.endObject()
            events.publish("remove", place: address.place, json: stream.bytes)
        }
    }

    /// Opens a floor-view viewer's event stream: resumed after `lastEventID` when the hub
    /// still has what followed it, else starting with a snapshot of the scope (on the
    /// actor, so that no change falls between the snapshot and the stream).
    public func openEvents(_ scope: EventHub.Scope, lastEventID: String?) -> EventHub.Subscription {
        events.subscribe(scope, lastEventID: lastEventID) { snapshotJSON(scope) }
    }

    /// `{"features": [GeoJSON features…]}`: the shapes drawn on a floor (see
    /// ``VenueGeometry/features(dataset:venue:building:floor:ids:)``); empty without a
    /// `geometry:` file.
    public func geometryJSON(dataset: String, venue: String, building: String, floor: String) -> String {
        guard let geometry = config.geometry else { return #"{"features": []}"# }
        let key = SummaryTracker.Key(dataset: dataset, venue: venue, building: building, floor: floor)
        let ids = Set(core.store.records(floor: key).map(\.address.location))
        let features = geometry.features(dataset: dataset, venue: venue, building: building, floor: floor, ids: ids)
        return "{\"features\": [" + features.map(\.geoJSON).joined(separator: ", ") + "]}"
    }

    /// Every floor and building with locations, and their summaries, in key order.
    public var summaries: [SummaryTracker.Summary] { core.store.summaries.all() }

    /// Floors the geometry places shapes on, whether or not a location reported there yet.
    public var geometryFloors: [SummaryTracker.Key] {
        guard let geometry = config.geometry else { return [] }
        return Set(
            geometry.features.compactMap { feature -> SummaryTracker.Key? in
                guard let dataset = feature.dataset, let venue = feature.venue, let building = feature.building,
                    let floor = feature.floor
                else { return nil }
                return SummaryTracker.Key(dataset: dataset, venue: venue, building: building, floor: floor)
            }
        ).sorted()
    }

    /// `{"locations": [records…], "summaries": [summaries…], "legend": {…}}` for a scope.
    func snapshotJSON(_ scope: EventHub.Scope) -> [UInt8] {
        let summaries = core.store.summaries.all().filter { summary in
            scope.holds(EventHub.Place(summary.key))
        }
        var records: [LocationRecord] = []
        for summary in summaries where summary.key.floor != nil {
            records += core.store.records(floor: summary.key)
        }
        let now = LiveTimestamp.now
        let text = "{\"locations\": [" + records.map(\.json).joined(separator: ", ") + "], \"summaries\": ["
            + summaries.map { $0.json(updatedAt: now) }.joined(separator: ", ") + "], \"legend\": "
            + config.ruleSet.legend(dataset: scope.dataset).json + "}"
        return Array(text.utf8)
    }

    /// Publishes a dataset's legend unless it is published already.
    private func publishLegend(_ dataset: String) {
        guard publisher.needsLegend(dataset) else { return }
        publisher.send(topics.publication(config.ruleSet.legend(dataset: dataset), dataset: dataset))
    }

    /// Publications the broker refused, on every connection, and the last refusal (the
    /// output connection's first: it carries nearly all of them).
    private nonisolated var refusedPublishes: (count: Int, last: MQTTError?) {
        let each = connections.map(\.refusedPublishes)
        return (each.reduce(0) { $0 + $1.count }, each.reversed().lazy.compactMap(\.last).first)
    }

    private func knownDatasets() -> Set<String> {
        Set(config.subscriptions.compactMap { $0[.dataset] }).union(core.store.datasets)
    }

    /// Logs the publications refused since the last report, at most every 10 s: by the
    /// broker (not sent again) and by the MQTT library (dropped after retries).
    private func reportRefusals() {
        let broker = refusedPublishes
        let library = publisher.dropped
        guard broker.count > reportedRefusals.broker || library > reportedRefusals.library, refusalLog.admit() != nil else { return }
        if broker.count > reportedRefusals.broker {
            logger.warning(
                "the broker refused \(broker.count - reportedRefusals.broker) publications; not sent again; the last: \(broker.last.map { "\($0)" } ?? "")")
        }
        if library > reportedRefusals.library {
            logger.warning(
                "dropped \(library - reportedRefusals.library) publications the MQTT library refused \(Publisher.maximumAttempts) times; the last: \(publisher.lastDropped ?? "")")
        }
        reportedRefusals = (broker.count, library)
    }

    /// Logs a dropped update, at most once a second with a count of the ones not logged.
    private func logRejection(_ reason: LiveCore.RejectReason, _ text: String, topic: String) {
        guard let suppressed = rejections.admit() else { return }
        let more = suppressed > 0 ? " (and \(suppressed) more since the last report)" : ""
        logger.warning(
            "dropped an update: \(text)\(more)",
            metadata: ["mqtt.topic": "\(topic)", "update.rejected": "\(reason.rawValue)"])
    }
}
