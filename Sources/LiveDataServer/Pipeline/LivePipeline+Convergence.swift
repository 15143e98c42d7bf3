import CMalloc
import LiveState
import LiveTopics
import Mosquitto

/// The convergences: their task, the one under way, and their counts.
struct ConvergenceRuns {
    static let retry = MQTTBackoff(initial: .seconds(1), maximum: .seconds(60), jitter: 0)
    var task: Task<Void, Never>?
    /// The one under way: changes published meanwhile count as seen at the broker.
    var current: Convergence?
    var reader: RetainedReader?
    /// Another is to follow the one under way (a reconnection while it ran).
    var again = false
    /// Counts of the last finished convergence.
    var last: Convergence.Counts?
    var finished = 0
    var failures = 0
    var skipped = 0
    /// Retained messages read by finished convergences.
    var read = 0
    /// Why the last convergence failed, until one finishes.
    var fault: String?
    /// Reads that returned fewer styles than the broker's marker said it held.
    var shortReads = 0

    /// A read that returned fewer retained styles than the marker the broker holds counted.
    struct ShortRead: Error, CustomStringConvertible {
        var styles: Int
        var marked: Int?
        var description: String {
            "the broker returned \(styles) retained styles where \(marked.map { "its marker says it held \($0)" } ?? "it holds more (some of the missing ones, asked for by their own topics)"): a short read (a broker limit on retained messages per subscription, such as ejabberd's match_retained_limit, or a cluster node that does not see every retained topic); nothing is republished or cleared on its evidence"
        }
    }
    /// Opens once the first convergence (or a checkpoint that made it needless) is done.
    let converged = StartupGate()
}

/// Convergence with the broker: reads back the retained styles, summaries and legends under
/// the prefix and publishes what makes them agree with the state (see ``Convergence``), or,
/// when a sync marker shows nothing can have diverged, only what the marker does not cover.
extension LivePipeline {
    /// Why the last convergence failed, until one finishes.
    public var convergenceFault: String? { runs.fault }

    func startConvergence() {
        guard runs.task == nil else {
            // Reconnected while one runs: another follows it (the broker may have lost
            // retained messages meanwhile).
            runs.again = true
            return
        }
        runs.task = Task { await self.convergeUntilCurrent() }
    }

    /// Converges until one finishes with nothing asking for another; a failed one is an
    /// error (log, metric, readiness) and is tried again after a growing delay.
    func convergeUntilCurrent() async {
        var delay = ConvergenceRuns.retry.initial
        repeat {
            runs.again = false
            do {
                if let check = markers.check {
                    // No marker goes out while one is checked (see publishMarkerIfDue()).
                    let held = try await markerHolds(check)
                    markers.check = nil
                    if held { continue }
                }
                try await converge()
                delay = ConvergenceRuns.retry.initial
            } catch is CancellationError {
                break
            } catch {
                runs.failures += 1
                runs.fault = "the convergence with the broker failed: \(error); trying again in \(delay)"
                logger.error("cannot converge with the broker: \(error); trying again in \(delay)")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, ConvergenceRuns.retry.maximum)
                runs.again = true
            }
        } while runs.again && !Task.isCancelled
        runs.task = nil
    }

    /// The state's versions are known to be at or above the broker's.
    func trustVersions() {
        versions = .trusted
        runs.fault = nil
        Task { [gate = runs.converged] in await gate.open() }
    }

    /// Returns once the first convergence has finished (see ``isReady``).
    public func waitUntilConverged() async { await runs.converged.wait() }

    /// Returns once the daemon may serve: converged, or, a failover replica, joined (a
    /// standby converges nothing until it takes over).
    public func waitUntilServing() async {
        if failover != nil { await joined.wait() } else { await waitUntilConverged() }
    }

    /// Reads the retained marker. At a start, when it is the one the state file recorded,
    /// the broker holds every style the state file says it acknowledged, and the changes
    /// held since the start go out under their versions. After a reconnection, when it is
    /// the last one acknowledged, what was handed over after it is sent again.
    /// - Returns: whether the marker held (else a full convergence follows).
    func markerHolds(_ check: SyncMarkers.Check) async throws -> Bool {
        let reader = try RetainedReader(
            configuration: client.configuration, prefix: topics.prefix, filters: [checkpointTopic], logger: logger)
        defer { runs.read += reader.count }
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
            markers.adopt(expected, position: publisher.handedOver)
            publisher.forgetRecent(before: publisher.handedOver)
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
        // The broker holds what was acknowledged before the marker, the legends included
        // (the rules have not changed since, or the start would not have checked a marker).
        publisher.forgetLegends()
        for dataset in knownDatasets() { _ = publisher.needsLegend(dataset) }
        runs.skipped += 1
        drainOutput()
        return true
    }

    /// Puts in line again, as the state has them now, the publications the broker may have
    /// lost (`recent`: the locations whose style topics they went to, see
    /// ``Publisher/recent``): styles (under a new version), clearings of places no location
    /// holds any more, and every summary.
    func resend(_ recent: [LocationAddress?]) -> Int {
        var count = 0
        let now = LiveTimestamp.now
        for address in Set(recent.lazy.compactMap { $0 }) {
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
            configuration: client.configuration, prefix: topics.prefix, filters: convergenceFilters + [checkpointTopic], logger: logger)
        runs.reader = reader
        runs.current = Convergence(core: core, topics: topics)
        held = nil
        defer {
            runs.current = nil
            runs.reader = nil
            runs.read += reader.count
            // A full read's passing allocations (a message and a topic for each retained
            // style) go back to the system with it.
            if reader.count > 10_000 { livedata_release_free_heap() }
        }
        reader.begin()
        var legends: [String: [UInt8]] = [:]
        let legendPrefix = topics.prefix + "/legend/"
        /// The locations the last marker the broker holds counted: it held their styles then.
        var markedLocations: Int?
        let checkpoint = checkpointTopic
        while let batch = await reader.next(), !Task.isCancelled {
            let now = LiveTimestamp.now
            for message in batch {
                // Read in place: a million retained styles make no string of their topics.
                let items = message.withTopic { topic -> [PendingOutput.Item] in
                    guard message.retain else {
                        runs.current!.live(topic: String(decoding: topic, as: UTF8.self))
                        return []
                    }
                    if topic.starts(with: legendPrefix.utf8) {
                        legends[String(decoding: topic, as: UTF8.self)] = message.payload
                        return []
                    }
                    if topic.elementsEqual(checkpoint.utf8) {
                        markedLocations = SyncMarkers.locations(in: message.payload, scope: markerScope)
                        return []
                    }
                    return message.withPayload { runs.current!.retained(topicBytes: topic, payload: $0, now: now) }
                }
                // Each is right on its own (a style above the retained version, or the clearing
                // of a topic the state does not hold), so it goes out at once; only what the
                // end of the read implies waits for the end.
                for item in items { publisher.send(item) }
            }
        }
        try await reader.end()
        if reader.markersSentAgain > 0 {
            logger.notice(
                "the end of the read was marked again \(reader.markersSentAgain) times: the broker did not deliver the first marker (\(RetainedReader.fullQueueCause))")
        }
        // A broker that returns fewer retained styles than its own marker says it held (a
        // limit on retained messages per SUBSCRIBE, such as ejabberd's match_retained_limit,
        // or a cluster node that does not see every retained topic) is not taken at its
        // word: republishing every style it did not return, or clearing on its evidence,
        // would be wrong. The convergence fails, and is tried again.
        // Which one it is, is asked of the broker: a sample of the styles the read did not
        // return, each by its own topic (no wildcard, so no such limit). If the broker holds
        // any of them, the read was short; if it holds none, they are missing (an operator
        // cleared them, a store lost them) and are republished as usual. Without a marker
        // to count against (a broker that lost it, or a first start), the sample is asked
        // for whenever the read left locations unseen.
        let styles = runs.current!.counts.styles
        if topics.retain, markedLocations.map({ styles < $0 }) ?? true {
            let sample = runs.current!.unseen(limit: 64)
            if try await holdsAny(sample) {
                runs.shortReads += 1
                throw ConvergenceRuns.ShortRead(styles: styles, marked: markedLocations)
            }
            if !sample.isEmpty {
                logger.notice(
                    "the broker returned \(styles) retained styles\(markedLocations.map { " where its marker counted \($0)" } ?? ""), and a sample of the missing ones is missing: publishing them again")
            }
        }
        for item in runs.current!.finish(now: .now, retainedLegends: Array(legends.keys), datasets: knownDatasets()) {
            publisher.send(item)
        }
        settleLegends(legends)
        trustVersions()
        let counts = runs.current!.counts
        runs.last = counts
        runs.finished += 1
        drainOutput()
        logger.info(
            "converged with the broker: \(counts.read) retained messages read, \(counts.agreed) agreed, \(counts.republished) published again, \(counts.cleared) cleared",
            metadata: ["converge.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
    }

    /// `{prefix}/legend/#`: every dataset's legend (few, and shared by the daemons of a prefix).
    var legendFilter: String { "\(topics.prefix)/legend/#" }

    /// What a full convergence reads: the styles and summaries of what this daemon owns
    /// (everything under the prefix, or its partition's places), and the legends.
    var convergenceFilters: [String] {
        guard let partition = config.partition else {
            return ["\(topics.prefix)/style/#", "\(topics.prefix)/summary/#", legendFilter]
        }
        return partition.filters(prefix: topics.prefix, kind: "style") + partition.filters(prefix: topics.prefix, kind: "summary")
            + [legendFilter]
    }

    /// Publishes the legend of each dataset this daemon serves unless the broker holds it
    /// as it is already (`retained`: the legends read back, by topic). With a partition, a
    /// retained legend that differs is another daemon's whose rules disagree with these:
    /// a warning and a metric, then this daemon's goes out (the last to start wins, loudly).
    func settleLegends(_ retained: [String: [UInt8]]) {
        publisher.forgetLegends()
        for dataset in knownDatasets().sorted() {
            let ours = topics.publication(config.ruleSet.legend(dataset: dataset), dataset: dataset)
            let held = retained[ours.topic]
            if held == ours.payload {
                _ = publisher.needsLegend(dataset)
                continue
            }
            if config.partition != nil, let held, !held.isEmpty {
                legendConflicts += 1
                logger.warning(
                    "the legend retained for dataset \(dataset) differs from this daemon's: another daemon's rules give it another legend; publishing this one (make the daemons' rules for the dataset agree)",
                    metadata: ["mqtt.topic": "\(ours.topic)"])
            }
            publishLegend(dataset)
        }
    }

    /// Whether the broker holds a retained style at any of these addresses, each read by
    /// its own topic.
    func holdsAny(_ addresses: [LocationAddress]) async throws -> Bool {
        guard !addresses.isEmpty else { return false }
        let wanted = Set(addresses.map(topics.style))
        let reader = try RetainedReader(
            configuration: client.configuration, prefix: topics.prefix, filters: wanted.sorted(), logger: logger)
        defer { runs.read += reader.count }
        reader.begin()
        var held = false
        while let batch = await reader.next() {
            if batch.contains(where: { $0.retain && !$0.payload.isEmpty && wanted.contains($0.topic) }) { held = true }
        }
        try await reader.end()
        return held
    }
}
