import Foundation
import LiveState
import LiveTopics
import Logging
import Mosquitto

/// Failover (`partition.failover`): replicas of one partition all consume and keep the whole
/// state; the active one alone publishes styles, summaries, legends, clears and arrivals.
/// Which one that is, ``FailoverState`` decides from the retained lease at
/// `{prefix}/owner/{partition}`, read on the receiving connection in order with the updates.
///
/// The active publishes on the connection that holds its lease (the ``holder``): opened for
/// one epoch, with a will that releases that epoch, and never reconnected
/// (`MQTTConfiguration.reconnects` off). When it ends, the epoch ends for this replica, and
/// whatever it had in flight dies with it: a replica that was paused or cut off cannot
/// deliver late publications on a new connection after another has taken over. A new
/// active converges its partition at once, under its epoch, which the payloads carry.
extension LivePipeline {
    /// Whether derived output may be published now: without failover, always; with it,
    /// while this replica is active and its lease is valid.
    var publishes: Bool { failover.map { $0.mayPublish(now: .now) } ?? true }

    /// This replica's role, as `/readyz`, `/metrics` and `STATUS=` say it.
    public var replicaRole: ReplicaRole? {
        guard let failover else { return nil }
        let role: ReplicaRole.Role =
            switch failover.role {
            case .standby: .standby
            case .claiming: .claiming
            case .active: .active
            }
        return ReplicaRole(
            partition: config.partition?.name ?? "", role: role, epoch: failover.epoch ?? failover.current?.epoch ?? 0, active: failover.current.flatMap { $0.isReleased ? nil : $0.instance },
            takeovers: failover.takeovers, depositions: depositions, joined: failover.eligible)
    }

    /// A message at the owner topic.
    func ownerMessage(_ payload: UnsafeRawBufferPointer) {
        // A replayed one is history: the broker sends the retained lease again.
        guard failover != nil, !replaying else { return }
        let lease = Lease(payload: payload)
        if lease == nil && !payload.isEmpty {
            logger.warning("the owner topic holds something that is not a lease; ignored", metadata: ["mqtt.topic": "\(ownerTopic ?? "")"])
        }
        perform(failover!.observed(lease, now: .now))
    }

    /// Claims, settles, renews, or ends an unrenewed lease: on the pipeline's tick.
    func failoverTick() {
        guard failover != nil else { return }
        // Ticks come every 100 ms: a longer gap is a pause (SIGSTOP, a starved process).
        let now = ContinuousClock.now
        if let last = lastFailoverTick, now - last > failover!.quiet { failover!.resumed() }
        lastFailoverTick = now
        // A replica that does not hear the broker (its receiving connection down) or has not
        // read all it was sent cannot know the lease is free: it claims nothing. Nor does one
        // whose reconnection is not handled yet: the client may be connected again before
        // its event reaches the pipeline, and until `replicaConnected()` the lease's last
        // renewal is the one heard before the link went down (a tick in between claimed a
        // new epoch on a healed link, under load, before a renewal could arrive).
        let caughtUp = client.state == .connected && connectionPair.isUp && intake.queue.statistics.depth == 0
        perform(failover!.tick(now: .now, caughtUp: caughtUp))
    }

    func perform(_ action: FailoverState.Action) {
        switch action {
        case .none: break
        case .claim(let epoch): claim(epoch)
        case .activate(let epoch): activate(epoch)
        case .renew: renewLease()
        case .depose(let reason): depose(reason)
        }
    }

    /// After every (re)connection of the daemon's connections: its own status, and the
    /// lease messages missed meanwhile count as not missed (the retained one comes again).
    func replicaConnected() {
        let status = topics.statusPublication(online: true)
        try? output.send(status.topic, payload: status.payload, qos: .atLeastOnce, retain: status.retain)
        failover?.reconnected(now: .now)
    }

    /// Opens a holder connection for `epoch` and publishes the claim on it.
    func claim(_ epoch: UInt64) {
        guard let ownerTopic, let partition = config.partition else { return }
        var configuration = client.configuration
        configuration.clientID = "\(config.broker.clientId)-lease-\(epoch)"
        configuration.cleanStart = true
        configuration.reconnects = false
        configuration.receiveMaximum = 20
        let release = Lease(instance: config.instanceName, epoch: epoch, released: true)
        configuration.will = MQTTWill(topic: ownerTopic, payload: release.payload, qos: .atLeastOnce, retain: true)
        // What the pipeline handed over before a pause is not written after it: the network
        // thread writes only while the lease is valid (see `FailoverState.validity`).
        let deadline = MQTTWriteDeadline()
        configuration.writeDeadline = deadline
        let holder: MQTTClient
        do {
            holder = try MQTTClient(configuration: configuration, logger: logger, onAcknowledged: { [window] in window.acknowledged($0) })
        } catch {
            logger.error("cannot open the connection for a claim of partition \(partition.name): \(error)")
            perform(failover!.holderEnded(epoch: epoch))
            return
        }
        self.holder = holder
        logger.notice("claiming partition \(partition.name) with epoch \(epoch)", metadata: ["failover.epoch": "\(epoch)"])
        Task { await self.hold(holder, epoch: epoch) }
    }

    /// Connects the holder, publishes the claim, and watches the connection until it ends.
    private func hold(_ holder: MQTTClient, epoch: UInt64) async {
        do {
            try await holder.connect()
        } catch {
            logger.warning("the claim of epoch \(epoch) could not connect: \(error)")
            holderEnded(holder, epoch: epoch)
            return
        }
        Task {
            var connected = false
            for await event in holder.events {
                guard case .state(let state) = event else { continue }
                if state == .connected {
                    connected = true
                } else if connected {
                    break
                }
            }
            self.holderEnded(holder, epoch: epoch)
        }
        await publishLease(on: holder, epoch: epoch)
    }

    /// Publishes the lease (a claim or a renewal) and, once the broker has it, extends how
    /// long this replica may publish.
    private func publishLease(on holder: MQTTClient, epoch: UInt64) async {
        guard let ownerTopic else { return }
        let sentAt = ContinuousClock.now
        do {
            try await holder.publish(
                ownerTopic, payload: Lease(instance: config.instanceName, epoch: epoch).payload, qos: .atLeastOnce, retain: true)
            failover?.acknowledged(epoch: epoch, sentAt: sentAt)
            if let validity = failover?.validity { holder.configuration.writeDeadline?.renew(until: sentAt + validity) }
        } catch {
            logger.warning("the lease of epoch \(epoch) was not acknowledged: \(error)")
        }
    }

    func renewLease() {
        guard let holder, let epoch = failover?.epoch else { return }
        Task { await self.publishLease(on: holder, epoch: epoch) }
    }

    private func holderEnded(_ ended: MQTTClient, epoch: UInt64) {
        guard ended === holder else { return }
        perform(failover!.holderEnded(epoch: epoch))
    }

    /// The claim held: publish from now on, under `epoch`, beginning with a convergence of
    /// the partition (it reads what the broker retains, whoever published it, and corrects
    /// it from this replica's state, with versions above the ones read).
    func activate(_ epoch: UInt64) {
        guard let holder, let partition = config.partition else {
            depose("the connection that held the claim is gone")
            return
        }
        publish(on: holder, epoch: epoch)
        logger.notice(
            "active for partition \(partition.name) with epoch \(epoch): converging with the broker",
            metadata: ["failover.epoch": "\(epoch)"])
        startConvergence()
        drainOutput()
    }

    /// What a change of role resets: the publisher's connection and epoch, what waited (a
    /// new active converges from its own state), the versions (in doubt until it has), and
    /// the legends (held until compared with the retained ones).
    private func publish(on connection: MQTTClient, epoch: UInt64?) {
        _ = publisher.discardWaiting()
        publisher.client = connection
        topics.epoch = epoch
        publisher.topics.epoch = epoch
        versions = .inDoubt
        held = nil
        markers.check = nil
        publisher.holdLegends()
    }

    /// Stops publishing at once: what waits is dropped, the holder closed (cleanly: its will
    /// is not published; the lease is released, or already another's).
    func depose(_ reason: String) {
        let wasActive = publisher.client !== output
        publish(on: output, epoch: nil)
        runs.task?.cancel()
        if coalescer != nil { coalescer = PublishCoalescer(interval: config.output.minInterval) }
        if let holder {
            self.holder = nil
            Task { await holder.disconnect() }
        }
        depositions += 1
        logger.warning(
            wasActive ? "standing by, publishing nothing: \(reason)" : "gave up the claim: \(reason)",
            metadata: ["failover.epoch": "\(failover?.highestEpoch ?? 0)"])
    }

    /// At a clean stop: the active hands on what waits (for at most `timeout`), then
    /// releases its lease, so that a standby takes over at once.
    func releaseLease(timeout: Duration = .seconds(3)) async {
        guard let holder, let ownerTopic, let epoch = failover?.epoch else { return }
        let deadline = ContinuousClock.now + timeout
        while failover?.isActive == true && (publisher.waiting > 0 || holder.inFlight > 0) && ContinuousClock.now < deadline {
            drainOutput()
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Stop publishing, keeping the holder for the release.
        self.holder = nil
        if failover != nil { _ = failover!.holderEnded(epoch: epoch) }
        depose("stopping")
        let release = Lease(instance: config.instanceName, epoch: epoch, released: true)
        let published = Task { try await holder.publish(ownerTopic, payload: release.payload, qos: .atLeastOnce, retain: true) }
        let stop = Task {
            try await Task.sleep(for: .seconds(2))
            published.cancel()
        }
        _ = try? await published.value
        stop.cancel()
        await holder.disconnect()
    }

    /// Becomes able to take over: at once with a state, or, started with none, once a
    /// peer's state is copied (`partition.peers`, `GET /v1/state`); updates queued at the
    /// broker meanwhile overlap the copy harmlessly (each domain's timestamp decides).
    /// Opens ``joined``.
    public func join() async {
        guard failover != nil, failover?.eligible == false else {
            await joined.open()
            return
        }
        // Started with no state (what the broker queued for the session since may already
        // be in: a replica restarted on an empty disk keeps its client id and its session).
        if startedEmpty && !config.peers.isEmpty {
            await copyState()
        }
        failover?.eligible = true
        await joined.open()
        logger.info("joined partition \(config.partition?.name ?? "") as a replica", metadata: ["store.locations": "\(core.store.count)"])
    }

    /// Copies a peer's state; tries the peers in turn with a growing delay until one
    /// answers, or, when no replica holds the lease (a new partition, or every replica
    /// lost), after two rounds starts with none.
    private func copyState() async {
        var delay = Duration.seconds(1)
        var rounds = 0
        // The retained lease, if any, comes right after the subscription.
        try? await Task.sleep(for: failover?.quiet ?? .seconds(1))
        while !Task.isCancelled {
            // A standby first: the state is built on the peer's pipeline, whose updates wait
            // meanwhile, and a standby's wait delays no map.
            var standbys: [String] = []
            for peer in config.peers where await PeerState.role(of: peer) == "standby" { standbys.append(peer) }
            for peer in standbys + config.peers.filter({ !standbys.contains($0) }) {
                do {
                    let started = ContinuousClock.now
                    let body = try await PeerState.fetch(peer, token: config.http.token)
                    let (applied, lines) = importState(body)
                    logger.notice(
                        "copied the state of \(peer): \(lines) values, \(applied) applied, \(core.store.count) locations",
                        metadata: ["copy.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
                    return
                } catch {
                    logger.warning("cannot copy the state of \(peer): \(error)")
                }
            }
            rounds += 1
            let held = failover?.current.map { !$0.isReleased } ?? false
            if !held && rounds >= 2 {
                logger.warning("no peer answered and no replica holds the lease: starting with no state")
                return
            }
            logger.warning("no peer's state copied; trying again in \(delay) (this replica stays not ready meanwhile)")
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// Applies a copied state (``PeerState``'s lines) as updates: a value older than the
    /// one held (a queued update already applied) is ignored as out of order.
    /// - Returns: the values applied, and the lines read.
    func importState(_ body: [UInt8]) -> (applied: Int, lines: Int) {
        var applied = 0
        var lines = 0
        let now = LiveTimestamp.now
        body.withUnsafeBytes { bytes in
            PeerState.forEachLine(bytes) { topic, payload in
                lines += 1
                if case .changed = core.process(topic: topic, payload: payload, receivedAt: now) { applied += 1 }
            }
        }
        return (applied, lines)
    }

    /// The state as ``PeerState`` lines, for a replica that copies it (`GET /v1/state`);
    /// nil while this replica has not joined (its own state may be incomplete).
    public func exportState() -> [UInt8]? {
        guard failover?.eligible ?? true else { return nil }
        return PeerState.lines(core.store.records)
    }
}

/// A failover replica's role, for `/readyz`, `/metrics` and `STATUS=`.
public struct ReplicaRole: Sendable, Equatable, Codable {
    public enum Role: String, Sendable, Codable { case standby, claiming, active }
    public var partition: String
    public var role: Role
    /// This replica's epoch while claiming or active; else the epoch of the lease in force.
    public var epoch: UInt64
    /// The replica that holds the lease, as far as this one has seen.
    public var active: String?
    public var takeovers: Int
    public var depositions: Int
    /// Its state is whole (copied, when it started with none): it may take over.
    public var joined: Bool

    /// `active, epoch 8`, `claiming epoch 8`, `standby (east-1 active, epoch 7)`.
    public var summary: String {
        switch role {
        case .active: "active, epoch \(epoch)"
        case .claiming: "claiming epoch \(epoch)"
        case .standby: "standby (" + (active.map { "\($0) active, epoch \(epoch)" } ?? "no replica active") + ")"
        }
    }
}
