import CMalloc
import LiveState
import LiveTopics
import Logging
import Mosquitto

/// The convergence stage: reads back the retained styles, summaries and legends under the
/// prefix and hands the output what makes them agree with the state (see ``Convergence``),
/// or, when a sync marker shows nothing can have diverged, only what the marker does not
/// cover. It owns the convergence under way, its retries, and their counts.
///
/// A run is asked for with ``request()``; the owner then runs ``runUntilCurrent(...)`` (one
/// at a time). A reconnection during a run asks for another after it.
final class ConvergenceStage {
    static let retry = MQTTBackoff(initial: .seconds(1), maximum: .seconds(60), jitter: 0)

    /// The one under way: changes published meanwhile count as seen at the broker.
    private var current: Convergence?
    private var reader: RetainedReader?
    /// A run is under way (or asked for and about to start).
    private(set) var isRunning = false
    /// Another is to follow the one under way (a reconnection while it ran).
    private var again = false
    private(set) var finished = 0
    private(set) var failures = 0
    private(set) var skipped = 0
    /// Retained messages read by finished convergences.
    private var read = 0
    /// Why the last convergence failed, until one finishes.
    private(set) var fault: String?
    /// Reads that returned fewer styles than the broker's marker said it held.
    private(set) var shortReads = 0
    /// Retained legends found differing from this daemon's (another daemon's rules).
    private(set) var legendConflicts = 0
    /// Opens once the first convergence (or a checkpoint that made it needless) is done.
    let converged = StartupGate()
    /// Stops the run under way (see ``stop()``).
    private var stopping: StopSignal?

    private let core: LiveCore
    private let output: OutputStage
    private let checkpoint: CheckpointStage
    private let partition: Partition?
    private let logger: Logger

    init(core: LiveCore, output: OutputStage, checkpoint: CheckpointStage, partition: Partition?, logger: Logger) {
        self.core = core
        self.output = output
        self.checkpoint = checkpoint
        self.partition = partition
        self.logger = logger
    }

    // MARK: - What it is asked

    /// Whether a change of this location is already accounted for by the run under way.
    func hasSeen(_ address: LocationAddress) -> Bool { current?.hasSeen(address) ?? false }

    /// A change of this location went out during the run under way.
    func published(_ address: LocationAddress) { current?.published(address) }

    /// A full read is under way: live updates are taken a few at a time meanwhile.
    var isReading: Bool { reader != nil }

    /// Retained messages read by convergences in all, and by the one under way.
    var retainedRead: (total: Int, current: Int) { (read + (reader?.count ?? 0), reader?.count ?? 0) }

    // MARK: - Runs

    /// The signal that stops the run about to start (the owner races it against the run).
    func stopSignal() -> StopSignal {
        let signal = StopSignal()
        stopping = signal
        return signal
    }

    /// Stops the run under way, if any (a replica that stops publishing).
    func stop() { stopping?.stop() }

    /// Asks for a run: true when the owner is to start one; false when one is under way
    /// (another then follows it: the broker may have lost retained messages meanwhile).
    func request() -> Bool {
        guard !isRunning else {
            again = true
            return false
        }
        isRunning = true
        return true
    }

    /// Converges until one run finishes with nothing asking for another; a failed one is an
    /// error (log, metric, readiness) and is tried again after a growing delay. Runs on
    /// `isolation`, the owner's actor; `configuration` is the receiving connection's (the
    /// reads' connections start from it), `datasets` those whose legends are settled.
    /// - Returns: whether another run was asked for after this one was stopped.
    func runUntilCurrent(
        isolation: isolated any Actor, configuration: MQTTConfiguration, datasets: () -> Set<String>
    ) async -> Bool {
        var delay = Self.retry.initial
        repeat {
            again = false
            // What the run finds holds for the output's connections as they are now; a
            // reconnection meanwhile asks for another run (see ``SyncMarkers``).
            let connections = checkpoint.outputConnections
            do {
                if let check = checkpoint.check {
                    // No marker goes out while one is checked.
                    let held = try await markerHolds(check, isolation: isolation, configuration: configuration, datasets: datasets)
                    checkpoint.setCheck(nil)
                    if held {
                        checkpoint.verified(since: connections)
                        continue
                    }
                }
                try await converge(isolation: isolation, configuration: configuration, datasets: datasets)
                checkpoint.verified(since: connections)
                delay = Self.retry.initial
            } catch is CancellationError {
                break
            } catch {
                failures += 1
                fault = "the convergence with the broker failed: \(error); trying again in \(delay)"
                logger.error("cannot converge with the broker: \(error); trying again in \(delay)")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, Self.retry.maximum)
                again = true
            }
        } while again && !Task.isCancelled
        isRunning = false
        stopping = nil
        return again
    }

    /// The versions are known to be at or above the broker's (``converged`` opens once the
    /// caller has finished what follows).
    private func trustVersions() {
        output.trustVersions()
        fault = nil
    }

    /// Reads the retained markers (both topics, see ``SyncMarkers/slot``). At a start, the
    /// one the state file recorded means the broker holds every style acknowledged, and the
    /// changes held since go out under their versions; after a reconnection, the last one
    /// acknowledged means only what was handed over after it is sent again.
    /// - Returns: whether the marker held (else a full convergence follows).
    private func markerHolds(
        _ check: SyncMarkers.Check, isolation: isolated any Actor, configuration: MQTTConfiguration, datasets: () -> Set<String>
    ) async throws -> Bool {
        let topics = checkpoint.topics
        let reader = try RetainedReader(configuration: configuration, prefix: output.topics.prefix, filters: topics, logger: logger)
        defer { read += reader.count }
        var found: [[UInt8]] = []
        try await reader.read { batch in
            for message in batch where message.retain && topics.contains(message.topic) { found.append(message.payload) }
        }
        switch check {
        case .start(let expected):
            // The stop left it at both topics: another marker at either was published since.
            guard !output.hasTrustedVersions, var held = output.takeHeld(), !found.isEmpty, found.allSatisfy({ $0 == Array(expected.utf8) })
            else {
                output.dropHeld()
                logger.info("the broker does not hold the marker of the last stop: converging")
                return false
            }
            checkpoint.adopt(expected, position: output.handedOver)
            output.forgetRecent(before: output.handedOver)
            trustVersions()
            while let (_, entry) = held.take() { output.send(entry.item, since: entry.since) }
            logger.info("the broker holds the marker of the last stop: nothing to converge")
        case .resumed(let expected):
            guard found.contains(Array(expected.utf8)), output.recentIsWhole else {
                logger.info("the broker resumed the session without the last marker acknowledged: converging")
                return false
            }
            let again = resend(output.recent)
            logger.info("the broker resumed the session and holds the last marker: \(again) publications sent again, nothing else to converge")
        }
        // The broker holds what was acknowledged before the marker, the legends included
        // (the rules have not changed since, or the start would not have checked a marker).
        output.forgetLegends()
        for dataset in datasets() { output.legendHeld(dataset) }
        skipped += 1
        output.drain()
        await converged.open()
        return true
    }

    /// A takeover by a replica that saw every acknowledgement of the active it replaces
    /// (``FailoverMarkers``): the broker holds every style of the state but those at
    /// `addresses`, which go out again as the state has them now (under the new epoch, so
    /// above any the broker holds), with every summary; nothing is read back. The legends
    /// are the old active's, of the same rules. The caller opens ``converged``.
    func takeOver(resending addresses: [LocationAddress], datasets: Set<String>) {
        trustVersions()
        let count = resend(addresses.map(Optional.some))
        output.forgetLegends()
        for dataset in datasets { output.legendHeld(dataset) }
        skipped += 1
        output.drain()
        logger.info("took over without reading back the retained styles: \(count) published again")
    }

    /// Puts in line again, as the state has them now, what the broker may have lost
    /// (``Publisher/recent``): styles (under a new version), clearings, every summary.
    private func resend(_ recent: [LocationAddress?]) -> Int {
        var count = 0
        let now = LiveTimestamp.now
        let topics = output.topics
        for address in Set(recent.lazy.compactMap { $0 }) {
            if let change = core.republication(at: address, now: now) {
                output.send(change: change)
            } else if !core.holds(address) {
                output.send(topics.clearing(styleOf: address))
            }
            count += 1
        }
        for summary in core.summaries where summary.locations > 0 {
            output.send(summary: topics.publication(summary, updatedAt: now))
        }
        return count
    }

    /// Reads back the retained messages under the prefix and publishes what makes them
    /// agree with the state (see ``Convergence``). Live updates go on meanwhile.
    /// - Throws: ``RetainedReader/Failure`` when the read fails or stalls: nothing is
    ///   cleared or published for a read that did not end.
    private func converge(isolation: isolated any Actor, configuration: MQTTConfiguration, datasets: () -> Set<String>) async throws {
        let started = ContinuousClock.now
        let topics = output.topics
        let reader = try RetainedReader(
            configuration: configuration, prefix: topics.prefix, filters: topics.convergenceFilters(partition) + checkpoint.topics, logger: logger)
        self.reader = reader
        current = Convergence(core: core, topics: topics)
        output.dropHeld()
        output.stopRepublishing()
        defer {
            current = nil
            self.reader = nil
            read += reader.count
            // A full read's passing allocations go back to the system with it.
            if reader.count > 10_000 { livedata_release_free_heap() }
        }
        var legends: [String: [UInt8]] = [:]
        let legendPrefix = topics.prefix + "/legend/"
        // The locations the markers the broker holds counted (the larger count of the two
        // topics'): it held their styles then.
        var markedLocations: Int?
        let checkpointTopics = checkpoint.topics
        let scope = checkpoint.scope
        try await reader.read { batch in
            let now = LiveTimestamp.now
            for message in batch {
                // Read in place: a million retained styles make no string of their topics.
                let items = message.withTopic { topic -> [PendingOutput.Item] in
                    guard message.retain else {
                        self.current?.live(topic: String(decoding: topic, as: UTF8.self))
                        return []
                    }
                    if topic.starts(with: legendPrefix.utf8) {
                        legends[String(decoding: topic, as: UTF8.self)] = message.payload
                        return []
                    }
                    if checkpointTopics.contains(where: { topic.elementsEqual($0.utf8) }) {
                        if let count = SyncMarkers.locations(in: message.payload, scope: scope) {
                            markedLocations = max(markedLocations ?? 0, count)
                        }
                        return []
                    }
                    return message.withPayload { self.current?.retained(topicBytes: topic, payload: $0, now: now) ?? [] }
                }
                // Each is right on its own, so it goes out at once; only what the end of the
                // read implies waits for the end. A style to publish again waits for the end
                // too while the output is behind: the republication after the read takes it
                // from the state as the window makes room, where a line of them would not be
                // bounded.
                for item in items {
                    if case .change(let change) = item, !self.output.hasRoomForRepublication {
                        self.current?.leaveForLater(change.address)
                        continue
                    }
                    self.output.send(item)
                }
            }
        }
        if reader.markersSentAgain > 0 {
            logger.notice(
                "the end of the read was marked again \(reader.markersSentAgain) times: the broker did not deliver the first marker (\(RetainedReader.fullQueueCause))")
        }
        guard let styles = current?.counts.styles else { throw CancellationError() }
        // A broker that returns fewer retained styles than its marker counted (a limit on
        // retained messages per SUBSCRIBE, a cluster node that does not see every topic) is
        // not taken at its word: a sample of the unseen styles is asked for, each by its own
        // topic. Any of them held: the read was short (``ShortConvergenceRead``). None: they
        // are missing, and are published again as usual. Without a marker, the sample is
        // asked for whenever the read left locations unseen.
        if topics.retain, markedLocations.map({ styles < $0 }) ?? true {
            let sample = current?.unseen(limit: 64) ?? []
            if try await holdsAny(sample, isolation: isolation, configuration: configuration) {
                shortReads += 1
                throw ShortConvergenceRead(styles: styles, marked: markedLocations)
            }
            if !sample.isEmpty {
                logger.notice(
                    "the broker returned \(styles) retained styles\(markedLocations.map { " where its marker counted \($0)" } ?? ""), and a sample of the missing ones is missing: publishing them again")
            }
        }
        let served = datasets()
        for item in current?.finish(now: .now, retainedLegends: Array(legends.keys), datasets: served) ?? [] { output.send(item) }
        // Handed over as it is made: the output holds the only copy, so the walk's set of
        // seen locations changes in place.
        let toLookAt = output.republish(current?.takeRepublication())
        legendConflicts += output.settleLegends(legends, datasets: served, partitioned: partition != nil)
        trustVersions()
        let counts = current?.counts ?? Convergence.Counts()
        finished += 1
        output.drain()
        logger.info(
            "converged with the broker: \(counts.read) retained messages read, \(counts.agreed) agreed, \(counts.republished) published again, \(toLookAt) locations to look at for styles the broker lacks, \(counts.cleared) cleared",
            metadata: ["converge.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
        await converged.open()
    }

    /// Whether the broker holds a retained style at any of these addresses, each read by
    /// its own topic.
    private func holdsAny(
        _ addresses: [LocationAddress], isolation: isolated any Actor, configuration: MQTTConfiguration
    ) async throws -> Bool {
        guard !addresses.isEmpty else { return false }
        let wanted = Set(addresses.map(output.topics.style))
        let reader = try RetainedReader(
            configuration: configuration, prefix: output.topics.prefix, filters: wanted.sorted(), logger: logger)
        defer { read += reader.count }
        var held = false
        try await reader.read { batch in
            if batch.contains(where: { $0.retain && !$0.payload.isEmpty && wanted.contains($0.topic) }) { held = true }
        }
        return held
    }
}
