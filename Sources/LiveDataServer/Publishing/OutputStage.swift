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
    private var reportedRefusals = (broker: 0, library: 0)
    private var refusalLog = RateLimitedLog(interval: .seconds(10))
    private let logger: Logger

    init(client: MQTTClient, qos: MQTTQoS, topics: OutputFormat, minInterval: Duration, ruleSet: RuleSet, window: OutputWindow, logger: Logger) {
        publisher = Publisher(client: client, qos: qos, topics: topics)
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
    var waiting: Int { publisher.waiting }
    /// Nothing waits to be handed over, nor for its interval: every change put in line so
    /// far is with the client.
    var isIdle: Bool { publisher.waiting == 0 && (coalescer?.waitingCount ?? 0) == 0 }
    var handedOver: Int { publisher.handedOver }
    var puts: Int { publisher.puts }
    var recent: [LocationAddress?] { publisher.recent }
    var recentIsWhole: Bool { publisher.recentIsWhole }
    /// Recent clears, by topic (see ``Publisher/clears``).
    var clears: [String] { publisher.clears }
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
        guard coalescer != nil else {
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
        held?.put(topics.clearing(styleOf: address), under: .style(address), since: since)
    }

    /// Clears a style topic (the location left it).
    func clear(_ address: LocationAddress) {
        let clearing = topics.clearing(styleOf: address)
        // A style waiting for its interval must not land after the clearing.
        coalescer?.drop(topic: clearing.topic)
        publisher.send(clearing)
    }

    func send(_ publication: Publication) { publisher.send(publication) }
    func send(summary: Publication) { publisher.send(summary: summary) }
    func send(change: DerivedChange) { publisher.send(change: change) }
    func send(_ item: PendingOutput.Item, since: MonotonicInstant? = nil) { publisher.send(item, since: since) }

    /// Hands the client what waits, as far as the broker's window has room; when it is
    /// full, the acknowledgement that halves it wakes the drain again (``OutputWindow``).
    /// Nothing while ``permit`` says no.
    func drain() {
        guard permit() else { return }
        while true {
            switch publisher.drain() {
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
        var waiting: Int
        var inFlight: Int
    }

    var counts: Counts {
        Counts(
            changes: publisher.changes, coalesced: (coalescer?.coalesced ?? 0) + publisher.coalesced, summaries: publisher.summaries,
            dropped: publisher.dropped, waiting: publisher.waiting, inFlight: publisher.client.inFlight)
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
