import LiveTopics

/// Per-topic publish coalescing (`output.minInterval`): at most one publication per topic
/// per interval. The first goes out at once (the leading edge); later ones within the
/// interval wait, each replacing the one before, and the last goes out when the interval
/// ends (the trailing edge), so the final state always reaches the broker.
///
/// Pure bookkeeping: the caller sends what ``admit(_:now:)`` lets through and, on a timer,
/// what ``due(now:)`` returns.
public struct PublishCoalescer: Sendable {
    public let interval: Duration
    /// When each topic last had a publication sent, for topics sent within the interval
    /// (older entries are pruned: they no longer hold anything back).
    private var lastSent: [String: MonotonicInstant] = [:]
    /// The latest publication per topic that waits for its interval to end.
    private var waiting: [String: Publication] = [:]
    private var lastPruned: MonotonicInstant?
    /// Publications replaced by a later one (or dropped with their topic) before they went out.
    public private(set) var coalesced = 0

    public init(interval: Duration) {
        self.interval = interval
    }

    /// Publications waiting now.
    public var waitingCount: Int { waiting.count }
    /// Topics whose last send still holds the next one back (or may: pruned once an interval).
    public var trackedCount: Int { lastSent.count }

    /// Whether `publication` may go out now. If not, it waits for ``due(now:)``, replacing
    /// whatever waited for its topic.
    public mutating func admit(_ publication: Publication, now: MonotonicInstant) -> Bool {
        if waiting.updateValue(publication, forKey: publication.topic) != nil {
            coalesced += 1
            return false
        }
        if let last = lastSent[publication.topic], now - last < interval { return false }
        waiting[publication.topic] = nil
        lastSent[publication.topic] = now
        return true
    }

    /// The waiting publications whose topic's interval has ended: send them now.
    public mutating func due(now: MonotonicInstant) -> [Publication] {
        var ready: [Publication] = []
        for (topic, publication) in waiting where now - (lastSent[topic] ?? now - interval) >= interval {
            ready.append(publication)
        }
        for publication in ready {
            waiting[publication.topic] = nil
            lastSent[publication.topic] = now
        }
        // Keep the table to the topics sent within the last interval or two: bounded by the
        // rate, not by the number of locations ever seen. Pruned once an interval, whether
        // or not anything waits.
        if now - (lastPruned ?? now - interval) >= interval {
            lastPruned = now
            lastSent = lastSent.filter { now - $0.value < interval }
        }
        return ready
    }

    /// Forgets what waits for `topic` (it is being cleared: a waiting style must not
    /// follow the clearing).
    public mutating func drop(topic: String) {
        if waiting.removeValue(forKey: topic) != nil { coalesced += 1 }
    }

    /// Everything that waits, at once (on shutdown, or before the `offline` status).
    public mutating func takeAll(now: MonotonicInstant) -> [Publication] {
        let all = Array(waiting.values)
        for publication in all { lastSent[publication.topic] = now }
        waiting.removeAll()
        return all
    }
}
