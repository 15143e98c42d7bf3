import Foundation
import Testing

@testable import LiveDataServer

/// When a sync marker goes out, and what its acknowledgement vouches for.
@Suite("Sync markers")
struct SyncMarkersTests {
    @Test("due only after something was handed over, one at a time, at most once a second, never while one is checked")
    func due() {
        var markers = SyncMarkers()
        markers.verified(since: 4, now: 4)
        let later = ContinuousClock.now + .seconds(2)
        #expect(!markers.isDue(now: later, handedOver: 0, connections: 4))
        #expect(markers.isDue(now: later, handedOver: 5, connections: 4))
        let payload = markers.next(locations: 7, connections: 4)
        #expect(payload.contains(#""token": "\#(markers.token)""#) && payload.contains(#""sequence": 1"#) && payload.contains(#""locations": 7"#))
        // In flight: no second one, however late.
        #expect(!markers.isDue(now: later + .seconds(10), handedOver: 9, connections: 4))
        let vouched = markers.done(payload, position: 5, acknowledged: true, connections: 4)
        #expect(vouched)
        #expect(markers.acknowledged == payload && markers.markedPosition == 5)
        // Just sent: not again within the interval.
        #expect(!markers.isDue(now: .now, handedOver: 9, connections: 4))
        #expect(markers.isDue(now: .now + .seconds(2), handedOver: 9, connections: 4))
        // Nothing handed over since the acknowledged one.
        #expect(!markers.isDue(now: .now + .seconds(2), handedOver: 5, connections: 4))
        markers.check = .resumed(payload)
        #expect(!markers.isDue(now: .now + .seconds(2), handedOver: 9, connections: 4))
    }

    @Test("a refused marker vouches for nothing; a later acknowledgement of an earlier position never lowers the mark")
    func refusal() {
        var markers = SyncMarkers()
        markers.verified(since: 4, now: 4)
        let first = markers.next(locations: 1, connections: 4)
        let refused = markers.done(first, position: 10, acknowledged: false, connections: 4)
        #expect(!refused)
        #expect(markers.acknowledged == nil && markers.markedPosition == 0 && !markers.inFlight)
        let second = markers.next(locations: 1, connections: 4)
        #expect(second != first)
        _ = markers.done(second, position: 20, acknowledged: true, connections: 4)
        let third = markers.next(locations: 1, connections: 4)
        _ = markers.done(third, position: 15, acknowledged: true, connections: 4)
        #expect(markers.markedPosition == 20 && markers.acknowledged == third)
    }

    @Test("none is due before what the broker holds is verified under the output's connections, nor after they reconnect, until verified again")
    func verification() {
        var markers = SyncMarkers()
        let later = ContinuousClock.now + .seconds(2)
        // The first convergence has not finished yet.
        #expect(!markers.isDue(now: later, handedOver: 5, connections: 4))
        markers.verified(since: 4, now: 4)
        #expect(markers.isDue(now: later, handedOver: 5, connections: 4))
        // One of the output's connections came back: the broker may have restarted from a save.
        #expect(!markers.isDue(now: later, handedOver: 5, connections: 5))
        #expect(!markers.isVerified(under: 5))
        // A check that began before another reconnection verifies nothing.
        markers.verified(since: 5, now: 6)
        #expect(!markers.isDue(now: later, handedOver: 5, connections: 6))
        markers.verified(since: 6, now: 6)
        #expect(markers.isDue(now: later, handedOver: 5, connections: 6))
    }

    @Test("a marker acknowledged after the output reconnected vouches for nothing: the acknowledgement may be a restarted broker's")
    func acknowledgedAcrossReconnection() {
        var markers = SyncMarkers()
        markers.verified(since: 4, now: 4)
        let first = markers.next(locations: 3, connections: 4)
        let firstVouched = markers.done(first, position: 10, acknowledged: true, connections: 4)
        #expect(firstVouched)
        // In flight when the broker went down; libmosquitto sent it again to the restored broker.
        let second = markers.next(locations: 3, connections: 4)
        let vouched = markers.done(second, position: 20, acknowledged: true, connections: 5)
        #expect(!vouched)
        #expect(markers.acknowledged == first && markers.markedPosition == 10 && !markers.inFlight)
    }

    @Test("markers take turns between the two topics: the one in flight never lands where the last acknowledged one is")
    func slots() {
        var markers = SyncMarkers()
        markers.verified(since: 4, now: 4)
        var slots: [Int] = []
        for position in 1...4 {
            let payload = markers.next(locations: 1, connections: 4)
            slots.append(markers.slot)
            _ = markers.done(payload, position: position, acknowledged: true, connections: 4)
        }
        #expect(slots == [0, 1, 0, 1])
        #expect(SyncMarkers.slot(ofSequence: 1) == 0 && SyncMarkers.slot(ofSequence: 2) == 1)
    }

    @Test("two runs' markers differ by their token")
    func tokens() {
        var a = SyncMarkers()
        var b = SyncMarkers()
        #expect(a.token != b.token)
        let fromA = a.next(locations: 0, connections: 4)
        let fromB = b.next(locations: 0, connections: 4)
        #expect(fromA != fromB)
    }

    @Test("a marker's count is read only for the scope it was published for, and a marker carries its scope")
    func scope() {
        let payload = Array(#"{"token": "ab", "sequence": 3, "locations": 1500, "scope": "ds1/hq/A"}"#.utf8)
        #expect(SyncMarkers.locations(in: payload, scope: "ds1/hq/A") == 1500)
        #expect(SyncMarkers.locations(in: payload, scope: "ds1/hq/B") == nil)
        #expect(SyncMarkers.locations(in: Array(#"{"token": "ab", "sequence": 3, "locations": 9}"#.utf8), scope: "*") == nil)
        var markers = SyncMarkers()
        let published = markers.next(locations: 42, scope: "ds1/+/+", connections: 4)
        #expect(SyncMarkers.locations(in: Array(published.utf8), scope: "ds1/+/+") == 42)
        #expect(SyncMarkers.locations(in: Array(markers.next(locations: -3, connections: 4).utf8), scope: "*") == 0)
    }
}
