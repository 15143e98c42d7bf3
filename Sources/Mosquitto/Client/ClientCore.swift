import CMosquitto
import Foundation
import Logging
import LiveTopics
import Synchronization

/// The client's shared state and its network thread. The C callbacks reach it through
/// the handle's user data; they run only inside `mosquitto_connect*` and `mosquitto_loop`
/// on the network thread, which holds a strong reference for as long as it runs.
final class ClientCore: Sendable {
    typealias SubscribeWaiter = CheckedContinuation<MQTTQoS, any Error>
    typealias Waiter = CheckedContinuation<Void, any Error>

    /// The caller of ``MQTTClient/publish(_:payload:qos:retain:connection:)`` waiting for its
    /// publication, as a reference: resumed once, by the acknowledgement, the failure, or the
    /// caller's cancellation, whichever comes first. A `CheckedContinuation` is a type of the
    /// standard library whose layout this module does not see, so every copy of a record
    /// holding one goes through its value witnesses; a reference copies as a retain, and a
    /// publication nobody waits for holds none.
    final class PublishAwaiter: Sendable {
        private let continuation: Waiter
        private let resumed = Atomic<Bool>(false)

        init(_ continuation: Waiter) {
            self.continuation = continuation
        }

        func resume() {
            guard !resumed.exchange(true, ordering: .acquiringAndReleasing) else { return }
            continuation.resume()
        }

        func resume(throwing error: any Error) {
            guard !resumed.exchange(true, ordering: .acquiringAndReleasing) else { return }
            continuation.resume(throwing: error)
        }
    }

    /// A publication handed to libmosquitto and not yet acknowledged. Plain values and one
    /// optional reference, so that the table of them copies it without generic calls.
    struct PublishWaiter {
        /// Where its topic is kept (``Outbox/KeptTopics``): read only if the broker refuses it.
        var topic: Outbox.KeptTopics.Place
        /// `nil` for a publish nobody waits for; its ack is only consumed.
        var continuation: PublishAwaiter?
        /// What the owner passed with ``MQTTClient/send(_:payload:qos:retain:origin:connection:)``.
        var origin: MonotonicInstant?
        /// QoS 1 or 2: it holds a place in the in-flight window until acknowledged.
        var inFlight = false
    }

    /// What other threads ask the network thread to send besides publications (those go
    /// through the ``Outbox``): every call into libmosquitto for a connection is made on its
    /// network thread once that runs, so that the library's own locks guard nothing (see
    /// ``MQTTSocketBuffering``, which leaves them out).
    enum Command {
        case subscribe(SubscriptionBook<SubscribeWaiter>.Subscription)
        case unsubscribe(String, Waiter)
    }

    struct UnsubscribeWaiter {
        var filter: String
        var continuation: Waiter
    }

    struct State {
        var connection: MQTTConnectionState = .closed
        var started = false
        var stopRequested = false
        var finished = false
        /// The first attempt's failure closes the client (``MQTTClient/connect()``).
        var failFast = false
        var hasConnected = false
        var attemptConnected = false
        var firstConnect: Waiter?
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        var subscriptions = SubscriptionBook<SubscribeWaiter>()
        var publishes = PendingPublishes<PublishWaiter, Int32>()
        var unsubscribes = PendingAcks<UnsubscribeWaiter, Bool>()
        /// Why the broker refused the current attempt's CONNECT, if it did.
        var refusal: String?
        /// The last error line libmosquitto logged (TLS failures say more there than in codes).
        var libraryError: String?
        /// What the broker's CONNACK said, for the current or last connection.
        var session = MQTTSession()
    }

    let handle: Handle
    let configuration: MQTTConfiguration
    let logger: Logger
    /// Messages sent without a waiter that the broker refused (a PUBACK reason ≥ 0x80), and
    /// the last refusal: the owner of the client reports them (nobody waits for them).
    let refusedPublishes = Mutex<(count: Int, last: MQTTError?)>((0, nil))
    let eventContinuation: AsyncStream<MQTTEvent>.Continuation
    let messageContinuation: AsyncStream<MQTTMessage>.Continuation
    let handler: MessageHandler?
    let readEnd: ReadEndHandler?
    let acknowledged: AcknowledgementHandler?
    let state = Mutex(State())
    /// QoS 1 and 2 publications handed to libmosquitto and not yet acknowledged.
    let inFlight = Atomic<Int>(0)
    /// QoS 1 and 2 publications handed to libmosquitto, and those acknowledged, ever.
    let sentCount = Atomic<Int>(0)
    let acknowledgedCount = Atomic<Int>(0)
    /// Connections the broker accepted, ever: counted from the CONNACK's callback, on the
    /// network thread, before anything else that connection reads.
    let acceptedCount = Atomic<Int>(0)
    /// Messages received in the network loop's current pass (see `takePassCounts()`).
    let readInPass = Atomic<Int>(0)
    /// ``acknowledgedCount`` when the network loop's current pass began.
    let acknowledgedAtPass = Atomic<Int>(0)
    /// Open from the broker's CONNACK until the network thread starts another connection,
    /// set on the network thread (see ``setGate(_:)``), which alone reads it exactly (other
    /// threads read it as a hint). Every call that makes libmosquitto queue a packet
    /// (publish, subscribe, unsubscribe) is made on the network thread while it is open:
    /// libmosquitto opens the socket before it queues the CONNECT, and a packet queued in
    /// between would reach the broker ahead of the CONNECT, which the broker answers by
    /// closing the connection ("protocol error").
    let gateOpen = Atomic<Bool>(false)
    /// Publications handed over and not yet taken by the network thread (see ``Outbox``),
    /// and how many.
    let outbox = Mutex(Outbox())
    let outboxCount = Atomic<Int>(0)
    /// The network thread's side of the outbox.
    nonisolated(unsafe) var outboxDrain = OutboxDrain()
    /// Commands for the network thread (see ``Command``), and how many.
    let commands = Mutex<[Command]>([])
    let commandCount = Atomic<Int>(0)
    /// Publications without a waiter that libmosquitto refused (a payload too large for
    /// the broker's maximum packet size, an invalid topic), and the last one's topic and
    /// error: dropped, since the same bytes would be refused again.
    let libraryRefusals = Mutex<(count: Int, last: String?)>((0, nil))
    /// A stop asked for a DISCONNECT: the network thread sends it after what the outbox
    /// holds.
    let disconnectRequested = Atomic<Bool>(false)
    /// Shared with the network loop (and the other connections of the loop, if any).
    let signals: NetworkSignals
    /// The connections published on together, when this is one of several (see
    /// ``MQTTConfiguration/connections``): they report their state as one. `nil` alone.
    let group: ConnectionGroup?
    /// This connection's place among them.
    let index: Int
    /// The network thread cut the connection under a refused message (see ``cutConnection()``).
    let connectionCut = Atomic<Bool>(false)
    /// The current (or last) connection's socket calls go through the buffers
    /// (``MQTTSocketBuffering``); 0 before the first connection, 1 no, 2 yes.
    let socketMode = Atomic<Int>(0)

    init(
        handle: Handle, configuration: MQTTConfiguration, logger: Logger,
        events: AsyncStream<MQTTEvent>.Continuation, messages: AsyncStream<MQTTMessage>.Continuation,
        handler: MessageHandler? = nil, readEnd: ReadEndHandler? = nil, acknowledged: AcknowledgementHandler? = nil,
        signals: NetworkSignals, group: ConnectionGroup? = nil, index: Int = 0
    ) {
        self.handler = handler
        self.readEnd = readEnd
        self.acknowledged = acknowledged
        self.signals = signals
        self.group = group
        self.index = index
        self.handle = handle
        self.configuration = configuration
        self.logger = logger
        self.eventContinuation = events
        self.messageContinuation = messages
    }

    var mosq: OpaquePointer { handle.mosq }

    /// Applies the configuration to the libmosquitto handle and installs the callbacks.
    func configure() throws(MQTTError) {
        mosquitto_user_data_set(mosq, Unmanaged.passUnretained(self).toOpaque())
        try check(mosquitto_threaded_set(mosq, true), "mosquitto_threaded_set")
        let version = configuration.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(
            mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, version), "mosquitto_int_option(PROTOCOL_VERSION)")
        try check(mosquitto_int_option(mosq, MOSQ_OPT_TCP_NODELAY, 1), "mosquitto_int_option(TCP_NODELAY)")
        // The send maximum is libmosquitto's in-flight limit with MQTT 3.1.1 too.
        try check(
            mosquitto_int_option(mosq, MOSQ_OPT_SEND_MAXIMUM, Int32(Self.windowLimit(configuration.sendMaximum))),
            "mosquitto_int_option(SEND_MAXIMUM)")
        if configuration.protocolVersion == .v5 {
            try check(
                mosquitto_int_option(mosq, MOSQ_OPT_RECEIVE_MAXIMUM, Int32(Self.windowLimit(configuration.receiveMaximum))),
                "mosquitto_int_option(RECEIVE_MAXIMUM)")
        }
        if let credentials = configuration.credentials {
            try check(
                mosquitto_username_pw_set(mosq, credentials.username, credentials.password?.value),
                "mosquitto_username_pw_set")
        }
        if let tls = configuration.tls {
            try check(mosquitto_tls_set(mosq, tls.caFile, nil, tls.certFile, tls.keyFile, nil), "mosquitto_tls_set")
        }
        if let will = configuration.will {
            let code = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(
                    mosq, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue, will.retain, nil)
            }
            try check(code, "mosquitto_will_set_v5")
        }
        if configuration.buffersSocket, let reason = MQTTSocketBuffering.unavailableReason {
            logger.notice("libmosquitto's socket calls are not buffered: \(reason)")
        }
        installCallbacks()
    }

    // MARK: - Lifecycle

    /// Calls `waiter` once the network thread has ended (at once if it has); `false` when
    /// it has not (the caller asks it to stop).
    func waitForEnd(_ waiter: CheckedContinuation<Void, Never>) -> Bool {
        let finishedAlready = state.withLock { state -> Bool in
            if state.finished { return true }
            state.stopWaiters.append(waiter)
            return false
        }
        if finishedAlready { waiter.resume() }
        return !finishedAlready
    }

    /// Marks the connection as stopping and has the DISCONNECT sent if it is connected; the
    /// caller then stops the network loop (``NetworkSignals/stop()``).
    /// - Returns: whether the network loop was launched.
    func requestStop() -> Bool {
        let (launched, connected) = state.withLock { state -> (Bool, Bool) in
            state.stopRequested = true
            let connected = state.connection == .connected
            if connected { setConnection(&state, .disconnecting) }
            return (state.started, connected)
        }
        // Sent by the network thread after what the outbox holds; the stop that follows
        // (``NetworkSignals/stop()``) wakes it, so that the connection it ends is known as
        // stopped, not lost.
        if connected { disconnectRequested.store(true, ordering: .sequentiallyConsistent) }
        return launched
    }

    /// Ends the client: fails whatever still waits and finishes the streams.
    func finish() {
        let (stopWaiters, firstConnect, subscribers, publishers, unsubscribers) = state.withLock { state in
            state.finished = true
            state.started = true
            setConnection(&state, .closed)
            defer {
                state.stopWaiters = []
                state.firstConnect = nil
            }
            inFlight.store(0, ordering: .relaxed)
            return (
                state.stopWaiters, state.firstConnect, state.subscriptions.removeAll(), state.publishes.removeAll(),
                state.unsubscribes.removeAll()
            )
        }
        setGate(false)
        firstConnect?.resume(throwing: MQTTError.disconnected)
        for waiter in emptyOutbox() { waiter.resume(throwing: MQTTError.disconnected) }
        for waiter in subscribers { waiter.resume(throwing: MQTTError.disconnected) }
        for waiter in publishers { waiter.continuation?.resume(throwing: MQTTError.disconnected) }
        for waiter in unsubscribers { waiter.continuation.resume(throwing: MQTTError.disconnected) }
        eventContinuation.finish()
        messageContinuation.finish()
        for waiter in stopWaiters { waiter.resume() }
    }

    /// Records a state change and reports it; call with the state locked.
    func setConnection(_ state: inout State, _ connection: MQTTConnectionState) {
        guard state.connection != connection else { return }
        state.connection = connection
        if let group { group.changed(index, to: connection) } else { eventContinuation.yield(.state(connection)) }
        logger.debug("MQTT connection \(connection.rawValue)")
    }

    // MARK: - Operations

    func subscribe(_ filter: String, qos: MQTTQoS, waiter: SubscribeWaiter) {
        enum Next {
            case stopped
            case wait
            case send(SubscriptionBook<SubscribeWaiter>.Subscription)
        }
        let next = state.withLock { state -> Next in
            if state.stopRequested { return .stopped }
            let send = state.subscriptions.request(
                filter, qos: qos, waiter: waiter, connected: state.connection == .connected)
            return send.map(Next.send) ?? .wait
        }
        switch next {
        case .stopped: waiter.resume(throwing: MQTTError.disconnected)
        case .wait: break
        case .send(let subscription): queue(.subscribe(subscription))
        }
    }

    /// Sends one SUBSCRIBE, on the network thread; a result that arrived before this
    /// returns is handled here too.
    func sendNow(_ subscription: SubscriptionBook<SubscribeWaiter>.Subscription) {
        var mid: Int32 = 0
        // MQTT 5: retained messages only for a subscription the session does not hold yet,
        // so that a resumed session does not get them again as if they were new.
        let options = configuration.protocolVersion == .v5 ? Int32(MQTT_SUB_OPT_SEND_RETAIN_NEW.rawValue) : 0
        let code =
            gateOpen.load(ordering: .relaxed)
            ? mosquitto_subscribe_v5(mosq, &mid, subscription.filter, subscription.qos.rawValue, options, nil)
            : MOSQ_ERR_NO_CONN.raw
        if code == MOSQ_ERR_NO_CONN.raw {
            return  // The connection dropped meanwhile; it goes out again on reconnection.
        }
        if code != MOSQ_ERR_SUCCESS.raw {
            let error = MQTTError.library(
                function: "mosquitto_subscribe_v5", code: code, reason: describeResult(code, errno: errno))
            let waiters = state.withLock { state in
                eventContinuation.yield(.subscriptionFailed(filter: subscription.filter, error: error))
                return state.subscriptions.sendFailed(filter: subscription.filter)
            }
            for waiter in waiters { waiter.resume(throwing: error) }
            return
        }
        let outcomes = state.withLock { $0.subscriptions.sent(mid: mid, filters: [subscription.filter]) }
        report(outcomes)
    }

    func report(_ outcomes: [SubscriptionBook<SubscribeWaiter>.Outcome]) {
        for outcome in outcomes {
            switch outcome {
            case .granted(let filter, let qos, let waiters):
                eventContinuation.yield(.subscribed(filter: filter, qos: qos))
                logger.debug("subscribed", metadata: ["mqtt.filter": "\(filter)", "mqtt.qos": "\(qos.rawValue)"])
                for waiter in waiters { waiter.resume(returning: qos) }
            case .refused(let filter, let code, let waiters):
                let error = MQTTError.subscriptionRefused(filter: filter, reasonCode: code, reason: reasonText(code))
                eventContinuation.yield(.subscriptionFailed(filter: filter, error: error))
                logger.warning("\(error)", metadata: ["mqtt.filter": "\(filter)"])
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }

    func unsubscribe(_ filter: String, waiter: Waiter) {
        let (queued, pending) = state.withLock { state in
            let pending = state.subscriptions.remove(filter).waiters
            guard state.connection == .connected else { return (false, pending) }
            // Queued under the state's lock: a client that ends after this settles it
            // (``finish()``), and one that ended before is not connected.
            append(.unsubscribe(filter, waiter))
            return (true, pending)
        }
        for subscriber in pending { subscriber.resume(throwing: MQTTError.disconnected) }
        guard queued else {
            eventContinuation.yield(.unsubscribed(filter: filter))
            waiter.resume()
            return
        }
        signals.wakeNetworkLoop()
    }

    /// Sends one UNSUBSCRIBE, on the network thread.
    private func unsubscribeNow(_ filter: String, waiter: Waiter) {
        var mid: Int32 = 0
        let code = gateOpen.load(ordering: .relaxed) ? mosquitto_unsubscribe_v5(mosq, &mid, filter, nil) : MOSQ_ERR_NO_CONN.raw
        guard code == MOSQ_ERR_SUCCESS.raw else {
            if code == MOSQ_ERR_NO_CONN.raw {
                eventContinuation.yield(.unsubscribed(filter: filter))
                waiter.resume()
            } else {
                waiter.resume(
                    throwing: MQTTError.library(
                        function: "mosquitto_unsubscribe_v5", code: code, reason: describeResult(code, errno: errno)))
            }
            return
        }
        let acknowledgedAlready = state.withLock {
            $0.unsubscribes.sent(mid: mid, waiter: UnsubscribeWaiter(filter: filter, continuation: waiter)) ?? false
        }
        if acknowledgedAlready {
            eventContinuation.yield(.unsubscribed(filter: filter))
            waiter.resume()
        }
    }

    /// Queues a command for the network thread, and wakes it.
    private func queue(_ command: Command) {
        append(command)
        signals.wakeNetworkLoop()
    }

    /// Queues a command. The count moves under the lock and sequentially consistent, as the
    /// outbox's does (see ``handOver(_:then:payload:qos:retain:waiter:origin:)``).
    private func append(_ command: Command) {
        commands.withLock { commands in
            commands.append(command)
            commandCount.add(1, ordering: .sequentiallyConsistent)
        }
    }

    /// Commands wait for the network thread.
    var commandsWait: Bool { commandCount.load(ordering: .sequentiallyConsistent) > 0 }

    /// On the network thread (or once it has ended): sends what other threads asked for, in
    /// order. While the gate is closed a command is settled as one made without a
    /// connection: a subscription goes out again with the next connection, an
    /// unsubscription is done (the session's subscription goes with the session).
    func runCommands() {
        guard commandsWait else { return }
        let taken = commands.withLock { commands -> [Command] in
            commandCount.subtract(commands.count, ordering: .relaxed)
            defer { commands = [] }
            return commands
        }
        for command in taken {
            switch command {
            case .subscribe(let subscription): sendNow(subscription)
            case .unsubscribe(let filter, let waiter): unsubscribeNow(filter, waiter: waiter)
            }
        }
    }

    /// Opens or closes the send gate (on the network thread). Closing it settles what
    /// waits for the connection that ended (see ``runCommands()``).
    func setGate(_ open: Bool) {
        gateOpen.store(open, ordering: .relaxed)
        if !open { runCommands() }
    }

    /// A Send or Receive Maximum as MQTT 5 allows it: 1 to 65,535 messages in flight.
    static func windowLimit(_ value: Int) -> Int { min(max(value, 1), 65_535) }

    /// Hands a message to the network thread, which gives it to libmosquitto (see
    /// ``handOver(_:then:payload:qos:retain:waiter:origin:)``); `waiter`, if any, completes
    /// when it is done.
    /// - Throws: ``MQTTError/disconnected`` without a waiter while not connected.
    func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, waiter awaiter: PublishAwaiter?, origin: MonotonicInstant? = nil
    ) throws(MQTTError) {
        // `withUnsafeBytes` rethrows untyped errors: the typed one is carried out.
        let result = payload.withUnsafeBytes { bytes in
            Result { () throws(MQTTError) in
                try handOver(topic, then: "", payload: bytes, qos: qos, retain: retain, waiter: awaiter, origin: origin)
            }
        }
        try result.get()
    }

    func complete(_ publish: PublishWaiter, reason: Int32) {
        if publish.inFlight {
            acknowledgedCount.add(1, ordering: .relaxed)
            let left = inFlight.subtract(1, ordering: .relaxed).newValue
            acknowledged?(
                MQTTAcknowledgement(
                    origin: publish.origin, acknowledgedAt: outboxDrain.readAt, inFlight: max(left, 0),
                    refused: reason >= 0x80))
        }
        guard reason >= 0x80 else {
            publish.continuation?.resume()
            return
        }
        let error = MQTTError.publishRefused(topic: outboxDrain.topics.text(publish.topic), reasonCode: reason, reason: reasonText(reason))
        if let continuation = publish.continuation {
            continuation.resume(throwing: error)
        } else {
            // Nobody waits for it: the owner of the client reports it.
            refusedPublishes.withLock { $0 = ($0.count + 1, error) }
        }
    }

    /// Text for an MQTT reason code (SUBACK, PUBACK, CONNACK).
    func reasonText(_ code: Int32) -> String {
        if configuration.protocolVersion == .v311 {
            return code == 0x80 ? "refused (MQTT 3.1.1 gives no reason)" : String(cString: mosquitto_connack_string(code))
        }
        return String(cString: mosquitto_reason_string(code))
    }
}
