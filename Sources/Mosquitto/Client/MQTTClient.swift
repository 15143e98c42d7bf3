import CMosquitto
import Foundation
import LiveTopics
import Logging
import Synchronization

/// An MQTT client over libmosquitto.
///
/// Connects on its own network thread, reconnects with backoff after a lost connection and
/// subscribes again to everything it was subscribed to. Messages arrive on ``messages``;
/// what happens to the connection is reported on ``events``. A client is used once: after
/// ``disconnect()`` both streams finish.
///
/// ```swift
/// let client = try MQTTClient(configuration: .init(host: "127.0.0.1"), logger: logger)
/// try await client.connect()
/// try await client.subscribe("ds1/+/+/+/+/+/occupancy", qos: .atLeastOnce)
/// for await message in client.messages { … }
/// ```
public final class MQTTClient: Sendable {
    public let configuration: MQTTConfiguration
    /// State changes, subscription results and errors, in order. Keeps the newest 1,000
    /// events when nobody reads.
    public let events: AsyncStream<MQTTEvent>
    /// Received messages, in order. Nothing is dropped: read it.
    public let messages: AsyncStream<MQTTMessage>
    /// The connections (one, or ``MQTTConfiguration/connections``): the first receives,
    /// subscribes and carries what names no connection.
    let cores: [ClientCore]
    var core: ClientCore { cores[0] }
    let loop: NetworkLoop
    /// With several connections: their state together.
    let group: ConnectionGroup?

    /// Creates a client; nothing is sent until ``connect()`` or ``start()``.
    /// - Parameters:
    ///   - onMessage: when given, every message goes to it, on the network thread,
    ///     instead of to ``messages`` (which then ends at once). See ``MessageHandler``.
    ///   - onReadEnd: called after every read pass; see ``ReadEndHandler``.
    ///   - onAcknowledged: called for every acknowledgement of a QoS 1 or 2 publication;
    ///     see ``AcknowledgementHandler``.
    /// - Throws: ``MQTTError/invalidConfiguration(_:)`` for settings that cannot work,
    ///   ``MQTTError/library(function:code:reason:)`` if libmosquitto refuses them.
    public init(
        configuration: MQTTConfiguration, logger: Logger, onMessage: MessageHandler? = nil, onReadEnd: ReadEndHandler? = nil,
        onAcknowledged: AcknowledgementHandler? = nil
    ) throws(MQTTError) {
        if !configuration.cleanStart && (configuration.clientID ?? "").isEmpty {
            throw .invalidConfiguration("a persistent session (clean start off) needs a fixed client id")
        }
        guard (1...65_535).contains(configuration.port) else {
            throw .invalidConfiguration("port \(configuration.port) is not between 1 and 65535")
        }
        try configuration.tls?.validate()
        self.configuration = configuration
        let (events, eventContinuation) = AsyncStream.makeStream(
            of: MQTTEvent.self, bufferingPolicy: .bufferingNewest(1000))
        let (messages, messageContinuation) = AsyncStream.makeStream(of: MQTTMessage.self)
        self.events = events
        self.messages = messages
        var logger = logger
        logger[metadataKey: "mqtt.broker"] = "\(configuration.address)"
        let v5 = configuration.protocolVersion == .v5
        let count = max(1, configuration.connections)
        let signals = NetworkSignals()
        group = count > 1 ? ConnectionGroup(count: count, events: eventContinuation) : nil
        var cores: [ClientCore] = []
        for index in 0..<count {
            let handle = try Handle(
                clientID: configuration.clientID(ofConnection: index), cleanStart: configuration.cleanStart,
                sessionExpirySeconds: !configuration.cleanStart && v5
                    ? UInt32(clamping: configuration.sessionExpiry.components.seconds) : nil,
                maximumPacketSize: v5 ? configuration.maximumPacketSize : nil,
                buffered: configuration.buffersSocket)
            var memberLogger = logger
            if index > 0 { memberLogger[metadataKey: "mqtt.connection"] = "\(index + 1)" }
            let (_, noMessages) = AsyncStream.makeStream(of: MQTTMessage.self)
            // Only the first receives; the others carry publications and their acknowledgements.
            let member = ClientCore(
                handle: handle, configuration: configuration, logger: memberLogger, events: eventContinuation,
                messages: index == 0 ? messageContinuation : noMessages, handler: index == 0 ? onMessage : nil,
                readEnd: index == 0 ? onReadEnd : nil, acknowledged: onAcknowledged, signals: signals, group: group, index: index)
            if index > 0 { noMessages.finish() }
            cores.append(member)
        }
        self.cores = cores
        loop = NetworkLoop(members: cores, signals: signals)
        // ``connect()`` returns once every connection is up.
        // Unowned, not strong: the connections hold the group. Not weak either: a weak
        // reference gives the object a side table, and then every retain and release of
        // the first connection (a pair a publication) takes the slow path. Only a running
        // connection calls this, and the loop that runs them holds them all.
        group?.onConnected { [unowned first = cores[0]] in
            first.state.withLock { state -> ClientCore.Waiter? in
                defer { state.firstConnect = nil }
                return state.firstConnect
            }?.resume()
        }
        if onMessage != nil { messageContinuation.finish() }
        for member in cores { try member.configure() }
    }

    deinit {
        stopAll()
    }

    /// Asks every connection to disconnect and the network thread to end; does not wait.
    private func stopAll() {
        var launched = false
        for member in cores where member.requestStop() { launched = true }
        loop.signals.stop()
        if !launched { for member in cores { member.finish() } }
    }

    /// The current connection state (of all the connections together, when there are several).
    public var state: MQTTConnectionState { group?.state ?? core.state.withLock { $0.connection } }

    /// How many connections the client publishes over (``MQTTConfiguration/connections``).
    public var connectionCount: Int { cores.count }

    /// Whether the current (or last) connection's socket calls go through the buffers
    /// (``MQTTSocketBuffering``); `nil` before the first connection.
    public var socketBuffered: Bool? {
        switch core.socketMode.load(ordering: .relaxed) {
        case 0: nil
        case let mode: mode == 2
        }
    }

    /// How many of the client's connections have their socket calls going through the
    /// buffers now (of ``connectionCount``).
    public var bufferedConnections: Int { cores.filter(\.buffered).count }

    /// What the broker said when the current (or last) connection was accepted: set before
    /// the `.state(.connected)` event is reported.
    /// With several connections: the session is present when all of them found theirs, and
    /// the window is each one's (the smallest).
    public var session: MQTTSession {
        guard cores.count > 1 else { return core.state.withLock { $0.session } }
        let each = cores.map { member in member.state.withLock { $0.session } }
        return MQTTSession(present: each.allSatisfy(\.present), sendWindow: each.map(\.sendWindow).min() ?? 1)
    }

    /// QoS 1 and 2 publications handed over and not yet acknowledged by the broker. A
    /// sender that keeps it below ``MQTTSession/sendWindow`` never makes libmosquitto queue
    /// a message behind its window (a queue it walks on every acknowledgement).
    public var inFlight: Int { cores.reduce(0) { $0 + $1.inFlight.load(ordering: .relaxed) } }

    /// ``inFlight`` of one connection.
    public func inFlight(connection: Int) -> Int { cores[connection].inFlight.load(ordering: .relaxed) }

    /// QoS 1 and 2 publications handed over on one connection since the client was made,
    /// and how many of them the broker acknowledged (both only grow: what libmosquitto
    /// holds across a reconnection it sends again, and its acknowledgement still counts).
    public func handedOver(connection: Int) -> (sent: Int, acknowledged: Int) {
        let member = cores[connection]
        return (member.sentCount.load(ordering: .relaxed), member.acknowledgedCount.load(ordering: .relaxed))
    }

    /// How many times the broker has accepted one of the client's connections (the first
    /// connection of each, and every reconnection). Counted before anything the accepted
    /// connection brings is read: a publication acknowledged while the count is the one it
    /// was handed over under went out and came back on one connection, to a broker that
    /// has not been restarted in between (a restart closes every connection). libmosquitto
    /// sends a QoS 1 publication again after a reconnection, and its acknowledgement then
    /// comes from a broker that may have lost what it acknowledged before.
    public var acceptedConnections: Int { cores.reduce(0) { $0 + $1.acceptedCount.load(ordering: .acquiring) } }

    /// Messages handed over with ``send(_:payload:qos:retain:)`` that the broker refused
    /// (not sent again), and the last refusal.
    public var refusedPublishes: (count: Int, last: MQTTError?) {
        summed { member in member.refusedPublishes.withLock { $0 } }
    }

    /// Messages handed over with ``send(_:payload:qos:retain:origin:connection:)`` that
    /// libmosquitto refused (too large for the broker's maximum packet size, an invalid
    /// topic): dropped, never sent. The last one's topic and the library's error.
    public var refusedSends: (count: Int, last: String?) {
        summed { member in member.libraryRefusals.withLock { $0 } }
    }

    /// A count kept by each connection, summed, with the last item of the last connection
    /// that has one.
    private func summed<Last>(_ read: (ClientCore) -> (count: Int, last: Last?)) -> (count: Int, last: Last?) {
        cores.map(read).reduce((0, nil)) { ($0.count + $1.count, $1.last ?? $0.last) }
    }

    /// Connects and waits until the broker has accepted the connection.
    ///
    /// If this first attempt fails, the client closes and the error says why; once it has
    /// succeeded, a lost connection is retried with backoff.
    /// - Throws: ``MQTTError/connectFailed(address:cause:)``.
    public func connect() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let started = core.state.withLock { state -> Bool in
                guard !state.started else { return false }
                state.started = true
                state.failFast = true
                state.firstConnect = continuation
                return true
            }
            guard started else {
                continuation.resume(throwing: MQTTError.invalidConfiguration("connect() or start() was already called"))
                return
            }
            loop.launch()
        }
    }

    /// Starts connecting in the background and keeps trying until it succeeds (a daemon's
    /// way); watch ``events`` for `.state(.connected)`.
    public func start() {
        let start = core.state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            return true
        }
        if start { loop.launch() }
    }

    /// Subscribes to a filter and waits for the broker's answer. The subscription is sent
    /// again after every reconnection. When not connected yet, it goes out on connection.
    /// - Returns: the QoS the broker granted.
    /// - Throws: ``MQTTError/subscriptionRefused(filter:reasonCode:reason:)`` when the broker
    ///   refuses it (it is then forgotten, not retried), ``MQTTError/disconnected`` when the
    ///   client closes first.
    @discardableResult
    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) async throws -> MQTTQoS {
        try await withCheckedThrowingContinuation { continuation in
            core.subscribe(filter, qos: qos, waiter: continuation)
        }
    }

    /// Removes a subscription and waits for the broker's acknowledgement (when connected).
    /// - Throws: ``MQTTError`` when the library refuses the call.
    public func unsubscribe(_ filter: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            core.unsubscribe(filter, waiter: continuation)
        }
    }

    /// Publishes a message and waits until it is done: written (QoS 0), acknowledged
    /// (QoS 1) or completed (QoS 2).
    /// - Throws: ``MQTTError/library(function:code:reason:)`` (not connected, invalid topic,
    ///   payload too large), ``MQTTError/publishRefused(topic:reasonCode:reason:)`` when an
    ///   MQTT 5 broker refuses it.
    ///
    /// `connection`: which of the client's connections carries it (see
    /// ``MQTTConfiguration/connections``).
    public func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false, connection: Int = 0
    ) async throws {
        // A cancelled caller stops waiting; the publication itself goes on (it is handed over).
        let awaiter = Mutex<ClientCore.PublishAwaiter?>(nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let waiter = ClientCore.PublishAwaiter(continuation)
                awaiter.withLock { $0 = waiter }
                if Task.isCancelled { waiter.resume(throwing: CancellationError()) }
                try? cores[connection].publish(topic, payload: payload, qos: qos, retain: retain, waiter: waiter)
            }
        } onCancel: {
            awaiter.withLock { $0 }?.resume(throwing: CancellationError())
        }
    }

    /// Hands a message over without waiting for it to be sent or acknowledged: for
    /// publishing many messages quickly. The network thread gives it to libmosquitto in its
    /// next pass, after everything handed over before it on the same connection. Once
    /// handed over, a QoS 1 or 2 message is sent again after a lost connection; one the
    /// library refuses (an invalid topic, a payload too large for the broker) is dropped
    /// and counted in ``refusedSends``.
    /// - Throws: ``MQTTError/disconnected`` while not connected (the caller keeps what it
    ///   still needs to send): the only error it throws.
    ///
    /// `origin` comes back with the message's acknowledgement (see ``AcknowledgementHandler``);
    /// `connection`: which of the client's connections carries it (see
    /// ``MQTTConfiguration/connections``).
    public func send(
        _ topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        origin: MonotonicInstant? = nil, connection: Int = 0
    ) throws(MQTTError) {
        try cores[connection].publish(topic, payload: payload, qos: qos, retain: retain, waiter: nil, origin: origin)
    }

    /// ``send(_:payload:qos:retain:origin:connection:)`` of bytes the caller lends: they are
    /// copied before this returns, so a caller can build each payload in one reused buffer.
    ///
    /// `connection`: which of the client's connections carries it (see
    /// ``MQTTConfiguration/connections``); publications of one topic keep their order only
    /// on one connection.
    public func send(
        _ topic: String, bytes payload: UnsafeRawBufferPointer, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        origin: MonotonicInstant? = nil, connection: Int = 0
    ) throws(MQTTError) {
        try cores[connection].handOver(topic, then: "", payload: payload, qos: qos, retain: retain, waiter: nil, origin: origin)
    }

    /// ``send(_:bytes:qos:retain:origin:connection:)`` to the topic `prefix` followed by
    /// `rest` (`"site/style/"` and a location's path), which the caller holds apart: the
    /// name is put together where the message waits for the network thread, and no string
    /// is made of it for each publication.
    public func send(
        _ prefix: String, then rest: String, bytes payload: UnsafeRawBufferPointer, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        origin: MonotonicInstant? = nil, connection: Int = 0
    ) throws(MQTTError) {
        try cores[connection].handOver(prefix, then: rest, payload: payload, qos: qos, retain: retain, waiter: nil, origin: origin)
    }

    /// Runs `body`, whose ``send(_:payload:qos:retain:)`` calls wake the network thread once,
    /// when it ends, rather than at the first of them: the batch then leaves in one write
    /// pass. Other threads' sends meanwhile wait for the end too.
    public func withBatchedSends<Result>(_ body: () throws -> Result) rethrows -> Result {
        loop.signals.batchDepth.add(1, ordering: .relaxed)
        defer {
            loop.signals.batchDepth.subtract(1, ordering: .relaxed)
            loop.signals.wakeNetworkLoop()
        }
        return try body()
    }

    /// Publishes text; see ``publish(_:payload:qos:retain:)``.
    public func publish(_ topic: String, text: String, qos: MQTTQoS = .atMostOnce, retain: Bool = false)
        async throws
    {
        try await publish(topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// Disconnects cleanly (the broker does not publish the will), stops reconnecting and
    /// waits for the network thread to end. Pending operations fail with
    /// ``MQTTError/disconnected``; ``messages`` and ``events`` finish.
    public func disconnect() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Every connection ends with the one thread: waiting for the first is enough.
            if core.waitForEnd(continuation) { stopAll() }
        }
    }
}
