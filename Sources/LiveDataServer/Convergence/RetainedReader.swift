import Logging
import Mosquitto

/// Reads back what the broker holds retained under the daemon's prefix (styles, summaries,
/// legends) over a connection of its own (a clean session, so nothing of it lingers), in
/// batches through a bounded ``IntakeQueue``. The end is found with a marker: once the
/// reader is subscribed, the daemon's own client publishes one message to ``marker``
/// after everything it published before; the broker delivers a subscriber's messages in
/// order, so the marker comes after the last retained message and after every earlier
/// publication of the daemon. A broker that reorders is covered by `quietTimeout`.
final class RetainedReader: Sendable {
    let client: MQTTClient
    let queue: IntakeQueue
    let marker: String
    let filters: [String]

    init(configuration: MQTTConfiguration, prefix: String, logger: Logger) throws(MQTTError) {
        var configuration = configuration
        let id = (configuration.clientID ?? "livedata") + "-converge"
        configuration.clientID = id
        configuration.cleanStart = true
        configuration.will = nil
        configuration.maximumPacketSize = nil
        let marker = "\(prefix)/converge/\(id)"
        let queue = IntakeQueue(capacity: 10_000, byteCapacity: 32 << 20)
        self.queue = queue
        self.marker = marker
        filters = ["\(prefix)/style/#", "\(prefix)/summary/#", "\(prefix)/legend/#", marker]
        client = try MQTTClient(configuration: configuration, logger: logger) { message in
            queue.push(IntakeMessage(message))
            return .taken
        }
    }

    /// Connects and subscribes; then publish the marker.
    func start() async throws {
        try await client.connect()
        for filter in filters { try await client.subscribe(filter, qos: .atLeastOnce) }
    }

    /// The next batch of retained messages; `nil` after the marker, or when nothing has come
    /// for `quietTimeout`.
    func next(quietTimeout: Duration = .seconds(10)) async -> [IntakeMessage]? {
        let queue = queue
        let timeout = Task {
            try await Task.sleep(for: quietTimeout)
            queue.close()
        }
        defer { timeout.cancel() }
        guard var batch = await queue.next() else { return nil }
        if let end = batch.firstIndex(where: { $0.topic == marker && !$0.retain }) {
            batch.removeSubrange(end...)
            queue.close()
            // What is still queued came after the marker: not retained messages of this read.
            while await queue.next() != nil {}
        }
        return batch
    }

    func stop() async {
        queue.close()
        await client.disconnect()
    }
}
