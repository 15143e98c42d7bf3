import LiveTopics

/// The retained topics (styles, summaries) this daemon cleared, while a bridge to a central
/// broker is watched (`partition.bridge`): each is to be cleared again there when the
/// bridge comes back, since a bridge may lose a clear made while its link was down (its
/// queue full, or an edge restarted without persistence) and sends, on reconnecting, only
/// what the edge still retains.
///
/// Here: the clears made since the last snapshot, deduplicated by topic, with when. Each
/// snapshot moves them into the state file (`cleared_topics`, written before the locations
/// and the journal position the snapshot covers: a crash after the clear and before that
/// finds the update that made it in the journal, whose replay notes it again). Without a
/// state file they stay here. A topic leaves the record when the bridge's recovery finds it
/// held again (a location came back to it), outside the partition, or older than the
/// horizon.
struct ClearedTopics {
    /// The clears not yet in the state file (all of them without one): topic → when
    /// (milliseconds since 1970).
    private(set) var unwritten: [String: Int64] = [:]
    /// `partition.bridgeHorizon`: how long a clear is kept to be published again.
    let horizon: Duration
    /// When the state file's record was last pruned of what passed the horizon.
    private var prunedAt: ContinuousClock.Instant?

    init(horizon: Duration) { self.horizon = horizon }

    /// A clear of `topic` was put in line (or held), now.
    mutating func cleared(_ topic: String) {
        unwritten[topic] = LiveTimestamp.now.millisecondsSince1970
    }

    /// The clears to write to the state file; ``putBack(_:)`` when that fails.
    mutating func takeUnwritten() -> [String: Int64] {
        defer { unwritten = [:] }
        return unwritten
    }

    mutating func putBack(_ topics: [String: Int64]) {
        unwritten.merge(topics) { max($0, $1) }
    }

    /// Forgets clears kept in memory (no state file) whose topic is published again or no
    /// longer this daemon's.
    mutating func forget(_ topics: [String]) {
        for topic in topics { unwritten[topic] = nil }
    }

    /// The time before which a clear has passed the horizon (milliseconds since 1970).
    var cutoff: Int64 {
        let now = LiveTimestamp.now.millisecondsSince1970
        let (seconds, attoseconds) = horizon.components
        return now - seconds * 1000 - attoseconds / 1_000_000_000_000_000
    }

    /// Forgets the clears kept in memory that passed the horizon.
    mutating func forgetExpired() {
        let cutoff = cutoff
        unwritten = unwritten.filter { $0.value >= cutoff }
    }

    /// Whether the state file's record is due a prune of what passed the horizon (at the
    /// first snapshot, then hourly: a prune reads the whole table); marks it done.
    mutating func takePruneDue() -> Bool {
        let now = ContinuousClock.now
        if let prunedAt, now - prunedAt < .seconds(3600) { return false }
        prunedAt = now
        return true
    }
}
