import DisplayRules
import LiveState
import LiveTopics
import Logging
import Mosquitto

/// The output stage: what the broker is to be sent, and when. It owns the publisher (the
/// lines, the window, the legends, what was handed over), the coalescer of
/// `output.minInterval`, whether the state's versions may be published yet, the changes
/// held until that is known, and the reports of refused publications.
///
/// Other stages hand it publications and ask it questions; none changes its state but
/// through these calls.
final class OutputStage {
    /// Whether the state's versions are known to be at or above the broker's. Until the
    /// first convergence has finished they may be lower (a crashed predecessor may have
    /// raised them without recording it): a change is not published under them, and the
    /// convergence publishes what changed, above the broker's versions. Meanwhile changes
    /// are held: a checkpoint found at the broker sends them; a convergence drops them.
    enum Versions {
        /// Not known yet; `held` keeps the changes made meanwhile, until a convergence drops
        /// them (nil).
        case inDoubt
        case trusted
    }

    private var publisher: Publisher
    private var legends = LegendBook()
    private(set) var versions = Versions.inDoubt
    /// While the versions are in doubt: the changes made meanwhile (see ``Versions``).
    /// A property of its own, mutated in place, never copied.
    private var held: PendingOutput? = PendingOutput()
    /// `output.minInterval`, when set.
    private var coalescer: PublishCoalescer?
    private let minInterval: Duration
    /// The connection the stage publishes on when no lease connection is in use.
    let home: MQTTClient
    /// Wakes the drain when the broker's window has room again.
    let window: OutputWindow
    /// The rules whose legends are published.
    var ruleSet: RuleSet
    /// Whether what waits may go out now: always, but for a failover replica, while its
    /// lease is its own (set by the owner).
    var permit: () -> Bool = { true }
    /// The styles a convergence found missing at the broker, still to publish again: taken
    /// from the state as the line empties (see ``refill()``).
    private var republishing: Republication?
    /// New locations' first styles that came while the line was long: each waits as its
    /// location, and its change is made from the state as the line empties (see
    /// ``refill()``), so that a burst of new locations costs the line no change each.
    private var firstStyles: FirstStyles
    private var republishingSince = ContinuousClock.now
    /// What the republications have done, for the metrics.
    private(set) var republish = RepublishStatistics()
    /// With a watched bridge (`partition.bridge`): the clears it may lose, recorded as they
    /// are made (see ``ClearedTopics``).
    private var cleared: ClearedTopics?
    private var reportedRefusals = (broker: 0, library: 0)
    private var refusalLog = RateLimitedLog(interval: .seconds(10))
    private let logger: Logger

    init(
        client: MQTTClient, qos: MQTTQoS, topics: OutputFormat, minInterval: Duration, ruleSet: RuleSet, window: OutputWindow,
        store: LiveStore, logger: Logger
    ) {
        publisher = Publisher(client: client, qos: qos, topics: topics)
        firstStyles = FirstStyles(store: store)
        home = client
        self.minInterval = minInterval
        coalescer = minInterval > .zero ? PublishCoalescer(interval: minInterval) : nil
        self.ruleSet = ruleSet
        self.window = window
        self.logger = logger
    }

    // MARK: - What it is asked

    /// The formats, with the failover epoch the payloads carry while active.
    var topics: OutputFormat { publisher.topics }
    var hasTrustedVersions: Bool { if case .trusted = versions { true } else { false } }
    /// The connection publications go out on now.
    var client: MQTTClient { publisher.client }
    /// Publishing on a lease connection (an active failover replica).
    var isOnLease: Bool { publisher.client !== home }
    /// Publications waiting for the window, the first styles waiting as their locations, and
    /// the locations a republication has still to look at (each may be one).
    var waiting: Int { publisher.waiting + firstStyles.count + (republishing?.remaining ?? 0) }
    /// Nothing waits to be handed over, nor for its interval: every change put in line so
    /// far is with the client.
    var isIdle: Bool { waiting == 0 && (coalescer?.waitingCount ?? 0) == 0 }
    var handedOver: Int { publisher.handedOver }
    var puts: Int { publisher.puts }
    var recent: [LocationAddress?] { publisher.recent }
    var recentIsWhole: Bool { publisher.recentIsWhole }
    /// Whether the clears are recorded for a bridge (``recordClears(horizon:)``).
    var recordsClears: Bool { cleared != nil }
    /// The paced interval of `output.minInterval`, when set.
    var coalescingInterval: Duration? { coalescer?.interval }

    // MARK: - Changes

    /// Puts a change in line for the broker, unless its version may be below the broker's
    /// (`seenByConvergence` false while in doubt: then it is held, or left to the
    /// convergence). `clearing`: its old topic, cleared as the new one gets the style;
    /// `payload`: its JSON when already written.
    /// - Returns: whether it was put in line.
    func put(
        _ change: DerivedChange, arrived: MonotonicInstant?, seenByConvergence: Bool, clearing old: LocationAddress?, payload: [UInt8]?
    ) -> Bool {
        if case .inDoubt = versions, !seenByConvergence {
            // The convergence publishes it (its retained style is still to be read, or the
            // read's end publishes it), or it waits while the checkpoint is checked.
            if let old { holdClearing(old, since: arrived) }
            held?.put(change, since: arrived)
            return false
        }
        if let old { clear(old) }
        republishing?.published(change.address)
        guard coalescer != nil else {
            if firstStyles.takes(change, lineIsLong: publisher.waiting >= Self.republishLimit) { return true }
            publisher.send(change: change, since: arrived)
            return true
        }
        let topics = publisher.topics
        let publication = Publication(
            topic: topics.style(change.address), payload: payload ?? topics.payload(change), retain: topics.retain)
        if coalescer?.admit(publication, now: .now) == true { publisher.send(change: change, since: arrived) }
        return true
    }

    /// Clears a style topic (the location left it); held while the versions are in doubt.
    func clearHandedOver(_ address: LocationAddress) {
        if case .inDoubt = versions {
            holdClearing(address, since: nil)
            return
        }
        clear(address)
    }

    private func holdClearing(_ address: LocationAddress, since: MonotonicInstant?) {
        let clearing = topics.clearing(styleOf: address)
        cleared?.cleared(clearing.topic)
        held?.put(clearing, under: .style(address), since: since)
    }

    /// Clears a style topic (the location left it).
    func clear(_ address: LocationAddress) {
        let clearing = topics.clearing(styleOf: address)
        cleared?.cleared(clearing.topic)
        // A style waiting for its interval must not land after the clearing.
        coalescer?.drop(topic: clearing.topic)
        publisher.send(clearing)
    }

    func send(_ publication: Publication) {
        noteIfClear(publication)
        publisher.send(publication)
    }

    func send(summary: Publication) {
        noteIfClear(summary)
        publisher.send(summary: summary)
    }

    func send(change: DerivedChange) { publisher.send(change: change) }

    func send(_ item: PendingOutput.Item, since: MonotonicInstant? = nil) {
        if case .publication(let publication) = item { noteIfClear(publication) }
        publisher.send(item, since: since)
    }

    /// Hands the client what waits, as far as the broker's window has room; when it is
    /// full, the acknowledgement that halves it wakes the drain again (``OutputWindow``).
    /// Nothing while ``permit`` says no.
    func drain() {
        guard permit() else { return }
        while true {
            refill()
            let drained = publisher.drain()
            switch drained {
            case .empty where republishing != nil || !firstStyles.isEmpty: continue
            case .empty, .disconnected: return
            case .more: continue
            case .windowFull:
                window.arm(window: publisher.window)
                // Acknowledgements that came between the drain and the arming woke nobody.
                if !publisher.halfOpen { return }
            }
        }
    }

    /// Runs `body` with the client's sends batched (one wake-up of its network thread).
    func withBatchedSends(_ body: () -> Void) { publisher.client.withBatchedSends(body) }

    /// Puts in line the coalesced changes whose interval has ended (all of them with `all`).
    /// - Returns: whether any was.
    @discardableResult
    func sendCoalesced(all: Bool = false) -> Bool {
        guard let publications = all ? coalescer?.takeAll(now: .now) : coalescer?.due(now: .now), !publications.isEmpty else {
            return false
        }
        for publication in publications { publisher.send(changePublication: publication) }
        return true
    }

    /// Publishes `offline` on the output's own connection and waits (at most 2 s) for the
    /// broker to have it (a clean disconnect does not trigger the will; not connected, the
    /// broker has published the will already, or will).
    nonisolated(nonsending) func publishOffline() async {
        guard home.state == .connected else { return }
        let client = home
        let offline = topics.statusPublication(online: false)
        do {
            let sent: Void? = try await withTimeout(.seconds(2)) {
                try await client.publish(offline.topic, payload: offline.payload, qos: .atLeastOnce, retain: offline.retain)
            }
            if sent == nil { logger.warning("could not publish offline: the broker did not acknowledge it within 2 s") }
        } catch {
            logger.warning("could not publish offline: \(error)")
        }
    }

    // MARK: - Publishing the state again

    /// How many republications each connection's line is given ahead of its window: enough
    /// that no window waits for the walk, few enough to cost nothing.
    static let republishAhead = 128
    /// How many may wait in all: the walk goes in the state's order and its changes spread
    /// over the connections by location, so a connection slower than the others collects
    /// more of them than its share while the others' lines are filled up.
    static let republishLimit = 1024

    /// Publishes again, as the window makes room, what `republication` finds missing at the
    /// broker; one under way is replaced (the convergence that made this one saw what the
    /// other had left).
    /// - Returns: the locations it is to look at.
    @discardableResult
    func republish(_ republication: consuming Republication?) -> Int {
        republishing = republication
        let remaining = republishing?.remaining ?? 0
        republishingSince = .now
        republish.outstandingPeak = 0
        refill()
        return remaining
    }

    /// Whether a style to publish again may be put in line now, rather than left to the
    /// republication after a convergence's read (see ``republishAhead``).
    var hasRoomForRepublication: Bool { publisher.waiting < Self.republishAhead * client.connectionCount }

    /// Stops publishing the state again (a convergence that starts over, a change of role).
    func stopRepublishing() { republishing = nil }

    /// Whether the lines may take one more change made from the state (a waiting first
    /// style, a republication): a connection has fewer than ``republishAhead`` waiting, and
    /// fewer than ``republishLimit`` wait in all.
    private var lineTakesFromState: Bool {
        publisher.shortestLine < Self.republishAhead && publisher.waiting < Self.republishLimit
    }

    /// Puts the waiting first styles, then republications, in line while
    /// ``lineTakesFromState``, so that what was taken from the state and is not acknowledged
    /// yet stays within ``RepublishStatistics/bound``; the acknowledgements that empty the
    /// lines bring the next.
    private func refill() {
        if !firstStyles.isEmpty {
            let now = LiveTimestamp.now
            while lineTakesFromState, let change = firstStyles.next(now: now) {
                publisher.send(change: change)
            }
        }
        guard republishing != nil else {
            republish.remaining = 0
            return
        }
        let now = LiveTimestamp.now
        var added = false
        while lineTakesFromState, let change = republishing?.next(now: now) {
            publisher.send(change: change)
            republish.republished += 1
            added = true
        }
        if added { noteOutstanding() }
        republish.remaining = republishing?.remaining ?? 0
        republish.bound = Self.republishLimit + publisher.window * client.connectionCount
        guard let walk = republishing, walk.isFinished else { return }
        republishing = nil
        republish.outstanding = 0
        guard walk.republished > 0 else { return }
        logger.info(
            "published again the \(walk.republished) styles the broker did not hold",
            metadata: ["republish.milliseconds": "\((ContinuousClock.now - republishingSince).milliseconds)"])
    }

    /// Notes the publications waiting or awaiting acknowledgement as the republication adds
    /// to them: what its pacing answers for. Between two additions, live changes may fill the
    /// line beyond the bound (a burst of updates faster than the window, which the walk then
    /// waits behind); they wait as they would without a republication, one per location, and
    /// ``Counts/waiting`` reports them.
    private func noteOutstanding() {
        republish.outstanding = publisher.waiting + publisher.client.inFlight
        republish.outstandingPeak = max(republish.outstandingPeak, republish.outstanding)
    }

    // MARK: - Clears a bridge may lose

    /// Records from now on every style or summary topic cleared (a bridge is watched).
    func recordClears(horizon: Duration) { cleared = ClearedTopics(horizon: horizon) }

    private func noteIfClear(_ publication: Publication) {
        guard cleared != nil, publication.retain, publication.payload.isEmpty else { return }
        let topics = topics
        guard topics.address(ofStyleTopic: publication.topic) != nil || topics.place(ofSummaryTopic: publication.topic) != nil
        else { return }
        cleared?.cleared(publication.topic)
    }

    /// Records the clear of a location's old style topic that is not put in line: one that
    /// a journal's replay made again (the run before the crash published it), or one of a
    /// standby (the active published it, and this one may be active when the bridge is back).
    func noteCleared(styleOf address: LocationAddress) { cleared?.cleared(topics.clearing(styleOf: address).topic) }

    /// Puts in line again a clear recorded earlier (a bridge came back), without recording it anew.
    func sendClearAgain(_ topic: String) { publisher.send(Publication(topic: topic, payload: [], retain: true)) }

    /// The clears recorded since the last call, for the state file.
    func takeUnwrittenClears() -> [String: Int64] { cleared?.takeUnwritten() ?? [:] }

    /// Clears the state file could not take, kept for the next try.
    func returnUnwrittenClears(_ topics: [String: Int64]) { cleared?.putBack(topics) }

    /// Without a state file: the clears recorded (those within the horizon), in topic order.
    func clearsInMemory() -> [String] {
        cleared?.forgetExpired()
        return cleared?.unwritten.keys.sorted() ?? []
    }

    /// Without a state file: forgets recorded clears (published again, or not this daemon's).
    func forgetClearsInMemory(_ topics: [String]) { cleared?.forget(topics) }

    /// The time (milliseconds since 1970) before which recorded clears have passed the
    /// horizon, when the state file is due a prune of them: at the first snapshot, then
    /// hourly (see ``ClearedTopics/takePruneDue()``), and whenever `always`.
    func clearsPruneCutoff(always: Bool = false) -> Int64? {
        guard cleared != nil, cleared?.takePruneDue() == true || always else { return nil }
        return cleared?.cutoff
    }

    // MARK: - Versions

    /// The state's versions are known to be at or above the broker's.
    func trustVersions() { versions = .trusted }

    /// The changes held while the versions were in doubt; none is held from now on.
    func takeHeld() -> PendingOutput? { held.take() }

    /// A convergence publishes from the state: what was held is not needed.
    func dropHeld() { held = nil }

    /// A change of role: publications go out on `connection` under `epoch`; what waited is
    /// dropped (a new active converges from its own state), the versions are in doubt
    /// until it has, and the legends are held until compared with the retained ones.
    func publish(on connection: MQTTClient, epoch: UInt64?) {
        _ = publisher.discardWaiting()
        firstStyles.removeAll()
        republishing = nil
        publisher.client = connection
        publisher.topics.epoch = epoch
        versions = .inDoubt
        held = nil
        legends.hold()
    }

    /// Forgets what waits for its interval (a replica that stops publishing).
    func resetCoalescer() {
        if coalescer != nil { coalescer = PublishCoalescer(interval: minInterval) }
    }

    // MARK: - Sync markers

    /// Forgets the recent publications before `position` (a marker covers them).
    func forgetRecent(before position: Int) { publisher.forgetRecent(before: position) }

    // MARK: - Legends

    /// Publishes the legend of a change's dataset unless it is published already.
    func publishLegend(of address: LocationAddress) {
        guard let dataset = legends.needsLegend(of: address) else { return }
        sendLegend(dataset)
    }

    /// Publishes a dataset's legend unless it is published already.
    func publishLegend(_ dataset: String) {
        guard legends.needsLegend(dataset) else { return }
        sendLegend(dataset)
    }

    private func sendLegend(_ dataset: String) {
        publisher.send(topics.publication(ruleSet.legend(dataset: dataset), dataset: dataset))
    }

    /// No legend goes out until ``forgetLegends()`` (see ``LegendBook/hold()``).
    func holdLegends() { legends.hold() }

    /// Every legend is to be published again.
    func forgetLegends() { legends.forget() }

    /// Counts `dataset`'s legend as published (the broker holds it as it is).
    func legendHeld(_ dataset: String) { _ = legends.needsLegend(dataset) }

    /// Publishes the legend of each of `datasets` unless the broker holds it as it is
    /// (`retained`: the legends read back, by topic). With `partitioned`, a retained legend
    /// that differs is another daemon's whose rules disagree with these: a warning, then
    /// this daemon's goes out (the last to start wins, loudly).
    /// - Returns: how many such conflicts there were.
    func settleLegends(_ retained: [String: [UInt8]], datasets: Set<String>, partitioned: Bool) -> Int {
        legends.forget()
        var conflicts = 0
        for dataset in datasets.sorted() {
            let ours = topics.publication(ruleSet.legend(dataset: dataset), dataset: dataset)
            let held = retained[ours.topic]
            if held == ours.payload {
                legendHeld(dataset)
                continue
            }
            if partitioned, let held, !held.isEmpty {
                conflicts += 1
                logger.warning(
                    "the legend retained for dataset \(dataset) differs from this daemon's: another daemon's rules give it another legend; publishing this one (make the daemons' rules for the dataset agree)",
                    metadata: ["mqtt.topic": "\(ours.topic)"])
            }
            publishLegend(dataset)
        }
        return conflicts
    }

    // MARK: - Counts

    struct Counts {
        var changes: Int
        var coalesced: Int
        var summaries: Int
        var dropped: Int
        /// Everything that waits (``waiting``).
        var waiting: Int
        var firstStylesWaiting: Int
        var firstStylesKept: Int
        var inFlight: Int
    }

    var counts: Counts {
        Counts(
            changes: publisher.changes, coalesced: (coalescer?.coalesced ?? 0) + publisher.coalesced, summaries: publisher.summaries,
            dropped: publisher.dropped, waiting: waiting, firstStylesWaiting: firstStyles.count,
            firstStylesKept: firstStyles.kept, inFlight: publisher.client.inFlight)
    }

    /// Logs the publications refused since the last report, at most every 10 s: by the
    /// broker (`broker`: on every connection, not sent again) and by the MQTT library
    /// (dropped).
    func reportRefusals(broker: (count: Int, last: MQTTError?)) {
        let library = publisher.dropped
        guard broker.count > reportedRefusals.broker || library > reportedRefusals.library, refusalLog.admit() != nil else { return }
        if broker.count > reportedRefusals.broker {
            logger.warning(
                "the broker refused \(broker.count - reportedRefusals.broker) publications; not sent again; the last: \(broker.last.map { "\($0)" } ?? "")")
        }
        if library > reportedRefusals.library {
            logger.warning(
                "dropped \(library - reportedRefusals.library) publications the MQTT library refused (too large for the broker, or an invalid topic); the last: \(publisher.lastDropped ?? "")")
        }
        reportedRefusals = (broker.count, library)
    }
}
