import Foundation
import LiveTopics
import Testing

@testable import LiveDataServer

/// When a standby may take over without reading back every retained style, and what it
/// publishes again then.
@Suite("Failover markers")
struct FailoverMarkersTests {
    static let rules = "rules-1"

    static func marker(_ sequence: UInt64, covers: UInt64? = nil, epoch: UInt64 = 3, rules: String = rules) -> FailoverMarkers.Marker {
        FailoverMarkers.Marker(instance: "east-1", epoch: epoch, sequence: sequence, covers: covers, rules: rules)
    }

    static func address(_ index: Int) -> LocationAddress { LocationAddress(path: "ds1/hq/A/F1/R\(index)/desk-\(index)")! }

    @Test("the active covers a fence only once it came back in its stream and nothing waited after that; one marker at a time, at most one a second")
    func activeCovers() throws {
        var markers = FailoverMarkers()
        let start = ContinuousClock.now
        func next(_ after: Duration) -> FailoverMarkers.Marker? { markers.next(instance: "east-1", epoch: 3, rules: Self.rules, now: start + after) }
        let first = try #require(next(.zero))
        #expect(first.sequence == 1 && first.covers == nil)
        #expect(next(.milliseconds(500)) == nil, "one a second")
        #expect(next(.seconds(1)) == nil, "not before the last one came back")
        // Idle before its fence came back: nothing to cover.
        markers.outputIdle()
        markers.read(first, own: ("east-1", 3), rules: Self.rules)
        let second = try #require(next(.milliseconds(1500)))
        #expect(second.sequence == 2 && second.covers == nil, "the fence came back, but nothing was idle since")
        markers.read(second, own: ("east-1", 3), rules: Self.rules)
        markers.outputIdle()
        let third = try #require(next(.milliseconds(2500)))
        #expect(third.covers == 2)
        let decoded = third.payload.withUnsafeBytes { FailoverMarkers.Marker(payload: $0) }
        #expect(decoded == third, "the payload reads back")
        // Never read back: the next goes out after a while all the same.
        #expect(next(.seconds(5)) == nil)
        #expect(next(.seconds(13))?.sequence == 4)
    }

    @Test("a standby that read every marker publishes again what changed since the fence before the one covered, nothing older")
    func evidence() throws {
        var markers = FailoverMarkers()
        markers.standbyChanged(Self.address(0), left: nil)  // before any marker: not kept
        markers.read(Self.marker(1), own: nil, rules: Self.rules)
        #expect(markers.evidence(replacing: 3) == nil, "no fence covered yet")
        markers.standbyChanged(Self.address(1), left: nil)
        markers.read(Self.marker(2), own: nil, rules: Self.rules)
        markers.standbyChanged(Self.address(2), left: Self.address(9))
        markers.read(Self.marker(3, covers: 2), own: nil, rules: Self.rules)
        markers.standbyChanged(Self.address(3), left: nil)
        // Covers 2: from fence 1's start (one fence of margin).
        #expect(markers.evidence(replacing: 3) == [1, 2, 9, 3].map(Self.address))
        markers.read(Self.marker(4, covers: 3), own: nil, rules: Self.rules)
        #expect(markers.evidence(replacing: 3) == [2, 9, 3].map(Self.address))
        #expect(markers.evidence(replacing: 4) == nil, "the markers of another epoch than the lease replaced vouch for nothing")
        #expect(markers.evidence(replacing: nil) == nil)
    }

    @Test("a missed marker, other rules, a reconnection or a copied state make the takeover read everything")
    func cannotKnow() {
        func following() -> FailoverMarkers {
            var markers = FailoverMarkers()
            markers.read(Self.marker(1), own: nil, rules: Self.rules)
            markers.read(Self.marker(2, covers: 1), own: nil, rules: Self.rules)
            markers.standbyChanged(Self.address(1), left: nil)
            return markers
        }
        #expect(following().evidence(replacing: 3) == [Self.address(1)])

        var missed = following()
        missed.read(Self.marker(4, covers: 3), own: nil, rules: Self.rules)
        #expect(missed.evidence(replacing: 3) == nil)
        #expect(missed.missing(replacing: 3).contains("missed"))
        // Following again: a fence, then a marker that covers it.
        missed.read(Self.marker(5), own: nil, rules: Self.rules)
        missed.read(Self.marker(6, covers: 5), own: nil, rules: Self.rules)
        #expect(missed.evidence(replacing: 3) == [])

        var otherRules = following()
        otherRules.read(Self.marker(3, covers: 2, rules: "rules-2"), own: nil, rules: Self.rules)
        #expect(otherRules.evidence(replacing: 3) == nil)

        var reconnected = following()
        reconnected.forget("the connection to the broker came back")
        #expect(reconnected.evidence(replacing: 3) == nil)

        var copied = following()
        copied.copied()
        copied.read(Self.marker(3), own: nil, rules: Self.rules)
        copied.read(Self.marker(4, covers: 3), own: nil, rules: Self.rules)
        #expect(copied.evidence(replacing: 3) == nil, "a replica that copied its state reads everything at its first takeover")
        copied.activated()
        copied.read(Self.marker(5), own: nil, rules: Self.rules)
        copied.read(Self.marker(6, covers: 5), own: nil, rules: Self.rules)
        #expect(copied.evidence(replacing: 3) == [])
    }
}
