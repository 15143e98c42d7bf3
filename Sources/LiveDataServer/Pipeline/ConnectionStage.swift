import Logging
import Mosquitto

/// The connection stage: the receiving connection's subscriptions (and the filters the
/// broker refused), what the connections' event streams said (``ConnectionPair``), and
/// whether the broker kept the daemon's session.
final class ConnectionStage {
    /// The connection that receives: subscriptions, the updates, and the session the
    /// broker keeps while the daemon is down.
    let client: MQTTClient
    private var pair: ConnectionPair
    /// Filters the broker refused (not retried; the others go on).
    private(set) var refused: [String] = []
    /// Restored, connected and subscribed.
    private(set) var isSubscribed = false
    /// The receiving connection has been connected before; reconnections that found the
    /// session gone (see ``noteSession(cleanStart:)``).
    private var connectedBefore = false
    private(set) var sessionsLost = 0
    private let logger: Logger

    init(client: MQTTClient, shared: Bool, logger: Logger) {
        self.client = client
        pair = ConnectionPair(shared: shared)
        self.logger = logger
    }

    /// Both connections are up and their reconnection handled.
    var isUp: Bool { pair.isUp }

    func markSubscribed() { isSubscribed = true }

    /// Subscribes `filter`. A filter the broker refuses is logged, kept in ``refused`` and
    /// not retried; the others still go on.
    /// - Throws: when the client cannot subscribe at all (it is shut down).
    nonisolated(nonsending) func subscribe(_ filter: String, qos: MQTTQoS) async throws {
        do {
            _ = try await client.subscribe(filter, qos: qos)
            refused.removeAll { $0 == filter }
        } catch MQTTError.subscriptionRefused(let filter, let code, let reason) {
            if !refused.contains(filter) { refused.append(filter) }
            logger.error(
                "the broker refused the subscription to \(filter): \(reason); the other subscriptions go on",
                metadata: ["mqtt.filter": "\(filter)", "mqtt.reason_code": "\(code)"])
        }
    }

    /// After a reload: subscribes the filters new in `new`, unsubscribes those gone.
    nonisolated(nonsending) func resubscribe(from old: Set<String>, to new: Set<String>, qos: MQTTQoS) async {
        for filter in new.subtracting(old).sorted() {
            do {
                try await subscribe(filter, qos: qos)
            } catch {
                logger.error("\(error)")
            }
        }
        for filter in old.subtracting(new).sorted() {
            refused.removeAll { $0 == filter }
            try? await client.unsubscribe(filter)
        }
    }

    /// A connection's state changed (from its event stream).
    /// - Returns: whether both are now up: what follows a (re)connection is due.
    func changed(_ connection: ConnectionPair.Connection, to state: MQTTConnectionState, cleanStart: Bool) -> Bool {
        if connection == .receiving, state == .connected { noteSession(cleanStart: cleanStart) }
        return pair.changed(connection, to: state) == .connected
    }

    /// A broker that did not keep the receiving connection's session after the first
    /// connection (a persistent one: `broker.cleanStart: false`) dropped whatever it had
    /// queued for the daemon: said loudly, since nothing else shows the loss (ejabberd
    /// closes a session whose queue passes its `max_queue`; a broker restarted without
    /// persistence forgets every session).
    private func noteSession(cleanStart: Bool) {
        defer { connectedBefore = true }
        guard connectedBefore, !cleanStart, !client.session.present else { return }
        sessionsLost += 1
        logger.warning(
            "the broker did not keep this daemon's session: updates it had queued for the daemon are lost (a broker limit on a client's queue, such as ejabberd's max_queue, or a broker that restarted without persistence)")
    }
}
