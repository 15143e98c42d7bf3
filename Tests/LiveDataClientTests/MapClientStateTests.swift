import Foundation
import LiveDataClient
import Testing

/// The contract's rules from a client's side, one message at a time.
@Suite("A map client applies the output as the contract says")
struct MapClientStateTests {
    static func change(
        _ location: String = "room-7", floor: String = "F3", room: String = "R7", epoch: Int? = nil, version: Int, label: String = "3/8",
        visible: Bool = true, rules: [String] = ["occupied"], format: Int = 1
    ) -> (String, [UInt8]) {
        let topic = "livedata/style/ds1/hq/B/\(floor)/\(room)/\(location)"
        let epochMember = epoch.map { #", "epoch": \#($0)"# } ?? ""
        let rulesJSON = "[" + rules.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
        let payload = """
            {"location": "\(location)", "topic": {"dataset": "ds1", "venue": "hq", "building": "B", "floor": "\(floor)", "room": "\(room)", "location": "\(location)"}, \
            "style": {"visible": \(visible), "label": "\(label)", "badge": {"text": "3"}}, "changed": [], "rules": \(rulesJSON), "live": {}\(epochMember), \
            "version": \(version), "updatedAt": "2026-11-21T10:15:03.150Z", "format": \(format)}
            """
        return (topic, Array(payload.utf8))
    }

    static let key = MapClientState.Key(dataset: "ds1", location: "room-7")

    @Test("changes are ordered by (epoch, version): an older one, or a repeat, is dropped; a higher epoch wins over a higher version")
    func ordering() {
        var state = MapClientState()
        let (topic, v4) = Self.change(version: 4, label: "4")
        #expect(state.apply(topic: topic, payload: v4) == .applied(Self.key, movedFrom: nil))
        let (_, v3) = Self.change(version: 3, label: "3")
        #expect(state.apply(topic: topic, payload: v3) == .older(Self.key, held: Order(epoch: 0, version: 4), received: Order(epoch: 0, version: 3)))
        #expect(state.apply(topic: topic, payload: v4) == .older(Self.key, held: Order(epoch: 0, version: 4), received: Order(epoch: 0, version: 4)))
        let (_, takeover) = Self.change(epoch: 2, version: 1, label: "after")
        #expect(state.apply(topic: topic, payload: takeover) == .applied(Self.key, movedFrom: nil))
        let (_, oldActive) = Self.change(epoch: 1, version: 9, label: "late")
        #expect(state.apply(topic: topic, payload: oldActive) == .older(Self.key, held: Order(epoch: 2, version: 1), received: Order(epoch: 1, version: 9)))
        #expect(state.locations[Self.key]?.change.style.label == "after")
        #expect(state.droppedOlder == 3)
    }

    @Test("a move takes the location to its new place; the clear of the old place then changes nothing; a clear of where it is removes it")
    func movesAndClears() {
        var state = MapClientState()
        let (first, v1) = Self.change(floor: "F1", room: "R1", version: 1)
        _ = state.apply(topic: first, payload: v1)
        let (second, v2) = Self.change(floor: "F2", room: "R5", version: 2)
        let moved = state.apply(topic: second, payload: v2)
        guard case .applied(_, let from) = moved else {
            Issue.record("not applied: \(moved)")
            return
        }
        #expect(from?.floor == "F1")
        #expect(state.locations.count == 1 && state.locations[Self.key]?.place.floor == "F2")
        #expect(state.apply(topic: first, payload: []) == .staleClear(topic: first))
        #expect(state.locations[Self.key]?.place.floor == "F2")
        guard case .removed = state.apply(topic: second, payload: []) else {
            Issue.record("the clear of its place did not remove it")
            return
        }
        #expect(state.locations.isEmpty)
    }

    @Test("the legend names a location's state; a hidden layer's location is marked hidden")
    func legendAndLayers() {
        var state = MapClientState()
        let legend = ##"{"entries": [{"title": "Vacant", "rules": ["vacant"]}, {"title": "Occupied", "swatch": "#D64545", "rules": ["occupied"]}], "format": 1}"##
        #expect(state.apply(topic: "livedata/legend/ds1", payload: Array(legend.utf8)) == .legend(dataset: "ds1"))
        let (topic, payload) = Self.change(version: 1, visible: false)
        _ = state.apply(topic: topic, payload: payload)
        let entry = state.locations[Self.key]
        #expect(entry.map(state.state) == "Occupied")
        #expect(entry?.hidden == true)
    }

    @Test(
        "a payload that breaks the contract is reported with its topic and what is wrong, and nothing held changes",
        arguments: [
            (#"{"location": "room-7"}"#, "$.topic is missing"),
            ("not json", "not JSON"),
            (#"{"location": "room-7", "topic": {"dataset": "ds1", "venue": "hq", "building": "B", "floor": "F3", "room": "R7", "location": "room-7"}, "style": {}, "rules": [], "version": "four"}"#, "$.version"),
            (#"{"location": "room-8", "topic": {"dataset": "ds1", "venue": "hq", "building": "B", "floor": "F9", "room": "R7", "location": "room-8"}, "style": {}, "rules": [], "version": 1}"#, "not the topic it came on"),
        ])
    func violations(payload: String, problem: String) {
        var state = MapClientState()
        let (topic, good) = Self.change(version: 1)
        _ = state.apply(topic: topic, payload: good)
        let outcome = state.apply(topic: topic, payload: Array(payload.utf8))
        guard case .violation(let where_, let said) = outcome else {
            Issue.record("accepted: \(outcome)")
            return
        }
        #expect(where_ == topic)
        #expect(said.contains(problem), "\(said)")
        #expect(state.locations[Self.key]?.change.version == 1)
        #expect(state.apply(topic: "livedata/status", payload: Array("maybe".utf8)) == .violation(topic: "livedata/status", problem: #"a status is `online` or `offline`, not "maybe""#))
    }

    @Test("a newer wire format is noted, and what can be read is applied")
    func newerFormat() {
        var state = MapClientState()
        let (topic, payload) = Self.change(version: 1, format: 2)
        #expect(state.apply(topic: topic, payload: payload) == .applied(Self.key, movedFrom: nil))
        #expect(state.newerFormat == 2)
    }

    @Test("a multi-level prefix, status per instance, and the lease")
    func prefixStatusLease() {
        var state = MapClientState(prefix: "site/live")
        #expect(state.apply(topic: "livedata/status", payload: Array("online".utf8)) == .ignored(topic: "livedata/status"))
        #expect(state.apply(topic: "site/live/status/east-1", payload: Array("offline".utf8)) == .status(instance: "east-1", online: false))
        let lease = #"{"epoch": 3, "format": 1, "instance": "east-2"}"#
        guard case .lease("east", let held) = state.apply(topic: "site/live/owner/east", payload: Array(lease.utf8)) else {
            Issue.record("the lease was not read")
            return
        }
        #expect(held.instance == "east-2" && held.epoch == 3)
    }
}
