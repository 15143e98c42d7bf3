import LiveState
import Mosquitto

/// Hands publications to the MQTT client, from the pipeline's one place: keeps, per topic,
/// the latest one the client could not take (not connected, or refused for now) to send
/// again on reconnection, counts what went out, and remembers whose legend is published.
/// One the library refuses (too large for the broker's Maximum Packet Size, an invalid
/// topic) is tried ``maximumAttempts`` times in all, then dropped and counted: it would be
/// refused for ever.
struct Publisher {
    let client: MQTTClient
    let qos: MQTTQoS
    /// Derived changes and summaries handed to the client.
    private(set) var changes = 0
    private(set) var summaries = 0
    /// The datasets whose legend was published since the last (re)connection or reload.
    private var legends = Set<String>()
    /// The latest publication per topic that the client did not take, and how often the
    /// library refused it (not being connected does not count).
    private var unsent: [String: (publication: Publication, refusals: Int)] = [:]
    /// Publications dropped after ``maximumAttempts`` refusals, and the last reason.
    private(set) var dropped = 0
    private(set) var lastDropped: String?
    static let maximumAttempts = 3

    init(client: MQTTClient, qos: MQTTQoS) {
        self.client = client
        self.qos = qos
    }

    mutating func send(change: Publication) {
        send(change)
        changes += 1
    }

    mutating func send(summary: Publication) {
        send(summary)
        summaries += 1
    }

    mutating func send(_ publication: Publication) {
        send(publication, refusals: 0)
    }

    private mutating func send(_ publication: Publication, refusals: Int) {
        do {
            try client.send(publication.topic, payload: publication.payload, qos: qos, retain: publication.retain)
        } catch {
            if case .disconnected = error {
                unsent[publication.topic] = (publication, refusals)
            } else if refusals + 1 < Self.maximumAttempts {
                unsent[publication.topic] = (publication, refusals + 1)
            } else {
                dropped += 1
                lastDropped = "\(publication.topic): \(error)"
            }
        }
    }

    /// Whether `dataset`'s legend still needs publishing; marks it published.
    mutating func needsLegend(_ dataset: String) -> Bool { legends.insert(dataset).inserted }

    /// Every legend is to be published again (after a reconnection or a reload).
    mutating func forgetLegends() { legends.removeAll() }

    /// Sends again what the client did not take (after a reconnection).
    mutating func resendUnsent() {
        let waiting = unsent
        unsent.removeAll()
        for (publication, refusals) in waiting.values { send(publication, refusals: refusals) }
    }

    /// Tries again what the library refused (on the pipeline's tick): each one at most
    /// ``maximumAttempts`` times in all.
    mutating func retryRefused() {
        let refused = unsent.filter { $0.value.refusals > 0 }
        for (topic, (publication, refusals)) in refused {
            unsent[topic] = nil
            send(publication, refusals: refusals)
        }
    }
}
