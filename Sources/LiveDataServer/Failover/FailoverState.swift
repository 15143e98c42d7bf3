/// Which replica of a partition publishes, decided through the broker: the retained lease at
/// `{prefix}/owner/{partition}` (``Lease``) and the order in which the broker delivers the
/// messages on that topic, the same to every replica. A value: the pipeline feeds it what it
/// sees (``observed(_:now:)``, ``tick(now:)``, the holder connection's fate), and
/// ``ReplicaStage`` carries out the ``Action`` it returns.
///
/// Why it is safe, with `K` the broker keepalive of the connection that holds the lease:
/// - The active holds the lease on a connection of its own whose will releases it, and
///   renews it every `K / 3`. The broker closes that connection (and publishes the will)
///   no sooner than 1.5 `K` after the last packet it got from it, so a renewal sent at `t`
///   and acknowledged keeps the lease the active's at least until `t + 1.5 K`. The active
///   publishes only until `t + K` (``validity``): a paused or cut-off active stops on its own
///   before anyone may take over.
/// - A standby claims a released lease (after its ``stagger``), or one not renewed for
///   ``term`` (1.5 `K`: past every holder's validity, `K` after a renewal it sent), with the highest epoch it has seen plus
///   one, on a new connection whose will releases that epoch.
/// - A claim settles: the claimant waits until the broker has sent its own claim back (the
///   round trip that shows what the broker ordered before it), then ``settle`` more. Of
///   claims of one epoch the first the broker
///   delivered wins, and a higher epoch beats a lower one; every replica sees the same order,
///   so every replica comes to the same answer, and no epoch has two publishers.
/// - An active that sees a claim of another replica above its epoch steps down at once; one
///   that sees its lease overwritten by something that does not beat it (a losing claim of
///   its epoch, a late will of a replica deposed long ago) publishes it again.
/// - A standby claims only while connected and caught up with what the broker sent it (a
///   lease message behind a backlog may already have answered the question; a replica cut
///   off from the broker hears no renewal, which does not mean there is none), and counts a
///   lease as heard of again when its connection is back (``reconnected(now:)``).
struct FailoverState {
    enum Role: Equatable {
        case standby
        /// Claimed this epoch, waiting for the claim to settle.
        case claiming(UInt64)
        case active(UInt64)
    }

    enum Action: Equatable {
        case none
        /// Open a holder connection whose will releases this epoch and publish the claim.
        case claim(epoch: UInt64)
        /// The claim held: publish, converge.
        case activate(epoch: UInt64)
        /// Publish the lease again on the holder connection.
        case renew
        /// Stop publishing and close the holder connection (a claim given up, or the lease lost).
        case depose(reason: String)
    }

    let instance: String
    /// A lease not renewed for this long has expired.
    let term: Duration
    /// The active renews its lease this often.
    let renewal: Duration
    /// How long after a renewal it sent (and the broker acknowledged) the active publishes.
    let validity: Duration
    /// How long a claim that came back waits for a later one.
    let settle: Duration
    /// How long a replica that has seen no lease at all (none retained, or its own of a
    /// run before) waits for one before it claims.
    let quiet: Duration
    /// This replica's wait before claiming a released lease, so that replicas do not claim
    /// together (from its instance name: 0 to 400 ms).
    let stagger: Duration

    private(set) var role = Role.standby
    /// The lease in force as this replica has seen the owner topic (the highest epoch; of
    /// one epoch, the last claim, or its holder's release), and when it was last heard of.
    private(set) var current: Lease?
    private var currentSeen: ContinuousClock.Instant?
    /// The highest epoch seen or claimed.
    private(set) var highestEpoch: UInt64 = 0
    /// Since when the owner topic is watched (its subscription acknowledged).
    private var watchingSince: ContinuousClock.Instant?
    /// Whether this replica may become active: subscribed, and its state copied when it
    /// started with none.
    var eligible = false
    /// When the broker sent the pending claim back.
    private var claimSeen: ContinuousClock.Instant?
    private var claimed: ContinuousClock.Instant?
    /// Until when the active may publish (see ``validity``).
    private var validUntil: ContinuousClock.Instant?
    private var nextRenewal: ContinuousClock.Instant?
    /// Times this replica became active.
    private(set) var takeovers = 0
    /// Deposed since the last tick: what it knows of the lease may be old.
    private var viewIsStale = false

    /// - Parameter keepalive: the broker keepalive of the holder connection (`K`).
    init(instance: String, keepalive: Duration, settle: Duration = .milliseconds(200), quiet: Duration = .seconds(1)) {
        self.instance = instance
        term = keepalive * 3 / 2
        renewal = keepalive / 3
        validity = keepalive
        self.settle = settle
        self.quiet = quiet
        let hash = instance.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
        stagger = .milliseconds(Int(hash % 5) * 100)
    }

    var epoch: UInt64? {
        switch role {
        case .standby: nil
        case .claiming(let epoch), .active(let epoch): epoch
        }
    }

    var isActive: Bool { if case .active = role { true } else { false } }

    /// Whether the active may publish now (see ``validity``).
    func mayPublish(now: ContinuousClock.Instant) -> Bool {
        guard isActive, let validUntil else { return false }
        return now < validUntil
    }

    /// The owner topic's subscription is in place: a retained lease, if there is one, comes next.
    mutating func watching(since now: ContinuousClock.Instant) {
        if watchingSince == nil { watchingSince = now }
    }

    /// The process was paused (stopped, or starved): what it knows of the lease is old; it
    /// listens for ``quiet`` before it claims anything.
    mutating func resumed() { viewIsStale = true }

    /// The receiving connection is back: the lease messages sent meanwhile were missed, so
    /// the lease in force counts as heard of now (the retained one comes again with the
    /// subscriptions), not as unrenewed since before the cut.
    mutating func reconnected(now: ContinuousClock.Instant) {
        if currentSeen != nil { currentSeen = now }
        if watchingSince != nil { watchingSince = now }
    }

    /// A message at the owner topic (`nil`: an empty one, or one that is not a lease).
    mutating func observed(_ lease: Lease?, now: ContinuousClock.Instant) -> Action {
        if let lease {
            highestEpoch = max(highestEpoch, lease.epoch)
            if supersedes(lease) {
                current = lease
                currentSeen = now
            }
        }
        switch role {
        case .standby:
            return .none
        case .claiming(let epoch):
            guard let lease else { return .none }
            if lease.instance == instance && lease.epoch == epoch {
                if lease.isReleased { return lose("the connection that held the claim of epoch \(epoch) ended") }
                if claimSeen == nil { claimSeen = now }
                return .none
            }
            // Of claims of one epoch the first the broker delivered wins: another's before ours
            // (ours has not come back yet), or a higher epoch, beats ours.
            if !lease.isReleased && (lease.epoch > epoch || (lease.epoch == epoch && claimSeen == nil)) {
                return lose("\(lease.instance) claimed epoch \(lease.epoch) first")
            }
            return .none
        case .active(let epoch):
            if let lease, lease.instance == instance && lease.epoch == epoch {
                return lease.isReleased ? lose("the lease of epoch \(epoch) was released: its connection ended") : .none
            }
            if let lease, !lease.isReleased && lease.epoch > epoch {
                return lose("\(lease.instance) holds the lease with epoch \(lease.epoch)")
            }
            // Overwritten by something that does not beat it (a later claim of this epoch,
            // which lost; a late will; an empty message): ours again.
            return .renew
        }
    }

    /// Whether a lease message replaces the one in force: a higher epoch; of the same
    /// epoch, its holder's renewal or release (the first claim of an epoch holds it).
    private func supersedes(_ lease: Lease) -> Bool {
        guard let current else { return true }
        if lease.epoch != current.epoch { return lease.epoch > current.epoch }
        return lease.instance == current.instance
    }

    /// The broker acknowledged the claim or a renewal sent at `sentAt`.
    mutating func acknowledged(epoch: UInt64, sentAt: ContinuousClock.Instant) {
        guard self.epoch == epoch else { return }
        if claimed == nil {
            claimed = sentAt
            nextRenewal = sentAt + renewal
        }
        let until = sentAt + validity
        if validUntil.map({ until > $0 }) ?? true { validUntil = until }
    }

    /// The holder connection of `epoch` ended.
    mutating func holderEnded(epoch: UInt64) -> Action {
        guard self.epoch == epoch else { return .none }
        return lose("the connection that held the lease of epoch \(epoch) ended")
    }

    /// Periodic: claims, a settled claim, renewals, and the end of an unrenewed lease.
    /// `caughtUp`: connected, and nothing received waits to be processed.
    mutating func tick(now: ContinuousClock.Instant, caughtUp: Bool = true) -> Action {
        if viewIsStale {
            // Paused, or just deposed: the broker may have sent what replaced the lease,
            // not read yet. Listen for `quiet` as after a (re)subscription.
            viewIsStale = false
            if watchingSince != nil { watchingSince = now }
        }
        switch role {
        case .standby:
            // Not within `quiet` of the (re)subscription: what the broker kept for the
            // session (a later claim, the retained lease) comes first.
            guard eligible, caughtUp, let since = watchingSince, now - since >= quiet else { return .none }
            let due: Bool
            if let current, let currentSeen {
                if current.isReleased {
                    due = now - currentSeen >= stagger
                } else if current.instance == instance {
                    // Its own, and it is not active: a lease of a run before this one, or one
                    // it lost with its connection (a broker restart drops every connection
                    // and publishes no will). Nobody else holds it; a claim of another that
                    // came meanwhile would have replaced it.
                    due = now - currentSeen >= quiet + stagger
                } else {
                    due = now - currentSeen >= term
                }
            } else {
                // No lease at all (none retained).
                due = now - since >= quiet + stagger
            }
            guard due else { return .none }
            let epoch = highestEpoch + 1
            highestEpoch = epoch
            role = .claiming(epoch)
            claimSeen = nil
            claimed = nil
            validUntil = nil
            return .claim(epoch: epoch)
        case .claiming(let epoch):
            if let claimSeen, now - claimSeen >= settle, claimed != nil, mayPublishOnceActive(now) {
                role = .active(epoch)
                takeovers += 1
                nextRenewal = now
                return .activate(epoch: epoch)
            }
            if let claimed, claimSeen == nil, now - claimed >= term {
                return lose("the claim of epoch \(epoch) did not come back from the broker")
            }
            if claimed != nil, let nextRenewal, now >= nextRenewal {
                self.nextRenewal = now + renewal
                return .renew
            }
            return .none
        case .active(let epoch):
            guard mayPublish(now: now) else { return lose("the lease of epoch \(epoch) was not renewed in time") }
            if let nextRenewal, now >= nextRenewal {
                self.nextRenewal = now + renewal
                return .renew
            }
            return .none
        }
    }

    private func mayPublishOnceActive(_ now: ContinuousClock.Instant) -> Bool { validUntil.map { now < $0 } ?? false }

    private mutating func lose(_ reason: String) -> Action {
        role = .standby
        viewIsStale = true
        claimSeen = nil
        claimed = nil
        validUntil = nil
        nextRenewal = nil
        return .depose(reason: reason)
    }
}
