import LiveState
import LiveTopics
import Mosquitto

/// The outputs of a processed update: the publication (styles and the clearing of a
/// location's old topic, through the coalescer when `output.minInterval` is set, into the
/// publisher's window), the floor view's events, the legends, and the reports of refusals.
extension LivePipeline {
    /// Puts a change in line for the broker (and tells the floor view); `arrived`: when the
    /// update behind it reached the daemon.
    func queue(_ change: DerivedChange, arrived: MonotonicInstant?) {
        guard !replaying else { return }
        if let partition = config.partition {
            // Handed over to another partition's daemon: only the old topic is this one's.
            guard partition.owns(change.address) else {
                if let old = change.movedFrom, partition.owns(old) { handedOver(old) }
                return
            }
            if arrivesFromElsewhere(change) && publishes { announceArrival(change) }
        }
        // The floor view shows the state as it is, whenever the broker gets it.
        var payload: [UInt8]?
        if events.hasViewers {
            payload = topics.payload(change)
            if let old = change.movedFrom { publishRemoval(old) }
            events.publish("change", place: change.address.place, json: payload!)
        }
        // A failover replica whose lease is not (or no longer) its own publishes nothing: the
        // tick that finds the lease unrenewed may not have come yet.
        if isReplica && !publishes { return }
        if case .inDoubt = versions, !(runs.current?.hasSeen(change.address) ?? false) {
            // Its version may be below the broker's: the convergence publishes it (its
            // retained style is still to be read, or it is among those the end of the read
            // publishes), or, while the checkpoint is checked, it waits to be known right.
            if held != nil {
                if let old = change.movedFrom, owns(old) { held!.put(topics.clearing(styleOf: old), under: .style(old), since: arrived) }
                held!.put(change, since: arrived)
            }
            return
        }
        runs.current?.published(change.address)
        // A location that moved: its old topic is cleared as the new one gets the style
        // (unless it was another partition's: that daemon clears it, told by the arrival).
        if let old = change.movedFrom, owns(old) { clear(old) }
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
    func drainOutput() {
        // A failover replica publishes while its lease is its own (see `+Failover`); the
        // status goes out on the connection of its own, not through here.
        if let failover, !failover.mayPublish(now: .now) { return }
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

    /// Sends the coalesced changes whose `output.minInterval` has ended.
    func sendDueCoalesced() { sendCoalesced(coalescer?.due(now: .now)) }

    /// Sends every coalesced change that waits (on shutdown).
    func sendAllCoalesced() { sendCoalesced(coalescer?.takeAll(now: .now)) }

    func sendCoalesced(_ publications: [Publication]?) {
        guard let publications, !publications.isEmpty else { return }
        for publication in publications { publisher.send(changePublication: publication) }
        drainOutput()
    }

    /// Clears a style topic (the location left it).
    func clear(_ address: LocationAddress) {
        let clearing = topics.clearing(styleOf: address)
        // A style waiting for its interval must not land after the clearing.
        coalescer?.drop(topic: clearing.topic)
        publisher.send(clearing)
        drainOutput()
    }

    /// Tells the floor view a location left `address`.
    func publishRemoval(_ address: LocationAddress) {
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

    /// Publishes a dataset's legend unless it is published already.
    func publishLegend(_ dataset: String) {
        guard publisher.needsLegend(dataset) else { return }
        sendLegend(dataset)
    }

    /// Publishes the legend of a change's dataset unless it is published already.
    func publishLegend(of address: LocationAddress) {
        guard let dataset = publisher.needsLegend(of: address) else { return }
        sendLegend(dataset)
    }

    private func sendLegend(_ dataset: String) {
        publisher.send(topics.publication(config.ruleSet.legend(dataset: dataset), dataset: dataset))
    }

    /// Publications the broker refused, on every connection, and the last refusal (the
    /// output connection's first: it carries nearly all of them).
    nonisolated var refusedPublishes: (count: Int, last: MQTTError?) {
        let each = connections.map(\.refusedPublishes)
        return (each.reduce(0) { $0 + $1.count }, each.reversed().lazy.compactMap(\.last).first)
    }

    /// The datasets this daemon serves: its partition's, or those its subscriptions name,
    /// and those it holds locations of.
    func knownDatasets() -> Set<String> {
        let configured = config.partition?.datasets ?? Set(config.subscriptions.compactMap { $0[.dataset] })
        return configured.union(core.store.datasets)
    }

    /// Logs the publications refused since the last report, at most every 10 s: by the
    /// broker (not sent again) and by the MQTT library (dropped).
    func reportRefusals() {
        let broker = refusedPublishes
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

    /// Logs a dropped update, at most once a second with a count of the ones not logged.
    func logRejection(_ reason: LiveCore.RejectReason, _ text: String, topic: String) {
        guard let suppressed = rejections.admit() else { return }
        let more = suppressed > 0 ? " (and \(suppressed) more since the last report)" : ""
        logger.warning(
            "dropped an update: \(text)\(more)",
            metadata: ["mqtt.topic": "\(topic)", "update.rejected": "\(reason.rawValue)"])
    }
}
