import Testing

@testable import Mosquitto

@Suite("Client bookkeeping, without a broker")
struct BookkeepingTests {
    @Test("an ack that arrives before the sender registers is handed back on registration")
    func earlyAck() {
        var acks = PendingAcks<String, Int32>()
        #expect(acks.acknowledged(mid: 7, ack: 0) == nil)
        #expect(acks.sent(mid: 7, waiter: "publisher") == 0)
        #expect(acks.isEmpty)
    }

    @Test("an ack after registration goes to its waiter")
    func lateAck() {
        var acks = PendingAcks<String, Int32>()
        #expect(acks.sent(mid: 3, waiter: "a") == nil)
        #expect(acks.sent(mid: 4, waiter: "b") == nil)
        #expect(acks.acknowledged(mid: 4, ack: 0) == "b")
        #expect(acks.acknowledged(mid: 3, ack: 0x87) == "a")
        #expect(acks.isEmpty)
    }

    @Test("publications: early and late acks as PendingAcks gives them, ids in and out of the table's slots")
    func pendingPublishes() {
        var acks = PendingPublishes<String, Int32>()
        #expect(acks.acknowledged(mid: 7, ack: 0) == nil)
        #expect(acks.sent(mid: 7, waiter: "early") == 0)
        #expect(acks.sent(mid: 3, waiter: "a") == nil)
        #expect(acks.sent(mid: 4, waiter: "b") == nil)
        #expect(acks.acknowledged(mid: 4, ack: 0) == "b")
        #expect(acks.acknowledged(mid: 3, ack: 0x87) == "a")
        #expect(acks.isEmpty)
        // Two ids of one slot: the second waits beside the table, and so does every id
        // until it is acknowledged.
        let slots = Int32(PendingPublishes<String, Int32>.slotCount)
        #expect(acks.sent(mid: 5, waiter: "first") == nil)
        #expect(acks.sent(mid: 5 + slots, waiter: "same slot") == nil)
        #expect(acks.sent(mid: 6, waiter: "next") == nil)
        #expect(acks.acknowledged(mid: 8, ack: 0x10) == nil)
        #expect(acks.acknowledged(mid: 5, ack: 0) == "first")
        #expect(acks.acknowledged(mid: 6, ack: 0) == "next")
        #expect(acks.acknowledged(mid: 5 + slots, ack: 0) == "same slot")
        #expect(acks.sent(mid: 8, waiter: "late") == 0x10)
        #expect(acks.isEmpty)
        // The whole window's ids, acknowledged in order, wrapping past 65,535 (0 is never an id).
        var mid: Int32 = 65_000
        var waiting: [Int32] = []
        for _ in 0..<1000 {
            #expect(acks.sent(mid: mid, waiter: "\(mid)") == nil)
            waiting.append(mid)
            mid = mid == 65_535 ? 1 : mid + 1
        }
        for id in waiting { #expect(acks.acknowledged(mid: id, ack: 0) == "\(id)") }
        #expect(acks.isEmpty)
        #expect(acks.sent(mid: 9, waiter: "in the table") == nil)
        #expect(acks.sent(mid: 9 + slots, waiter: "beside it") == nil)
        #expect(Set(acks.removeAll()) == ["in the table", "beside it"])
        #expect(acks.isEmpty)
    }

    @Test("subscriptions wait for the connection, then go out; every reconnection re-sends them")
    func resubscription() {
        var book = SubscriptionBook<String>()
        #expect(book.request("a/#", qos: .atLeastOnce, waiter: "w1", connected: false) == nil)
        let first = book.connected()
        #expect(first.map(\.filter) == ["a/#"])
        #expect(book.sent(mid: 1, filters: ["a/#"]).isEmpty)
        let outcomes = book.acknowledged(mid: 1, granted: [1])
        guard case .granted(let filter, let qos, let waiters) = outcomes.first else {
            Issue.record("expected a grant, got \(outcomes)")
            return
        }
        #expect(filter == "a/#" && qos == .atLeastOnce && waiters == ["w1"])
        // After a reconnection the same subscription is sent again, with nobody waiting.
        #expect(book.connected().map(\.filter) == ["a/#"])
        _ = book.sent(mid: 9, filters: ["a/#"])
        guard case .granted(_, _, let again) = book.acknowledged(mid: 9, granted: [1]).first else {
            Issue.record("expected a grant")
            return
        }
        #expect(again.isEmpty)
    }

    @Test("a SUBACK that beats the send call's return is still matched")
    func earlySuback() {
        var book = SubscriptionBook<String>()
        let send = book.request("x", qos: .atMostOnce, waiter: "w", connected: true)
        #expect(send?.filter == "x")
        #expect(book.acknowledged(mid: 5, granted: [0]).isEmpty)
        guard case .granted(_, let qos, let waiters) = book.sent(mid: 5, filters: ["x"]).first else {
            Issue.record("expected a grant")
            return
        }
        #expect(qos == .atMostOnce && waiters == ["w"])
    }

    @Test("a refused subscription is reported once and never sent again")
    func refusedIsForgotten() {
        var book = SubscriptionBook<String>()
        _ = book.request("secret/#", qos: .atLeastOnce, waiter: "w", connected: true)
        _ = book.request("open/#", qos: .atLeastOnce, waiter: "v", connected: true)
        _ = book.sent(mid: 1, filters: ["secret/#"])
        _ = book.sent(mid: 2, filters: ["open/#"])
        guard case .refused(let filter, let code, let waiters) = book.acknowledged(mid: 1, granted: [0x87]).first else {
            Issue.record("expected a refusal")
            return
        }
        #expect(filter == "secret/#" && code == 0x87 && waiters == ["w"])
        #expect(book.connected().map(\.filter) == ["open/#"])
    }

    @Test("unsubscribing forgets the filter and returns its waiters")
    func removal() {
        var book = SubscriptionBook<String>()
        _ = book.request("a", qos: .atLeastOnce, waiter: "w", connected: false)
        let (wasWanted, waiters) = book.remove("a")
        #expect(wasWanted && waiters == ["w"])
        #expect(book.connected().isEmpty)
        #expect(book.remove("a").wasWanted == false)
    }

    @Test("backoff doubles up to the maximum and resets")
    func backoff() {
        var backoff = ReconnectBackoff(MQTTBackoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0))
        var random = SystemRandomNumberGenerator()
        let delays = (0..<6).map { _ in backoff.next(using: &random) }
        #expect(delays == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        backoff.reset()
        #expect(backoff.next(using: &random) == .milliseconds(100))
    }

    @Test("jitter stays within its fraction")
    func jitter() {
        var backoff = ReconnectBackoff(MQTTBackoff(initial: .seconds(1), maximum: .seconds(1), jitter: 0.2))
        var random = SystemRandomNumberGenerator()
        for _ in 0..<100 {
            let delay = backoff.next(using: &random)
            #expect(delay >= .milliseconds(800) && delay <= .milliseconds(1200))
        }
    }

    @Test("a secret never prints itself")
    func secretRedaction() {
        let secret = MQTTSecret("hunter2")
        let credentials = MQTTCredentials(username: "u", password: secret)
        #expect("\(secret)" == "<redacted>")
        #expect(!"\(credentials)".contains("hunter2"))
        #expect(!String(reflecting: credentials).contains("hunter2"))
    }

    @Test("a persistent session without a client id is refused up front")
    func persistentNeedsClientID() {
        var configuration = MQTTConfiguration()
        configuration.cleanStart = false
        #expect(throws: MQTTError.invalidConfiguration("a persistent session (clean start off) needs a fixed client id")) {
            _ = try MQTTClient(configuration: configuration, logger: .init(label: "test"))
        }
    }

    @Test("an unreadable TLS file is named")
    func unreadableTLSFile() {
        var configuration = MQTTConfiguration()
        configuration.tls = MQTTTLSConfiguration(caFile: "/nonexistent/ca.crt")
        #expect(
            throws: MQTTError.invalidConfiguration(
                "cannot read the TLS CA file /nonexistent/ca.crt: it does not exist or is not readable")
        ) {
            _ = try MQTTClient(configuration: configuration, logger: .init(label: "test"))
        }
    }
}
