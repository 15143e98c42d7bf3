/// Which subscriptions the client wants, which are in flight, and who waits for them.
///
/// Pure bookkeeping: it returns what to send and what to report, and the client carries
/// that out. On every (re)connection every wanted subscription is sent again; a refused
/// one is reported and forgotten, never retried.
struct SubscriptionBook<Waiter> {
    struct Subscription: Equatable {
        var filter: String
        var qos: MQTTQoS
    }

    /// What became of one filter in a SUBACK.
    enum Outcome {
        case granted(filter: String, qos: MQTTQoS, waiters: [Waiter])
        case refused(filter: String, reasonCode: Int32, waiters: [Waiter])
    }

    /// Wanted subscriptions, in the order they were first asked for.
    private(set) var wanted: [Subscription] = []
    private var waiters: [String: [Waiter]] = [:]
    private var inflight = PendingAcks<[String], [Int32]>()

    /// Someone asks for a subscription.
    /// - Returns: the subscription to send now when connected, else `nil` (it goes out on connect).
    mutating func request(_ filter: String, qos: MQTTQoS, waiter: Waiter, connected: Bool) -> Subscription? {
        let subscription = Subscription(filter: filter, qos: qos)
        if let index = wanted.firstIndex(where: { $0.filter == filter }) {
            wanted[index].qos = qos
        } else {
            wanted.append(subscription)
        }
        waiters[filter, default: []].append(waiter)
        return connected ? subscription : nil
    }

    /// The SUBSCRIBE for `filters` went out as message `mid`.
    /// - Returns: outcomes if the SUBACK arrived first.
    mutating func sent(mid: Int32, filters: [String]) -> [Outcome] {
        guard let granted = inflight.sent(mid: mid, waiter: filters) else { return [] }
        return resolve(filters: filters, granted: granted)
    }

    /// A SUBACK arrived: one granted QoS or reason code per filter, in order.
    mutating func acknowledged(mid: Int32, granted: [Int32]) -> [Outcome] {
        guard let filters = inflight.acknowledged(mid: mid, ack: granted) else { return [] }
        return resolve(filters: filters, granted: granted)
    }

    /// The library refused to send a subscription (an invalid filter, say): it is forgotten.
    /// - Returns: its waiters, to fail.
    mutating func sendFailed(filter: String) -> [Waiter] {
        wanted.removeAll { $0.filter == filter }
        return waiters.removeValue(forKey: filter) ?? []
    }

    /// The broker accepted a new connection: message ids of the old one are void.
    /// - Returns: every wanted subscription, to send again.
    mutating func connected() -> [Subscription] {
        _ = inflight.removeAll()
        return wanted
    }

    /// A subscription is no longer wanted.
    /// - Returns: whether it was wanted, and its pending waiters (to fail).
    mutating func remove(_ filter: String) -> (wasWanted: Bool, waiters: [Waiter]) {
        let index = wanted.firstIndex { $0.filter == filter }
        if let index { wanted.remove(at: index) }
        return (index != nil, waiters.removeValue(forKey: filter) ?? [])
    }

    /// The client stops for good.
    /// - Returns: every pending waiter, to fail.
    mutating func removeAll() -> [Waiter] {
        _ = inflight.removeAll()
        let all = waiters.values.flatMap { $0 }
        waiters.removeAll()
        return all
    }

    private mutating func resolve(filters: [String], granted: [Int32]) -> [Outcome] {
        var outcomes: [Outcome] = []
        for (index, filter) in filters.enumerated() {
            // A SUBACK with too few codes is a broker error; treat a missing code as a refusal.
            let code = index < granted.count ? granted[index] : 0x80
            let waiting = waiters.removeValue(forKey: filter) ?? []
            if let qos = MQTTQoS(rawValue: code) {
                // Unsubscribed while the SUBSCRIBE was in flight: nothing to report.
                if waiting.isEmpty && !wanted.contains(where: { $0.filter == filter }) { continue }
                outcomes.append(.granted(filter: filter, qos: qos, waiters: waiting))
            } else {
                wanted.removeAll { $0.filter == filter }
                outcomes.append(.refused(filter: filter, reasonCode: code, waiters: waiting))
            }
        }
        return outcomes
    }
}
