import Mosquitto
import Testing

@testable import LiveDataServer

/// When what follows a (re)connection runs, from the two connections' events.
@Suite("Connection pair")
struct ConnectionPairTests {
    @Test("both up, in either order and however late their events are read: one round")
    func onceForBoth() {
        for first in [ConnectionPair.Connection.receiving, .output] {
            var pair = ConnectionPair(shared: false)
            let second: ConnectionPair.Connection = first == .receiving ? .output : .receiving
            #expect(pair.changed(first, to: .connecting) == .none)
            #expect(pair.changed(first, to: .connected) == .none)
            #expect(pair.changed(second, to: .connected) == .connected)
            // A late or repeated event of either changes nothing.
            #expect(pair.changed(first, to: .connected) == .none)
            #expect(pair.changed(second, to: .connected) == .none)
        }
    }

    @Test("a drop of either makes the next time both are up another round")
    func againAfterADrop() {
        var pair = ConnectionPair(shared: false)
        _ = pair.changed(.receiving, to: .connected)
        #expect(pair.changed(.output, to: .connected) == .connected)
        #expect(pair.changed(.output, to: .connecting) == .none)
        #expect(pair.changed(.output, to: .connected) == .connected)
        #expect(pair.changed(.receiving, to: .connecting) == .none)
        #expect(pair.changed(.output, to: .connecting) == .none)
        #expect(pair.changed(.receiving, to: .connected) == .none)
        #expect(pair.changed(.output, to: .connected) == .connected)
    }

    @Test("up only once both came up again and their round was returned: a receiving connection back alone is not")
    func isUp() {
        var pair = ConnectionPair(shared: false)
        #expect(!pair.isUp)
        _ = pair.changed(.receiving, to: .connected)
        #expect(!pair.isUp)
        #expect(pair.changed(.output, to: .connected) == .connected)
        #expect(pair.isUp)
        // The link goes down and comes back: the receiving connection first.
        _ = pair.changed(.receiving, to: .connecting)
        _ = pair.changed(.output, to: .connecting)
        #expect(!pair.isUp)
        _ = pair.changed(.receiving, to: .connected)
        #expect(!pair.isUp)
        #expect(pair.changed(.output, to: .connected) == .connected)
        #expect(pair.isUp)
    }

    @Test("one connection for both: each time it comes up")
    func shared() {
        var pair = ConnectionPair(shared: true)
        #expect(pair.changed(.receiving, to: .connected) == .connected)
        #expect(pair.changed(.receiving, to: .connected) == .none)
        #expect(pair.changed(.receiving, to: .connecting) == .none)
        #expect(pair.changed(.receiving, to: .connected) == .connected)
    }
}
