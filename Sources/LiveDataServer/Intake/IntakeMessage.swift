import Dispatch
import LiveTopics
import Mosquitto
import Synchronization

/// One received update on its way from the network thread to the pipeline.
///
/// The network thread copies a read pass's topics and payloads one after another into one
/// buffer (``IntakeBytes``), and each message of the pass points into it: one allocation a
/// pass, made and freed as a whole, rather than a `String` and an array per message made on
/// the network thread and freed on the pipeline's (memory freed by another thread than the
/// one that took it is costly for the allocator). Messages made one at a time (the
/// convergence's reader, tests) own their topic and payload.
public struct IntakeMessage: Sendable {
    private enum Storage: Sendable {
        /// `topicCount` bytes of topic at `start` in the pass's bytes, then the payload.
        case pass(IntakeBytes, start: Int, topicCount: Int, payloadCount: Int)
        case owned(topic: String, payload: [UInt8])
    }

    private var storage: Storage
    public var receivedAt: LiveTimestamp
    /// Sent by the broker from its retained store.
    public var retain: Bool
    /// The journal position just after it (0 when nothing is journaled).
    public var journalEnd: UInt64
    /// When the network thread had it: the start of the processing-time histogram.
    public var arrived: MonotonicInstant

    public init(
        topic: String, payload: [UInt8], receivedAt: LiveTimestamp = .now, retain: Bool = false, journalEnd: UInt64 = 0,
        arrived: MonotonicInstant = .now
    ) {
        storage = .owned(topic: topic, payload: payload)
        self.receivedAt = receivedAt
        self.retain = retain
        self.journalEnd = journalEnd
        self.arrived = arrived
    }

    /// A copy of what the network thread holds.
    init(_ message: MQTTIncomingMessage, receivedAt: LiveTimestamp = .now, journalEnd: UInt64 = 0, arrived: MonotonicInstant = .now) {
        self.init(
            topic: String(decoding: message.topic, as: UTF8.self), payload: Array(message.payload), receivedAt: receivedAt,
            retain: message.retain, journalEnd: journalEnd, arrived: arrived)
    }

    /// A message of a read pass whose bytes are `bytes`' from `start` on.
    init(
        _ bytes: IntakeBytes, start: Int, topicCount: Int, payloadCount: Int, receivedAt: LiveTimestamp, retain: Bool,
        journalEnd: UInt64, arrived: MonotonicInstant
    ) {
        storage = .pass(bytes, start: start, topicCount: topicCount, payloadCount: payloadCount)
        self.receivedAt = receivedAt
        self.retain = retain
        self.journalEnd = journalEnd
        self.arrived = arrived
    }

    /// The topic (made as a `String` when the message points into a pass's bytes).
    public var topic: String {
        switch storage {
        case .owned(let topic, _): topic
        case .pass: withTopic { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// The payload (copied when the message points into a pass's bytes).
    public var payload: [UInt8] {
        switch storage {
        case .owned(_, let payload): payload
        case .pass: withPayload { Array($0) }
        }
    }

    /// Lends the topic's bytes.
    public func withTopic<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch storage {
        case .owned(let topic, _):
            var topic = topic
            return try topic.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .pass(let bytes, let start, let topicCount, _):
            return try bytes.bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<start + topicCount])) }
        }
    }

    /// Lends the payload's bytes.
    public func withPayload<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch storage {
        case .owned(_, let payload): return try payload.withUnsafeBytes(body)
        case .pass(let bytes, let start, let topicCount, let payloadCount):
            let from = start + topicCount
            return try bytes.bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[from..<from + payloadCount])) }
        }
    }

    /// Bytes of topic and payload, as the queue's bound counts them.
    var size: Int {
        switch storage {
        case .owned(let topic, let payload): topic.utf8.count + payload.count
        case .pass(_, _, let topicCount, let payloadCount): topicCount + payloadCount
        }
    }
}

/// A read pass's topics and payloads, one after another (see ``IntakeMessage``).
public final class IntakeBytes: Sendable {
    let bytes: [UInt8]

    init(_ bytes: consuming [UInt8]) {
        self.bytes = bytes
    }
}
