import Synchronization

/// How to reach and talk to one broker.
public struct MQTTConfiguration: Sendable {
    /// Broker host name or address. Default `127.0.0.1`.
    public var host: String
    /// Broker port. Default 1883 (8883 is usual with TLS).
    public var port: Int
    /// Client identifier; `nil` lets the library pick a random one (clean sessions only).
    public var clientID: String?
    /// MQTT 5 by default; 3.1.1 for older brokers.
    public var protocolVersion: MQTTProtocolVersion
    /// Start a new session on every connect. `false` keeps the broker-side session
    /// (subscriptions and queued QoS 1/2 messages) across disconnects; it needs a fixed `clientID`.
    public var cleanStart: Bool
    /// With `cleanStart == false` on MQTT 5: how long the broker keeps the session after a
    /// disconnect. Default: one day.
    public var sessionExpiry: Duration
    /// Interval of MQTT keepalive pings. Default 30 s.
    public var keepalive: Duration
    /// Username and password, if the broker needs them.
    public var credentials: MQTTCredentials?
    /// TLS settings; `nil` for plain TCP.
    public var tls: MQTTTLSConfiguration?
    /// A message the broker publishes for us if we vanish without disconnecting.
    public var will: MQTTWill?
    /// Delays between reconnection attempts.
    public var reconnect: MQTTBackoff
    /// Whether a connection lost after it worked is made again. Off, the client ends
    /// instead (its streams finish, its state is `.closed`): what it had handed to
    /// libmosquitto and the broker did not acknowledge is never sent, on no later
    /// connection. For a connection whose right to publish ends with it (a failover lease).
    /// Default on.
    public var reconnects = true
    /// When set, the client writes nothing once the deadline has passed: its network thread
    /// looks before every write, and past it cuts the connection instead (the broker then
    /// publishes the will). For a connection whose right to publish ends at a time (a
    /// failover lease): what a paused process had queued is not written when it resumes.
    public var writeDeadline: MQTTWriteDeadline?
    /// MQTT 5: the largest packet we accept, sent on CONNECT so that the broker drops
    /// larger messages instead of sending them. `nil`: no limit.
    public var maximumPacketSize: UInt32?
    /// While traffic keeps coming, the network thread starts a pass (read what arrived,
    /// write what is queued) at most this often, so that a pass carries many packets: one
    /// TCP segment out and a few system calls for a whole pass rather than for each packet.
    /// A message waits at most this long more. Zero: a pass for every wake-up. Default 1 ms.
    ///
    /// That is the interval where a longer one would hold traffic back: a window would
    /// fill halfway in a relaxed pass at the pace of the last one, or the traffic goes at
    /// the pace of the passes themselves (see `PassPace`). Otherwise passes are
    /// ``relaxedPassInterval`` apart.
    public var passInterval: Duration
    /// The interval between passes while traffic keeps coming and nothing holds it to
    /// ``passInterval``: longer passes carry more packets each, for fewer system calls and
    /// thread wake-ups per message, where the windows leave room for them (at a receive
    /// window of 1,000 and 5 ms, up to 100,000 messages a second before the window would
    /// fill halfway and the short interval takes over). A message waits at most this long
    /// more. Never shorter than ``passInterval``. Default 5 ms.
    public var relaxedPassInterval: Duration = .milliseconds(5)
    /// MQTT 5: how many of our QoS 1 and 2 messages may await the broker's acknowledgement
    /// at once (the broker's Receive Maximum may lower it), and how many of its messages
    /// may await ours. libmosquitto's default, 20, caps a client that acknowledges in
    /// passes at 20 messages a pass. Default 1,000 each.
    public var sendMaximum: Int
    public var receiveMaximum: Int
    /// Redirect libmosquitto's imports (see ``MQTTSocketBuffering``), which does four things:
    /// - serves its socket reads from a buffer filled by one system call and collects its
    ///   writes for one call per pass: a few system calls per pass instead of about five
    ///   per packet (this client's socket, plain TCP only: TLS keeps the library's calls);
    /// - leaves out its writes to this client's wake-up pair, which nobody reads;
    /// - gives it the coarse monotonic clock (process-wide, every libmosquitto client);
    /// - checks its locks instead of taking them (process-wide, every libmosquitto client,
    ///   buffered or not): every call into the library for a client must then be made on
    ///   that client's network thread, as this client's are, or the process stops with a
    ///   message naming the call and both threads.
    ///
    /// Default off (libmosquitto's own calls): the redirection reaches into libmosquitto's
    /// import table, which is no interface of the library; a library whose imports are not
    /// as expected keeps its own calls, with a notice in the log.
    public var bufferedSocket: Bool
    /// How many connections the client publishes over (default 1), each with a client id
    /// of its own: ``clientID``, then `{clientID}-2`, `{clientID}-3`… A caller names the
    /// connection of each publication (``MQTTClient/send(_:bytes:qos:retain:origin:connection:)``),
    /// so that the publications of one topic keep their order on one connection; the
    /// connections come up and go down together, and one network thread serves them all.
    ///
    /// For a client that publishes faster than one connection carries: a broker such as
    /// mosquitto reads one packet from each connection per turn of its loop, and each
    /// connection has a window of its own (its Receive Maximum). They subscribe to nothing
    /// but on the first.
    public var connections = 1

    public init(
        host: String = "127.0.0.1", port: Int = 1883, clientID: String? = nil,
        protocolVersion: MQTTProtocolVersion = .v5, cleanStart: Bool = true,
        sessionExpiry: Duration = .seconds(86_400), keepalive: Duration = .seconds(30),
        credentials: MQTTCredentials? = nil, tls: MQTTTLSConfiguration? = nil, will: MQTTWill? = nil,
        reconnect: MQTTBackoff = MQTTBackoff(), maximumPacketSize: UInt32? = nil,
        passInterval: Duration = .milliseconds(1), sendMaximum: Int = 1000, receiveMaximum: Int = 1000,
        bufferedSocket: Bool = false
    ) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.protocolVersion = protocolVersion
        self.cleanStart = cleanStart
        self.sessionExpiry = sessionExpiry
        self.keepalive = keepalive
        self.credentials = credentials
        self.tls = tls
        self.will = will
        self.reconnect = reconnect
        self.maximumPacketSize = maximumPacketSize
        self.passInterval = passInterval
        self.sendMaximum = sendMaximum
        self.receiveMaximum = receiveMaximum
        self.bufferedSocket = bufferedSocket
    }

    /// How many messages the broker may send before our acknowledgements: our Receive
    /// Maximum on MQTT 5; on 3.1.1 the broker's own setting, which it does not tell, taken
    /// as mosquitto's default (20).
    var readWindow: Int {
        protocolVersion == .v5 ? ClientCore.windowLimit(receiveMaximum) : 20
    }

    /// Whether to ask for buffered socket calls: ``bufferedSocket`` on a plain TCP connection.
    var buffersSocket: Bool { bufferedSocket && tls == nil }

    /// The client id of connection `index` (see ``connections``).
    func clientID(ofConnection index: Int) -> String? {
        guard index > 0, let clientID else { return clientID }
        return "\(clientID)-\(index + 1)"
    }

    /// `host:port`, as error messages name the broker.
    public var address: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// The protocol version spoken to the broker.
public enum MQTTProtocolVersion: String, Sendable, CaseIterable {
    case v5 = "mqtt5"
    case v311 = "mqtt311"
}

/// Quality of service of a subscription or a message.
public enum MQTTQoS: Int32, Sendable, Comparable, CaseIterable {
    case atMostOnce = 0
    case atLeastOnce = 1
    case exactlyOnce = 2

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A username and its password.
public struct MQTTCredentials: Sendable {
    public var username: String
    public var password: MQTTSecret?

    public init(username: String, password: MQTTSecret?) {
        self.username = username
        self.password = password
    }
}

/// A secret that never prints itself: `description` and string interpolation show `<redacted>`.
public struct MQTTSecret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself; read it only to hand it to the library.
    public let value: String

    public init(_ value: String) {
        self.value = value
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}

/// TLS settings. File paths are PEM files.
public struct MQTTTLSConfiguration: Sendable {
    /// CA certificate(s) that signed the broker's certificate; `nil` uses the system's.
    public var caFile: String?
    /// Client certificate, for brokers that require one.
    public var certFile: String?
    /// The client certificate's private key.
    public var keyFile: String?

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

/// The last-will message.
public struct MQTTWill: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// Exponential backoff between reconnection attempts: the delay starts at `initial`,
/// doubles after every failed attempt up to `maximum`, and resets once connected.
public struct MQTTBackoff: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration
    /// Fraction of each delay that is randomised, so that many clients do not reconnect in step.
    public var jitter: Double

    public init(initial: Duration = .milliseconds(500), maximum: Duration = .seconds(30), jitter: Double = 0.2) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }
}

/// A time after which a client may write nothing more (``MQTTConfiguration/writeDeadline``):
/// none until ``renew(until:)`` first sets it; later renewals only move it on.
public final class MQTTWriteDeadline: Sendable {
    private let origin = ContinuousClock.now
    /// Nanoseconds after `origin`; `Int64.max` while none is set.
    private let until = Atomic<Int64>(Int64.max)

    public init() {}

    /// Writes may go on until `instant` (or later, if a renewal already allows that).
    public func renew(until instant: ContinuousClock.Instant) {
        let value = Self.nanoseconds(instant - origin)
        var current = until.load(ordering: .acquiring)
        while current == Int64.max || value > current {
            let (exchanged, found) = until.compareExchange(expected: current, desired: value, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = found
        }
    }

    /// Whether the deadline is set and has passed.
    public var hasPassed: Bool {
        let limit = until.load(ordering: .acquiring)
        return limit != Int64.max && Self.nanoseconds(.now - origin) >= limit
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds &* 1_000_000_000 &+ duration.components.attoseconds / 1_000_000_000
    }
}
