import LiveTopics

/// The state of the connection to the broker.
public enum MQTTConnectionState: String, Sendable, Equatable {
    /// Not connected and not trying to be (before start, after disconnect).
    case closed
    /// Trying to connect, or waiting to try again.
    case connecting
    /// Connected; the broker accepted the session.
    case connected
    /// Closing at our request.
    case disconnecting
}

/// What happens to the client, in order.
public enum MQTTEvent: Sendable, Equatable, CustomStringConvertible {
    /// The connection state changed.
    case state(MQTTConnectionState)
    /// The broker accepted a subscription with this QoS (again after each reconnect).
    case subscribed(filter: String, qos: MQTTQoS)
    /// A subscription was removed.
    case unsubscribed(filter: String)
    /// The broker refused a subscription; it will not be retried.
    case subscriptionFailed(filter: String, error: MQTTError)
    /// Something went wrong that the client handles by itself (a failed attempt, a lost connection).
    case error(MQTTError)

    public var description: String {
        switch self {
        case .state(let state): "state \(state.rawValue)"
        case .subscribed(let filter, let qos): "subscribed to \"\(filter)\" with QoS \(qos.rawValue)"
        case .unsubscribed(let filter): "unsubscribed from \"\(filter)\""
        case .subscriptionFailed(_, let error): "\(error)"
        case .error(let error): "\(error)"
        }
    }
}

/// A message received from the broker.
public struct MQTTMessage: Sendable, Equatable {
    public static func == (a: MQTTMessage, b: MQTTMessage) -> Bool {
        a.topic == b.topic && a.payload == b.payload && a.qos == b.qos && a.retain == b.retain
    }

    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    /// Sent by the broker from its retained store, not live.
    public var retain: Bool
    /// When the network thread received it (for end-to-end latency).
    public var receivedAt: ContinuousClock.Instant

    public init(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, receivedAt: ContinuousClock.Instant = .now
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.receivedAt = receivedAt
    }

    /// The payload as UTF-8 text (invalid sequences replaced).
    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}

/// A received message as the network thread holds it: the bytes are libmosquitto's and
/// valid only during the ``MessageHandler`` call; copy what you keep.
public struct MQTTIncomingMessage {
    public var topic: UnsafeRawBufferPointer
    public var payload: UnsafeRawBufferPointer
    public var qos: MQTTQoS
    /// Sent by the broker from its retained store, not live.
    public var retain: Bool
}

/// What a ``MessageHandler`` did with a message.
public enum MQTTReceipt: Sendable {
    /// It has the message: libmosquitto acknowledges it (QoS 1) once the handler returns.
    case taken
    /// It could not keep the message: the client cuts the connection before the
    /// acknowledgement goes out, so the broker delivers the message again on the next
    /// connection (a persistent session).
    case refused
}

/// Called on the client's network thread for every message, before libmosquitto writes the
/// QoS 1 acknowledgement (libmosquitto 2.0 queues the PUBACK before the message callback
/// and, with `mosquitto_threaded_set`, writes queued packets only after the callback has
/// returned, in the loop's write phase: `lib/handle_publish.c`, `lib/packet_mosq.c`
/// `packet__queue`). While it runs nothing else is read from the socket, so a handler that
/// waits for room pushes back on the broker through TCP.
public typealias MessageHandler = @Sendable (MQTTIncomingMessage) -> MQTTReceipt

/// Called on the client's network thread after each read pass: after the ``MessageHandler``
/// calls for every message the pass read, before any of their acknowledgements is written.
/// A handler that keeps messages in batches finishes its batch here (one journal write,
/// one hand-off per pass). `.refused` cuts the connection: none of the pass's messages is
/// acknowledged, and the broker delivers them again on the next connection.
public typealias ReadEndHandler = @Sendable () -> MQTTReceipt

/// What the broker's CONNACK said about a connection.
public struct MQTTSession: Sendable, Equatable {
    /// The broker resumed the session it kept for this client id (its subscriptions and
    /// queued messages), rather than starting a new one.
    public var present = false
    /// How many QoS 1 and 2 publications may await the broker's acknowledgement at once: the
    /// configured send maximum, lowered to the broker's Receive Maximum (MQTT 5).
    public var sendWindow = 20

    public init(present: Bool = false, sendWindow: Int = 20) {
        self.present = present
        self.sendWindow = sendWindow
    }
}

/// The broker acknowledged one of our QoS 1 or 2 publications (or refused it).
public struct MQTTAcknowledgement: Sendable {
    /// What the sender passed with it (``MQTTClient/send(_:payload:qos:retain:origin:connection:)``).
    public var origin: MonotonicInstant?
    /// When the network thread read it: the start of the pass that read it (one reading of
    /// the clock a pass, not one an acknowledgement).
    public var acknowledgedAt: MonotonicInstant
    /// Publications still awaiting acknowledgement after this one.
    public var inFlight: Int
    /// The broker refused it (an MQTT 5 reason code of 0x80 or more).
    public var refused: Bool
}

/// Called on the client's network thread for every acknowledgement of a QoS 1 or 2
/// publication: for latency figures and to learn that the in-flight window has room again.
/// It must return quickly and never wait.
public typealias AcknowledgementHandler = @Sendable (MQTTAcknowledgement) -> Void
