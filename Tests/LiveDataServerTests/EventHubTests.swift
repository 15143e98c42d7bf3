import LiveTopics
import Foundation
import LiveDataServer
import NIOCore
import Testing

/// The floor view's event stream: snapshot, resume after Last-Event-ID, and the slow
/// viewer dropped without holding the publisher up.
@Suite("Event stream")
struct EventHubTests {
    let floor = PlaceScope(dataset: "ds", venue: "v", building: "B", floor: "F1")
    let placeF1 = Place(dataset: "ds", venue: "v", building: "B", floor: "F1")
    let placeF2 = Place(dataset: "ds", venue: "v", building: "B", floor: "F2")

    /// Reads `count` frames, or fewer if the stream ends (a read may hold several).
    func frames(_ subscription: EventHub.Subscription, _ count: Int) async -> [String] {
        var result: [String] = []
        for await bytes in subscription.frames {
            result += String(buffer: bytes).components(separatedBy: "\n\n").dropLast().map { $0 + "\n\n" }
            if result.count >= count { break }
        }
        return result
    }

    func id(_ frame: String) -> String? {
        frame.split(separator: "\n").first { $0.hasPrefix("id: ") }.map { String($0.dropFirst(4)) }
    }

    @Test("a snapshot first, then the scope's events in order, each with an id")
    func snapshotThenEvents() async {
        let hub = EventHub(epoch: 7)
        let subscription = hub.subscribe(floor, lastEventID: nil) { Array(#"{"locations": []}"#.utf8) }
        #expect(!subscription.resumed)
        hub.publish("change", place: placeF1, json: Array(#"{"n": 1}"#.utf8))
        hub.publish("change", place: placeF2, json: Array(#"{"n": 2}"#.utf8))  // another floor
        hub.publish("summary", place: Place(dataset: "ds", venue: "v", building: "B", floor: nil), json: Array("{}".utf8))
        hub.publish("change", place: placeF1, json: Array(#"{"n": 3}"#.utf8))
        let received = await frames(subscription, 4)
        #expect(received[0] == "id: 7-1\nevent: snapshot\ndata: {\"locations\": []}\n\n")
        #expect(received[1] == "id: 7-2\nevent: change\ndata: {\"n\": 1}\n\n")
        #expect(received[2].contains("event: summary"))
        #expect(received[3].contains(#"data: {"n": 3}"#))
        #expect(hub.statistics.viewers == 1)
    }

    @Test("a viewer that reconnects with its last id gets what it missed and no snapshot; an unknown or old id gets a snapshot")
    func resume() async {
        let hub = EventHub(history: 4, epoch: 9)
        let first = hub.subscribe(floor, lastEventID: nil) { Array("{}".utf8) }
        hub.publish("change", place: placeF1, json: Array("1".utf8))
        let seen = await frames(first, 2)
        let last = try! #require(id(seen[1]))
        // While it is away (another viewer keeps the hub watching), two more changes.
        let other = hub.subscribe(floor, lastEventID: nil) { Array("{}".utf8) }
        hub.end(first)
        hub.publish("change", place: placeF1, json: Array("2".utf8))
        hub.publish("change", place: placeF1, json: Array("3".utf8))
        let back = hub.subscribe(floor, lastEventID: last) { Array("SNAPSHOT".utf8) }
        #expect(back.resumed)
        let missed = await frames(back, 2)
        #expect(missed.map { $0.split(separator: "\n").last! } == ["data: 2", "data: 3"])
        // An id from another run (its epoch), or from before what the history keeps.
        #expect(!hub.subscribe(floor, lastEventID: "1-3") { [] }.resumed)
        for n in 4...10 { hub.publish("change", place: placeF1, json: Array("\(n)".utf8)) }
        #expect(!hub.subscribe(floor, lastEventID: last) { [] }.resumed)
        #expect(hub.statistics.resumed == 1)
        _ = other
    }

    @Test("a viewer that falls behind is dropped (its stream ends) and counted; the publisher never waits; others go on")
    func slowViewerDropped() async {
        let hub = EventHub(viewerBuffer: 8, epoch: 1)
        let slow = hub.subscribe(floor, lastEventID: nil) { Array("{}".utf8) }
        let fast = hub.subscribe(floor, lastEventID: nil) { Array("{}".utf8) }
        var fastReceived: [String] = []
        for n in 1...100 {
            hub.publish("change", place: placeF1, json: Array("\(n)".utf8))
            // The fast viewer reads as it goes; the slow one reads nothing.
            if n % 4 == 0 { fastReceived += await frames(fast, n == 4 ? 5 : 4) }
        }
        #expect(hub.statistics.dropped == 1)
        #expect(hub.statistics.viewers == 1)
        // The slow viewer's stream holds what fitted, then ends.
        let slowFrames = await frames(slow, 1000)
        #expect(slowFrames.count == 8)
        // The fast one has every change, in order.
        let numbers = fastReceived.dropFirst().map { Int($0.split(separator: "\n").last!.dropFirst(6))! }
        #expect(numbers == Array(1...100))
        // Reconnecting from its last frame: what it missed is more than its buffer holds, so
        // a snapshot; from near the end, a resume.
        #expect(!hub.subscribe(floor, lastEventID: "1-8") { [] }.resumed)
        #expect(hub.subscribe(floor, lastEventID: "1-97") { [] }.resumed)
    }

    @Test("nothing is kept while nobody watches: an id from before that gets a snapshot")
    func unwatched() {
        let hub = EventHub(epoch: 3)
        let viewer = hub.subscribe(floor, lastEventID: nil) { [] }
        hub.publish("change", place: placeF1, json: Array("1".utf8))
        hub.end(viewer)
        hub.publish("change", place: placeF1, json: Array("2".utf8))  // nobody watches: not kept
        #expect(!hub.hasViewers)
        #expect(!hub.subscribe(floor, lastEventID: "3-1") { [] }.resumed)
    }
}
