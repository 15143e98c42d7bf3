import Foundation
import LiveDataServer
import LiveTopics
import NIOCore
import Testing

/// What a venue-view viewer is told: a floor's changes, the summaries of the buildings in
/// view, one location wherever it goes; against the criteria checked one by one.
@Suite("Event scopes")
struct EventScopeTests {
    static func address(_ building: String, _ floor: String, _ room: String = "R1", _ location: String = "room-1") -> LocationAddress {
        LocationAddress(dataset: "ds", venue: "v", building: building, floor: floor, room: room, location: location)
    }

    static let subjects: [EventScope.Subject] = [
        .location(address("A", "F1")), .location(address("A", "F2")), .location(address("B", "F1")),
        .location(address("B", "F3", "R9", "asset-1")), .location(address("A", "F1", "R2", "asset-1")),
        .place(Place(dataset: "ds", venue: "v", building: "A")), .place(Place(dataset: "ds", venue: "v", building: "A", floor: "F1")),
        .place(Place(dataset: "ds", venue: "v", building: "B")), .place(Place(dataset: "ds", venue: "w", building: "A")),
    ]

    @Test("each scope holds exactly the subjects its criteria name", arguments: [
        (EventScope(dataset: "ds", venue: "v", buildings: ["A"], floor: "F1"), [0, 4, 5, 6]),
        (EventScope(dataset: "ds", venue: "v", buildings: ["A", "B"], summariesOnly: true), [5, 7]),
        (EventScope(dataset: "ds", venue: "v", summariesOnly: true), [5, 7]),
        (EventScope(dataset: "ds", location: "asset-1"), [3, 4]),
        (EventScope(dataset: "ds", venue: "v", buildings: ["B"]), [2, 3, 7]),
        (EventScope(room: "R9"), [3]),
        (EventScope(), [0, 1, 2, 3, 4, 5, 6, 7, 8]),
    ])
    func holds(scope: EventScope, expected: [Int]) {
        let held = Self.subjects.indices.filter { scope.holds(Self.subjects[$0]) }
        #expect(held == expected)
    }

    /// The events a subscription has waiting, by their data.
    func waiting(_ subscription: EventHub.Subscription, after count: Int) async -> [String] {
        var frames: [String] = []
        for await bytes in subscription.frames {
            frames += String(buffer: bytes).components(separatedBy: "\n\n").dropLast()
            if frames.count >= count { break }
        }
        return frames.compactMap { frame in frame.split(separator: "\n").first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) } }
    }

    @Test("the hub gives a change to its floor's viewers, to the wide viewers that hold it, and to no other; a building summary to the summaries-only viewer")
    func delivery() async {
        let hub = EventHub(epoch: 1)
        let floorA1 = hub.subscribe(EventScope(dataset: "ds", venue: "v", buildings: ["A"], floor: "F1"), lastEventID: nil) { Array("S".utf8) }
        let floorB1 = hub.subscribe(EventScope(dataset: "ds", venue: "v", buildings: ["B"], floor: "F1"), lastEventID: nil) { Array("S".utf8) }
        let facades = hub.subscribe(EventScope(dataset: "ds", venue: "v", buildings: ["A", "B"], summariesOnly: true), lastEventID: nil) {
            Array("S".utf8)
        }
        let asset = hub.subscribe(EventScope(dataset: "ds", venue: "v", location: "asset-1"), lastEventID: nil) { Array("S".utf8) }
        hub.publish("change", address: Self.address("A", "F1"), json: Array("a1".utf8))
        hub.publish("change", address: Self.address("B", "F1"), json: Array("b1".utf8))
        hub.publish("change", address: Self.address("A", "F2", "R2", "asset-1"), json: Array("asset on A2".utf8))
        hub.publish("summary", place: Place(dataset: "ds", venue: "v", building: "A", floor: "F1"), json: Array("sum A1".utf8))
        hub.publish("summary", place: Place(dataset: "ds", venue: "v", building: "B"), json: Array("sum B".utf8))
        hub.publish("remove", address: Self.address("A", "F1"), json: Array("end".utf8))
        #expect(await waiting(floorA1, after: 4) == ["S", "a1", "sum A1", "end"])
        #expect(await waiting(floorB1, after: 3) == ["S", "b1", "sum B"])
        #expect(await waiting(facades, after: 2) == ["S", "sum B"])
        #expect(await waiting(asset, after: 2) == ["S", "asset on A2"])
        for subscription in [floorA1, floorB1, facades, asset] { hub.end(subscription) }
        #expect(hub.statistics.viewers == 0)
    }

    @Test("a floor's viewer that reconnects is resumed with that floor's events only; one that falls behind is dropped, and the other floor's viewer is not touched")
    func resumeAndDrop() async throws {
        let hub = EventHub(history: 64, viewerBuffer: 8, epoch: 9)
        let floor1 = EventScope(dataset: "ds", venue: "v", buildings: ["A"], floor: "F1")
        let watcher = hub.subscribe(EventScope(dataset: "ds", venue: "v", buildings: ["A"], floor: "F2"), lastEventID: nil) { Array("S".utf8) }
        let first = hub.subscribe(floor1, lastEventID: nil) { Array("S".utf8) }
        hub.publish("change", address: Self.address("A", "F1"), json: Array("1".utf8))
        var frames: [String] = []
        for await bytes in first.frames {
            frames += String(buffer: bytes).components(separatedBy: "\n\n").dropLast()
            if frames.count >= 2 { break }
        }
        let last = try #require(frames.last?.split(separator: "\n").first.map { String($0.dropFirst(4)) })
        hub.end(first)
        hub.publish("change", address: Self.address("A", "F1"), json: Array("2".utf8))
        hub.publish("change", address: Self.address("A", "F2"), json: Array("other floor".utf8))
        hub.publish("change", address: Self.address("A", "F1"), json: Array("3".utf8))
        let back = hub.subscribe(floor1, lastEventID: last) { Array("S".utf8) }
        #expect(back.resumed)
        #expect(await waiting(back, after: 2) == ["2", "3"])
        // It stops reading: past its buffer it is dropped; the other floor's viewer is not.
        for n in 4...20 { hub.publish("change", address: Self.address("A", "F1"), json: Array("\(n)".utf8)) }
        #expect(hub.statistics.dropped == 1)
        #expect(hub.statistics.viewers == 1)
        #expect(await waiting(watcher, after: 2) == ["S", "other floor"])
        hub.end(watcher)
    }
}
