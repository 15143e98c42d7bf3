import Mosquitto

/// The MQTT side of the pipeline: its subscriptions, what follows every (re)connection of
/// its connections (``ConnectionPair``), and `offline` at a clean stop.
extension LivePipeline {
    /// The broker connection's state: the first of the connections that is not connected
    /// (the receiving one before the output one), else connected.
    public nonisolated var brokerState: MQTTConnectionState {
        connections.lazy.map(\.state).first { $0 != .connected } ?? .connected
    }

    /// Filters the broker refused (not retried; the others go on). Readiness names them.
    public var refusedSubscriptions: [String] { refusedFilters }

    /// Subscribes the configured criteria (sent again by the client after every
    /// reconnection). A filter the broker refuses is logged, kept in
    /// ``refusedSubscriptions`` and not retried; the others still go on.
    /// - Throws: when the client cannot subscribe at all (it is shut down).
    public func subscribe() async throws {
        let qos = MQTTQoS(rawValue: Int32(config.broker.qos)) ?? .atLeastOnce
        for criteria in config.partitionSubscriptions {
            try await subscribe(criteria.filter.string, qos: qos)
        }
        for filter in arrivalFilters { try await subscribe(filter, qos: .atLeastOnce) }
        if let ownerTopic {
            try await subscribe(ownerTopic, qos: .atLeastOnce)
            failover?.watching(since: .now)
        }
        if let bridgeStateTopic { try await subscribe(bridgeStateTopic, qos: .atLeastOnce) }
    }

    func subscribe(_ filter: String, qos: MQTTQoS) async throws {
        do {
            _ = try await client.subscribe(filter, qos: qos)
            refusedFilters.removeAll { $0 == filter }
        } catch MQTTError.subscriptionRefused(let filter, let code, let reason) {
            if !refusedFilters.contains(filter) { refusedFilters.append(filter) }
            logger.error(
                "the broker refused the subscription to \(filter): \(reason); the other subscriptions go on",
                metadata: ["mqtt.filter": "\(filter)", "mqtt.reason_code": "\(code)"])
        }
    }

    /// A connection's state changed (from its event stream).
    func connection(_ connection: ConnectionPair.Connection, _ state: MQTTConnectionState) {
        if connection == .receiving, state == .connected { noteSession() }
        if connectionPair.changed(connection, to: state) == .connected { connected() }
    }

    /// Publishes `online`, the legends and whatever waits, and converges unless nothing can
    /// have diverged; call after every (re)connection (of either connection, once both are up).
    public func connected() {
        if failover != nil {
            replicaConnected()
            return
        }
        publisher.send(topics.statusPublication(online: true))
        // A marker that waited for the connections' acknowledgements starts over.
        markers.barrier = nil
        // The legends go out once the convergence (or the marker's check) has read the
        // retained ones: only those that differ (see ``settleLegends(_:)``).
        publisher.holdLegends()
        // The broker kept both sessions: it kept its store (a connection that did not drop
        // still reports the session of its last CONNACK).
        let present = client.session.present && output.session.present
        switch versions {
        case .trusted where present && markers.acknowledged != nil && publisher.recentIsWhole:
            // The broker resumed our session, so it kept its store, or restored it from its
            // last save (mosquitto saves sessions and retained messages together, at times).
            // If its retained marker is the last one it acknowledged, it holds every style
            // acknowledged before that marker; what was handed over after it is sent again.
            // Nothing else can have diverged: a broker blip costs one retained message, not
            // a read of every style.
            markers.check = .resumed(markers.acknowledged!)
            startConvergence()
        case .inDoubt where present && markers.restoredCheckpoint != nil:
            // A start after a clean stop: the retained marker tells whether the broker
            // holds what the state file says it acknowledged. What came in meanwhile is held.
            markers.check = .start(markers.restoredCheckpoint!)
            markers.restoredCheckpoint = nil
            startConvergence()
        default:
            markers.check = nil
            startConvergence()
        }
        drainOutput()
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

    /// A broker that did not keep the receiving connection's session after the first
    /// connection (a persistent one: `broker.cleanStart: false`) dropped whatever it had
    /// queued for the daemon: said loudly, since nothing else shows the loss (ejabberd
    /// closes a session whose queue passes its `max_queue`; a broker restarted without
    /// persistence forgets every session).
    func noteSession() {
        defer { connectedBefore = true }
        guard connectedBefore, !config.broker.cleanStart, !client.session.present else { return }
        sessionsLost += 1
        logger.warning(
            "the broker did not keep this daemon's session: updates it had queued for the daemon are lost (a broker limit on a client's queue, such as ejabberd's max_queue, or a broker that restarted without persistence)")
    }
}
