import Foundation
import LiveDataConfiguration
import LiveStatePersistence
import LiveTopics
import Logging
import Mosquitto
import Synchronization

/// Where received updates enter the daemon, on the MQTT client's network thread. Each
/// update of a read pass is staged in the intake journal and kept; at the pass's end the
/// staged records are written in one `write(2)` and the pass's updates handed to the
/// pipeline through the bounded ``IntakeQueue`` in one go, all before the client writes
/// any of their QoS 1 acknowledgements (see ``ReadEndHandler``). So an update the broker
/// counts as delivered is in the journal, whatever happens to the process next.
///
/// When the journal cannot be written (a full or read-only disk) the network thread keeps
/// the update and tries again every half second: nothing is acknowledged meanwhile, the
/// broker keeps the rest, readiness says why, and writing resumes when space returns.
public final class Intake: Sendable {
    public struct Statistics: Sendable, Equatable {
        public var queueDepth = 0
        public var queuePeak = 0
        public var blocked: Duration = .zero
        public var journalBytes: UInt64 = 0
        public var journalFailures = 0
        /// Payloads over `limits.payloadSize`, dropped here unread (see ``receive(_:)``).
        public var oversize = 0
    }

    /// `nil` with an in-memory store: nothing would survive a restart anyway.
    public let journal: IntakeJournal?
    let queue: IntakeQueue
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let failures = Atomic<Int>(0)
    private let fault = Mutex<String?>(nil)
    private let faultLog = Mutex(RateLimitedLog(interval: .seconds(10)))
    private let payloadLimit: Int
    private let oversize = Atomic<Int>(0)
    private let oversizeLog = Mutex(RateLimitedLog(interval: .seconds(10)))
    /// The read pass's updates, until its end (the network thread's alone).
    private let batch: Mutex<ReadPass>

    /// Opens the journal beside the state file (unless the store is in memory).
    /// - Throws: ``IntakeJournal/Failure`` when its folder cannot be opened.
    public init(config: LiveDataConfig, logger: Logger) throws {
        journal =
            config.store.isInMemory
            ? nil : try IntakeJournal(directory: config.store.journalPath, syncInterval: config.store.journalSync)
        queue = IntakeQueue(capacity: config.limits.queue, byteCapacity: config.limits.queueBytes)
        batch = Mutex(ReadPass(keptCapacity: max(config.limits.queue, 1024)))
        payloadLimit = config.limits.payload.size
        self.logger = logger
    }

    /// A client that hands what it receives to this intake: every message to ``receive(_:)``,
    /// the end of every read pass to ``finishBatch()``; and the acknowledgements of what the
    /// daemon publishes to `window`.
    public func makeClient(
        configuration: MQTTConfiguration, logger: Logger, window: OutputWindow? = nil
    ) throws(MQTTError) -> MQTTClient {
        var acknowledged: AcknowledgementHandler?
        if let window { acknowledged = { window.acknowledged($0) } }
        return try MQTTClient(
            configuration: configuration, logger: logger, onMessage: { [self] message in receive(message) },
            onReadEnd: { [self] in finishBatch() }, onAcknowledged: acknowledged)
    }

    /// Stages one update in the journal and keeps it for ``finishBatch()``.
    func receive(_ message: MQTTIncomingMessage) -> MQTTReceipt {
        // An oversize payload (an MQTT 3.1.1 session, or a broker that ignores the Maximum
        // Packet Size asked for) is refused before anything copies or journals it.
        if message.payload.count > payloadLimit {
            refuseOversize(message)
            return .taken
        }
        batch.withLock { pass in
            let (arrived, receivedAt) = pass.arrival()
            let end =
                journal?.stage(topic: message.topic, payload: message.payload, receivedAt: receivedAt, retain: message.retain)
                ?? 0
            pass.add(message, receivedAt: receivedAt, journalEnd: end, arrived: arrived)
        }
        return .taken
    }

    /// The end of a read pass: writes the staged journal records, then hands the pass's
    /// updates to the pipeline (waiting while the queue is full).
    func finishBatch() -> MQTTReceipt {
        batch.withLock { pass -> MQTTReceipt in
            guard !pass.isEmpty else { return .taken }
            if let journal {
                var failed = false
                while true {
                    do {
                        try journal.commit()
                        break
                    } catch {
                        failed = true
                        noteFault("cannot write the intake journal: \(error)")
                        // Shutting down: leave the updates unacknowledged for the next session.
                        if stopping.load(ordering: .acquiring) {
                            journal.discardStaged()
                            pass.discard()
                            return .refused
                        }
                        usleep(500_000)
                    }
                }
                if failed { clearFault(after: "the intake journal is writable again") }
            }
            // A closed queue (the daemon is stopping) takes nothing: leave them unacknowledged.
            let taken = pass.hand(to: queue)
            return taken ? .taken : .refused
        }
    }

    /// Stops waiting for a failing disk (the update stays unacknowledged); called on shutdown.
    func stop() { stopping.store(true, ordering: .releasing) }

    /// Why updates cannot be kept right now, if they cannot.
    public var storageFault: String? { fault.withLock { $0 } }

    public var statistics: Statistics {
        let queued = queue.statistics
        return Statistics(
            queueDepth: queued.depth, queuePeak: queued.peak, blocked: queued.blocked,
            journalBytes: journal?.statistics.bytes ?? 0, journalFailures: failures.load(ordering: .relaxed),
            oversize: oversize.load(ordering: .relaxed))
    }

    private func refuseOversize(_ message: MQTTIncomingMessage) {
        oversize.add(1, ordering: .relaxed)
        guard let suppressed = oversizeLog.withLock({ $0.admit() }) else { return }
        let more = suppressed > 0 ? " (and \(suppressed) more since the last report)" : ""
        let topic = String(decoding: message.topic.prefix(256), as: UTF8.self)
        logger.warning(
            "dropped an update: payload is \(message.payload.count) bytes; the limit is \(payloadLimit) (limits.payloadSize)\(more)",
            metadata: ["mqtt.topic": "\(topic)", "update.rejected": "oversize"])
    }

    private func noteFault(_ text: String) {
        failures.add(1, ordering: .relaxed)
        fault.withLock { $0 = text }
        if let suppressed = faultLog.withLock({ $0.admit() }) {
            let more = suppressed > 0 ? " (\(suppressed) more attempts since the last report)" : ""
            logger.error("\(text); holding the update and trying again\(more)")
        }
    }

    private func clearFault(after text: String) {
        fault.withLock { $0 = nil }
        logger.notice("\(text)")
    }
}
