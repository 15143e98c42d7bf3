import LiveState
import Mosquitto

/// Hands publications to the MQTT client, from the pipeline's one place: keeps, per topic,
/// the latest one the client refused (not connected, or refused for now) to send again on
/// reconnection, counts what went out, and remembers whose legend is published.
struct Publisher {
    let client: MQTTClient
    let qos: MQTTQoS
    /// Derived changes and summaries handed to the client.
    private(set) var changes = 0
    private(set) var summaries = 0
    /// The datasets whose legend was published since the last (re)connection or reload.
    private var legends = Set<String>()
    /// The latest refused publication per topic.
    private var unsent: [String: Publication] = [:]

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
        do {
            try client.send(publication.topic, payload: publication.payload, qos: qos, retain: publication.retain)
        } catch {
            unsent[publication.topic] = publication
        }
    }

    /// Whether `dataset`'s legend still needs publishing; marks it published.
    mutating func needsLegend(_ dataset: String) -> Bool { legends.insert(dataset).inserted }

    /// Every legend is to be published again (after a reconnection or a reload).
    mutating func forgetLegends() { legends.removeAll() }

    /// Sends again what the client refused.
    mutating func resendUnsent() {
        let waiting = unsent
        unsent.removeAll()
        for publication in waiting.values { send(publication) }
    }
}
