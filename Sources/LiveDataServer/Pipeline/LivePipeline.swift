import AsyncAlgorithms
import DisplayRules
import LiveDataConfiguration
import LiveState
import LiveStatePersistence
import LiveTopics
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
        /// The floor view's viewers.
        public var events = EventHub.Statistics()
    }

    nonisolated let client: MQTTClient
    let logger: Logger
    private(set) var config: LiveDataConfig
    private var core: LiveCore
    private let topics: OutputTopics
    private let writer: StoreWriter?
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
    /// Opens when the first convergence after the start has read the broker's retained
    /// styles: until then no update is processed, so that nothing is published under a
    /// version lower than one the broker holds (the daemon may have raised versions before
    /// a crash, which neither the snapshot nor the journal recorded).
    private let firstConvergence = StartupGate()
    private var publisher: Publisher
    /// `output.minInterval`, when set.
    private var coalescer: PublishCoalescer?
    private var rejections = RateLimitedLog()
    /// Publications the broker refused and the publisher dropped, as of the last report.
    private var reportedRefusals = (broker: 0, library: 0)
    private var refusalLog = RateLimitedLog(interval: .seconds(10))
    /// Restored, connected and subscribed.
    public private(set) var isReady = false
    private let metrics: DaemonMetrics
    /// The floor view's live feed: what is published, for the viewers in scope.
    public nonisolated let events: EventHub
    private var lastHeartbeat = ContinuousClock.now
    static let heartbeatInterval = Duration.seconds(15)

    /// Builds the core, restores the stored state and replays the journal's tail (publishing
    /// nothing yet).
    /// - Throws: when the state file cannot be opened or read.
    public init(
        config: LiveDataConfig, client: MQTTClient, intake: Intake, metrics: DaemonMetrics = DaemonMetrics(), logger: Logger,
        events: EventHub = EventHub()
    ) async throws {
        self.config = config
        self.events = events
        self.metrics = metrics
        self.client = client
        self.intake = intake
        self.logger = logger
        topics = OutputTopics(prefix: config.output.prefix, retain: config.output.retain)
        publisher = Publisher(client: client, qos: MQTTQoS(rawValue: Int32(config.output.qos)) ?? .atLeastOnce)
        coalescer = config.output.minInterval > .zero ? PublishCoalescer(interval: config.output.minInterval) : nil
        core = LiveCore(
            ruleSet: config.ruleSet, subscriptions: config.subscriptions, summaryInterval: config.output.summaryInterval,
            limits: LiveLimits(
                payload: config.limits.payload, locations: config.limits.locations, domains: config.limits.domains,
                futureSkew: config.limits.futureSkew))
        if config.store.isInMemory {
            writer = nil
            return
        }
        // Read with a connection of our own, then hand the file to the writer.
        var restored: RestoredState
        do {
            restored = try core.restore(fromFile: config.store.path)
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
        if restored.unreadable > 0 {
            logger.warning(
                "skipped \(restored.unreadable) stored locations that could not be read",
                metadata: ["store.path": "\(config.store.path)"])
        }
        writer = try StoreWriter(path: config.store.path, logger: logger)
        logger.info("restored \(restored.count) locations", metadata: ["store.path": "\(config.store.path)"])
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
            let replay = try journal.replay(from: restored.journalPosition, prefetchingFor: core) { record in
                handle(
                    topic: String(decoding: record.topic, as: UTF8.self), payload: record.payload, receivedAt: record.receivedAt,
                    retain: record.retain, journalEnd: record.end, arrived: nil)
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
    }

    public func markReady() { isReady = true }

    /// The broker connection's state.
    public nonisolated var brokerState: MQTTConnectionState { client.state }

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
            core: core.counters, store: core.store.counters, published: publisher.changes, coalesced: coalescer?.coalesced ?? 0,
            summariesPublished: publisher.summaries, locations: core.store.count,
            refusedSubscriptions: refusedSubscriptions.count, intake: intake.statistics, replayed: replayed,
            snapshotFailures: snapshotFailures, publishesRefused: client.refusedPublishes.count, publishesDropped: publisher.dropped,
            events: events.statistics)
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

    /// Publishes `online`, the legends and whatever waits, and starts a convergence; call
    /// after every (re)connection.
    public func connected() {
        publisher.send(topics.statusPublication(online: true))
        publisher.forgetLegends()
        for dataset in knownDatasets() { publishLegend(dataset) }
        publisher.resendUnsent()
        startConvergence()
    }

    // MARK: - Convergence

    /// Counts of the last finished convergence, and how many have finished.
    public private(set) var lastConvergence: Convergence.Counts?
    public private(set) var convergences = 0
    private var converging: Task<Void, Never>?
    /// The one under way: changes published meanwhile count as seen at the broker.
    private var convergence: Convergence?
    private var convergeAgain = false

    private func startConvergence() {
        guard converging == nil else {
            // Reconnected while one runs: another follows it (the broker may have lost
            // retained messages meanwhile).
            convergeAgain = true
            return
        }
        converging = Task { await self.convergeUntilCurrent() }
    }

    private func convergeUntilCurrent() async {
        repeat {
            convergeAgain = false
            await converge()
            // Read or not (no second connection, a shutdown), updates are processed now.
            await firstConvergence.open()
        } while convergeAgain && !Task.isCancelled
        converging = nil
    }

    /// Reads back the retained messages under the prefix and publishes what makes them
    /// agree with the state (see ``Convergence``). Live updates go on meanwhile.
    func converge() async {
        let started = ContinuousClock.now
        let reader: RetainedReader
        do {
            reader = try RetainedReader(configuration: client.configuration, prefix: topics.prefix, logger: logger)
            try await reader.start()
        } catch {
            logger.warning("cannot read back the retained messages to converge: \(error); trying again on the next connection")
            return
        }
        convergence = Convergence(core: core, topics: topics)
        defer { convergence = nil }
        publisher.send(Publication(topic: reader.marker, payload: Array("end".utf8), retain: false))
        var legends: [String] = []
        while let batch = await withTaskCancellationHandler(
            operation: { await reader.next() }, onCancel: { reader.queue.close() }), !Task.isCancelled
        {
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
                for publication in convergence!.retained(topic: message.topic, payload: message.payload, now: now) {
                    publisher.send(publication)
                }
            }
        }
        await reader.stop()
        guard !Task.isCancelled else { return }
        for publication in convergence!.finish(now: .now, retainedLegends: legends, datasets: knownDatasets()) {
            publisher.send(publication)
        }
        let counts = convergence!.counts
        lastConvergence = counts
        convergences += 1
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
        guard client.state == .connected else { return }
        let client = client
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

    /// Processes received updates, a batch at a time, until the intake closes; the first
    /// once the first convergence is done.
    static let gatherBelow = 64
    static let gatherTime = Duration.milliseconds(1)

    public func run() async {
        await firstConvergence.wait()
        while let batch = await intake.queue.next() {
            let count = batch.count
            handle(batch)
            intake.queue.recycle(batch)
            // A small batch means the pipeline keeps up with the stream: let the next one
            // gather for a millisecond rather than have the network thread wake this task
            // for every message (a wake is a futex call on each side and a context switch).
            if count < Self.gatherBelow { try? await Task.sleep(for: Self.gatherTime) }
        }
    }

    /// Runs everything until the client disconnects: messages, `connected()` after every
    /// (re)connection, and ``tick()`` every `tickInterval`. Then writes what is left.
    public func serve(tickInterval: Duration = .milliseconds(100)) async {
        // Every (re)connection, the one before this call included, is in the event stream.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.run() }
            group.addTask {
                for await event in self.client.events where event == .state(.connected) {
                    await self.connected()
                }
                // The client has ended: nothing more comes in; what waits is still processed.
                self.intake.queue.close()
                await self.firstConvergence.open()
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
            group.cancelAll()
        }
        converging?.cancel()
        await converging?.value
        sendAllCoalesced()
        await flush()
    }

    /// Processes messages in groups of 16 whose memory is loaded together (see
    /// ``LiveCore/prefetch(_:topic:)``).
    public func handle(_ messages: [IntakeMessage]) {
        // The batch's publications wake the client's network thread once, at the end.
        client.withBatchedSends {
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
        switch core.process(topic: topic, payload: payload, receivedAt: receivedAt, retained: retain) {
        case .changed(let change):
            publishLegend(change.address.dataset)
            queue(change)
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
        for change in core.expire(now: now) { queue(change) }
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
        reportRefusals()
        if ContinuousClock.now - lastSnapshot >= config.store.snapshotInterval { await flush() }
    }

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
        let dirty = core.takeDirty()
        let vacated = core.store.takeVacated()
        let position = intake.journal != nil ? appliedPosition : nil
        guard !dirty.isEmpty || !vacated.isEmpty || position != coveredPosition else { return }
        if let failure = await writer.write(dirty, deleting: vacated, journalPosition: position, journal: intake.journal) {
            // Kept for the next try: the store still holds these records, and the journal
            // everything since the last snapshot.
            core.markDirty(dirty.map(\.address))
            core.store.returnVacated(vacated)
            snapshotFailures += 1
            snapshotFault = "cannot write the state file: \(failure)"
            if let suppressed = snapshotFaultLog.admit() {
                let more = suppressed > 0 ? " (\(suppressed) more failures since the last report)" : ""
                logger.error(
                    "cannot write the state file (\(failure)); the journal keeps every update until it can\(more)",
                    metadata: ["store.path": "\(config.store.path)"])
            }
        } else {
            if snapshotFault != nil {
                logger.notice("the state file is writable again", metadata: ["store.path": "\(config.store.path)"])
            }
            snapshotFault = nil
            coveredPosition = position
        }
    }

    /// Why updates cannot be kept right now (the journal or the state file cannot be
    /// written), if they cannot: readiness reports it.
    public var storageFault: String? { intake.storageFault ?? snapshotFault }

    /// Hides or shows a layer and re-publishes what that changes.
    /// - Returns: how many locations changed.
    @discardableResult
    public func setLayer(_ layer: String, hidden: Bool) -> Int {
        let changes = core.setLayer(layer, hidden: hidden, now: .now)
        for change in changes { queue(change) }
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
        for change in changes { queue(change) }
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

    private func queue(_ change: DerivedChange) {
        guard !replaying else { return }
        convergence?.published(change.address)
        // A location that moved: its old topic is cleared as the new one gets the style.
        if let old = change.movedFrom { clear(old) }
        let publication = topics.publication(change)
        if events.hasViewers { events.publish("change", place: change.address.place, json: publication.payload) }
        if coalescer?.admit(publication, now: .now) ?? true { publisher.send(change: publication) }
    }

    /// Sends the coalesced changes whose `output.minInterval` has ended.
    private func sendDueCoalesced() { sendCoalesced(coalescer?.due(now: .now)) }

    /// Sends every coalesced change that waits (on shutdown).
    private func sendAllCoalesced() { sendCoalesced(coalescer?.takeAll(now: .now)) }

    private func sendCoalesced(_ publications: [Publication]?) {
        guard let publications, !publications.isEmpty else { return }
        client.withBatchedSends {
            for publication in publications { publisher.send(change: publication) }
        }
    }

    /// Clears a style topic (the location left it), and tells the floor view.
    private func clear(_ address: LocationAddress) {
        let clearing = topics.clearing(styleOf: address)
        // A style waiting for its interval must not land after the clearing.
        coalescer?.drop(topic: clearing.topic)
        publisher.send(clearing)
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

    private func knownDatasets() -> Set<String> {
        Set(config.subscriptions.compactMap { $0[.dataset] }).union(core.store.datasets)
    }

    /// Logs the publications refused since the last report, at most every 10 s: by the
    /// broker (not sent again) and by the MQTT library (dropped after retries).
    private func reportRefusals() {
        let broker = client.refusedPublishes
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
