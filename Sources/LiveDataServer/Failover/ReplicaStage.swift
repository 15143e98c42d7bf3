import Foundation
import LiveDataConfiguration
import LiveState
import LiveTopics
import Logging
import Mosquitto

/// The failover stage (`partition.failover`), which exists only in that mode: replicas of
/// one partition all consume and keep the whole state; the active one alone publishes.
/// Which one that is, ``FailoverState`` decides from the retained lease at
/// `{prefix}/owner/{partition}`, read on the receiving connection in order with the updates.
/// This stage owns that state, the connection that holds the lease, and the join (a
/// replica that starts with no state copies a peer's first).
///
/// The active publishes on the connection that holds its lease (the holder): opened for
/// one epoch, with a will that releases that epoch, and never reconnected. When it ends,
/// the epoch ends for this replica, and whatever it had in flight dies with it: a replica
/// that was paused or cut off cannot deliver late publications on a new connection after
/// another has taken over. A new active converges its partition at once, under its epoch,
/// which the payloads carry.
///
/// It returns what the owner is to do as a ``Step``; it publishes only the lease.
final class ReplicaStage {
    /// What the owner does after a change of the lease's state.
    enum Step {
        case none
        /// Run ``hold(_:epoch:)`` (as a child of the owner's jobs): connect, claim, watch.
        case hold(MQTTClient, epoch: UInt64)
        /// Run ``publishLease(on:epoch:)``.
        case renew(MQTTClient, epoch: UInt64)
        /// The claim held: publish on `holder` under `epoch`, converging first; or, when
        /// this replica saw every acknowledgement of the active it replaces, publishing
        /// `resending` again instead (see ``FailoverMarkers``).
        case activate(MQTTClient, epoch: UInt64, resending: [LocationAddress]?)
        /// Stop publishing (`reason`, for the log); close `holder` (cleanly: its will is not
        /// published) when given.
        case depose(reason: String, closing: MQTTClient?)
    }

    private var state: FailoverState
    /// The connection that holds the lease while claiming or active.
    private var holder: MQTTClient?
    /// Times this replica stopped being active (or gave a claim up).
    private var depositions = 0
    /// When ``tick(caughtUp:)`` last ran (a long gap is a pause).
    private var lastTick: ContinuousClock.Instant?
    /// The start restored no location: the replica copies a peer's state before it may
    /// take over (see ``join()``).
    var startedEmpty = true
    /// Opens once the replica may serve: subscribed, and its state copied when it started
    /// with none.
    let joined = StartupGate()
    /// `{prefix}/owner/{partition}`.
    let ownerTopic: String
    /// `{prefix}/sync/{partition}`: the active's markers (``FailoverMarkers``).
    let syncTopic: String
    private var markers = FailoverMarkers()
    /// The epoch of the lease the claim under way replaces (the last active's).
    private var replacing: UInt64?
    /// The rules' fingerprint, worked out once per set of rules (a large catalog makes it
    /// long to work out, and every marker carries it).
    private var rulesFingerprint: String {
        if let cachedFingerprint { return cachedFingerprint }
        let fingerprint = core.rulesFingerprint
        cachedFingerprint = fingerprint
        return fingerprint
    }
    private var cachedFingerprint: String?
    private let partition: String
    private let config: LiveDataConfig
    /// The receiving connection's settings, which a holder's start from.
    private let connection: MQTTConfiguration
    private let core: LiveCore
    private let window: OutputWindow
    private let logger: Logger

    init(
        partition: Partition, config: LiveDataConfig, connection: MQTTConfiguration, ownerTopic: String, syncTopic: String,
        core: LiveCore, window: OutputWindow, logger: Logger
    ) {
        state = FailoverState(instance: config.instanceName, keepalive: max(config.broker.keepalive, .seconds(5)))
        self.partition = partition.name
        self.ownerTopic = ownerTopic
        self.syncTopic = syncTopic
        self.config = config
        self.connection = connection
        self.core = core
        self.window = window
        self.logger = logger
    }

    // MARK: - What it is asked

    /// Whether derived output may be published now: while active and the lease is valid.
    var mayPublish: Bool { state.mayPublish(now: .now) }
    var isActive: Bool { state.isActive }
    /// Joined: its state is whole, it may take over.
    var eligible: Bool { state.eligible }

    /// This replica's role, as `/readyz`, `/metrics` and `STATUS=` say it.
    var role: ReplicaRole {
        let role: ReplicaRole.Role =
            switch state.role {
            case .standby: .standby
            case .claiming: .claiming
            case .active: .active
            }
        return ReplicaRole(
            partition: partition, role: role, epoch: state.epoch ?? state.current?.epoch ?? 0,
            active: state.current.flatMap { $0.isReleased ? nil : $0.instance }, takeovers: state.takeovers,
            depositions: depositions, joined: state.eligible)
    }

    // MARK: - The lease

    /// The owner topic is subscribed: the retained lease, if any, follows.
    func watching() { state.watching(since: .now) }

    /// A message at the owner topic (never a replayed one: the broker sends the retained
    /// lease again).
    func observed(_ payload: UnsafeRawBufferPointer) -> Step {
        let lease = Lease(payload: payload)
        if lease == nil && !payload.isEmpty {
            logger.warning("the owner topic holds something that is not a lease; ignored", metadata: ["mqtt.topic": "\(ownerTopic)"])
        }
        return step(state.observed(lease, now: .now))
    }

    /// Claims, settles, renews, or ends an unrenewed lease: on the pipeline's tick.
    /// `caughtUp`: the replica hears the broker and has read all it was sent (else it
    /// cannot know the lease is free, and claims nothing).
    func tick(caughtUp: Bool) -> Step {
        // Ticks come every 100 ms: a longer gap is a pause (SIGSTOP, a starved process).
        let now = ContinuousClock.now
        if let lastTick, now - lastTick > state.quiet { state.resumed() }
        lastTick = now
        return step(state.tick(now: .now, caughtUp: caughtUp))
    }

    /// After every (re)connection: the lease messages missed meanwhile count as not missed
    /// (the retained one comes again). The markers are not sent again: what this replica
    /// knew of the active's acknowledgements no longer holds.
    func reconnected() {
        state.reconnected(now: .now)
        markers.forget("the connection to the broker came back")
    }

    // MARK: - The markers

    /// A message at the sync topic, in order with the updates.
    func markerRead(_ payload: UnsafeRawBufferPointer) {
        guard let marker = FailoverMarkers.Marker(payload: payload) else {
            logger.warning("the sync topic holds something that is not a marker; ignored", metadata: ["mqtt.topic": "\(syncTopic)"])
            return
        }
        let own = state.isActive ? state.epoch.map { (instance: config.instanceName, epoch: $0) } : nil
        markers.read(marker, own: own, rules: rulesFingerprint)
    }

    /// A change of the state that is not published (a standby's, or a claimant's).
    func standbyChanged(_ address: LocationAddress, left: LocationAddress?) { markers.standbyChanged(address, left: left) }

    /// The rules were reloaded: the styles derived before are not the active's.
    func rulesReloaded() {
        cachedFingerprint = nil
        markers.forget("the rules were reloaded")
    }

    /// The active's next marker, when one is due; `idle`: nothing waits for the broker.
    func dueMarker(idle: Bool) -> Publication? {
        guard state.mayPublish(now: .now), let epoch = state.epoch else { return nil }
        if idle { markers.outputIdle() }
        guard let marker = markers.next(instance: config.instanceName, epoch: epoch, rules: rulesFingerprint, now: .now) else {
            return nil
        }
        return Publication(topic: syncTopic, payload: marker.payload, retain: false)
    }

    /// Nothing waits for the broker (the active, after a batch).
    func outputIdle() { markers.outputIdle() }

    private func step(_ action: FailoverState.Action) -> Step {
        switch action {
        case .none: return .none
        case .claim(let epoch):
            replacing = state.current?.epoch
            return claim(epoch)
        case .activate(let epoch):
            guard let holder else { return depose("the connection that held the claim is gone") }
            let resending = markers.evidence(replacing: replacing)
            if let resending {
                logger.notice(
                    "active for partition \(partition) with epoch \(epoch): saw every acknowledgement of epoch \(replacing ?? 0), publishing again the \(resending.count) styles changed since the last one, reading nothing back",
                    metadata: ["failover.epoch": "\(epoch)"])
            } else {
                logger.notice(
                    "active for partition \(partition) with epoch \(epoch): converging with the broker (\(markers.missing(replacing: replacing)))",
                    metadata: ["failover.epoch": "\(epoch)"])
            }
            markers.forget("it became active")
            markers.activated()
            return .activate(holder, epoch: epoch, resending: resending)
        case .renew:
            guard let holder, let epoch = state.epoch else { return .none }
            return .renew(holder, epoch: epoch)
        case .depose(let reason): return depose(reason)
        }
    }

    /// Opens a holder connection for `epoch`; the owner runs ``hold(_:epoch:)`` on it.
    private func claim(_ epoch: UInt64) -> Step {
        var configuration = connection
        configuration.clientID = "\(config.broker.clientId)-lease-\(epoch)"
        configuration.cleanStart = true
        configuration.reconnects = false
        configuration.receiveMaximum = 20
        let release = Lease(instance: config.instanceName, epoch: epoch, released: true)
        configuration.will = MQTTWill(topic: ownerTopic, payload: release.payload, qos: .atLeastOnce, retain: true)
        // What the pipeline handed over before a pause is not written after it: the network
        // thread writes only while the lease is valid (see `FailoverState.validity`).
        configuration.writeDeadline = MQTTWriteDeadline()
        let holder: MQTTClient
        do {
            holder = try MQTTClient(configuration: configuration, logger: logger, onAcknowledged: { [window] in window.acknowledged($0) })
        } catch {
            logger.error("cannot open the connection for a claim of partition \(partition): \(error)")
            return step(state.holderEnded(epoch: epoch))
        }
        self.holder = holder
        logger.notice("claiming partition \(partition) with epoch \(epoch)", metadata: ["failover.epoch": "\(epoch)"])
        return .hold(holder, epoch: epoch)
    }

    /// Connects the holder, publishes the claim, and watches the connection until it ends;
    /// runs on `isolation`, the owner's actor.
    /// - Returns: what follows its end.
    func hold(_ holder: MQTTClient, epoch: UInt64, isolation: isolated any Actor) async -> Step {
        do {
            try await holder.connect()
        } catch {
            logger.warning("the claim of epoch \(epoch) could not connect: \(error)")
            return holderEnded(holder, epoch: epoch)
        }
        let events = holder.events
        await withTaskGroup(of: Void.self) { group in
            // Captured, so that this body runs on the owner's actor.
            _ = isolation
            group.addTask {
                var connected = false
                for await event in events {
                    guard case .state(let state) = event else { continue }
                    if state == .connected {
                        connected = true
                    } else if connected {
                        break
                    }
                }
            }
            await publishLease(on: holder, epoch: epoch)
            await group.waitForAll()
        }
        return holderEnded(holder, epoch: epoch)
    }

    /// Publishes the lease (a claim or a renewal) and, once the broker has it, extends how
    /// long this replica may publish.
    nonisolated(nonsending) func publishLease(on holder: MQTTClient, epoch: UInt64) async {
        let sentAt = ContinuousClock.now
        do {
            try await holder.publish(ownerTopic, payload: Lease(instance: config.instanceName, epoch: epoch).payload, qos: .atLeastOnce, retain: true)
            state.acknowledged(epoch: epoch, sentAt: sentAt)
            holder.configuration.writeDeadline?.renew(until: sentAt + state.validity)
        } catch {
            logger.warning("the lease of epoch \(epoch) was not acknowledged: \(error)")
        }
    }

    private func holderEnded(_ ended: MQTTClient, epoch: UInt64) -> Step {
        guard ended === holder else { return .none }
        return step(state.holderEnded(epoch: epoch))
    }

    /// Stops publishing at once; the owner closes the holder.
    private func depose(_ reason: String) -> Step {
        let closing = holder
        holder = nil
        depositions += 1
        markers.forget("it stood down")
        return .depose(reason: reason, closing: closing)
    }

    /// The highest epoch seen, for the log.
    var highestEpoch: UInt64 { state.highestEpoch }

    /// At a clean stop: the active hands on what waits (`pending`, `drain`) for at most
    /// `timeout`, stops publishing (`stopPublishing`), then releases its lease (at most 2 s)
    /// so that a standby takes over at once, and closes the holder.
    nonisolated(nonsending) func release(
        timeout: Duration, pending: () -> Bool, drain: () -> Void, stopPublishing: (Step) -> Void
    ) async {
        guard holder != nil, state.epoch != nil else { return }
        let deadline = ContinuousClock.now + timeout
        while state.isActive && pending() && ContinuousClock.now < deadline {
            drain()
            try? await Task.sleep(for: .milliseconds(20))
        }
        guard let holder, let epoch = state.epoch else { return }
        // Stop publishing, keeping the holder for the release.
        self.holder = nil
        _ = state.holderEnded(epoch: epoch)
        stopPublishing(depose("stopping"))
        let release = Lease(instance: config.instanceName, epoch: epoch, released: true).payload
        let topic = ownerTopic
        _ = try? await withTimeout(.seconds(2)) { try await holder.publish(topic, payload: release, qos: .atLeastOnce, retain: true) }
        await holder.disconnect()
    }

    // MARK: - Joining

    /// Becomes able to take over: at once with a state, or, started with none, once a
    /// peer's state is copied (`partition.peers`, `GET /v1/state`); updates queued at the
    /// broker meanwhile overlap the copy harmlessly (each domain's timestamp decides).
    /// `importState`: applies a copied state on the owner's pipeline.
    nonisolated(nonsending) func join(importState: ([UInt8]) -> (applied: Int, lines: Int)) async {
        guard !state.eligible else {
            await joined.open()
            return
        }
        // Started with no state (what the broker queued for the session since may already
        // be in: a replica restarted on an empty disk keeps its client id and its session).
        if startedEmpty && !config.peers.isEmpty {
            await PeerState.copy(
                from: config.peers, token: config.http.token, after: state.quiet, leaseHeld: { state.current.map { !$0.isReleased } ?? false },
                importState: importState, locations: { core.locationCount }, logger: logger)
            // The copy changed the state outside the stream the markers fence.
            markers.copied()
        }
        state.eligible = true
        await joined.open()
        logger.info("joined partition \(partition) as a replica", metadata: ["store.locations": "\(core.locationCount)"])
    }
}
