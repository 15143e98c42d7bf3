import Mosquitto

/// The daemon's two connections (receiving and output) as their event streams report them,
/// and when what follows a (re)connection is due: once both are up, once per time they
/// both came up. Each stream reports its own connection's changes in order, but the two
/// streams are read by different tasks, so by the time one event is read the other
/// connection may be up already; counting events, not looking at the connections' current
/// states, makes two connections that come up together one round, not two.
///
/// With one connection for both (``BrokerSettings/outputConnection`` off), its events
/// stand for both.
struct ConnectionPair {
    enum Connection { case receiving, output }

    enum Action: Equatable {
        case none
        /// Both are up, newly: publish `online`, check what the broker holds.
        case connected
    }

    private let shared: Bool
    private var receiving = false
    private var output = false
    /// `.connected` was returned since both last came up.
    private var handled = false

    init(shared: Bool) {
        self.shared = shared
    }

    /// Both are up, and what follows their coming up was returned (``Action/connected``):
    /// the events of the last (re)connection have been handled, not only received.
    var isUp: Bool { receiving && output && handled }

    mutating func changed(_ connection: Connection, to state: MQTTConnectionState) -> Action {
        let up = state == .connected
        switch connection {
        case .receiving:
            receiving = up
            if shared { output = up }
        case .output:
            output = up
        }
        guard up else {
            handled = false
            return .none
        }
        guard receiving && output && !handled else { return .none }
        handled = true
        return .connected
    }
}
