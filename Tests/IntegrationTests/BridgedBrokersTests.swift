import Foundation
import LiveDataTestSupport
import Mosquitto
import Testing

/// Two edge brokers, one per group of buildings, each bridged to a central broker where the
/// map clients subscribe; a daemon per edge, each owning the buildings of its edge.
///
/// The live updates are published on the edges, not bridged in from the central broker: the
/// sensors and their gateways sit with the buildings and reach their edge on the site's
/// network, and the daemon of those buildings reads them there. Bridging them in from the
/// central broker would send every update across the long link twice (in, and its style
/// out) and stop the daemons' intake whenever that link is down. What the edges send out
/// is what map clients read: styles, summaries, legends and statuses (`out 1`: QoS 1, so
/// that the bridge queues them while the link is down), never the daemons' checkpoints,
/// which are each daemon's bookkeeping with its own broker.
@Suite("Edge brokers bridged to a central one", .timeLimit(.minutes(3)))
struct BridgedBrokersTests {
    let partitions = PartitionedDaemonsTests()
    static let perBuilding = 12
    static let outTopics = [
        "livedata/style/# out 1", "livedata/summary/# out 1", "livedata/legend/# out 1", "livedata/status/# out 1",
    ]

    /// A partitioned daemon owning `building`, watching its edge's bridge (`edge-a`, `edge-b`).
    static func yaml(port: Int, name: String, building: String, store: String) -> String {
        PartitionedDaemonsTests.yaml(port: port, name: name, owns: building, store: store, bridge: "edge-\(building.lowercased())")
    }

    /// An edge broker bridged to `central` (persistence on, so that its bridge's queue
    /// outlives a restart of the edge too).
    func edge(_ name: String, to central: MosquittoBroker, extra: [String] = []) async throws -> (
        MosquittoBroker, MosquittoBroker.Bridge
    ) {
        let bridge = MosquittoBroker.Bridge(
            name: "central", remotePort: central.port, remoteClientID: name, topics: Self.outTopics)
        return (try await MosquittoBroker.start(.init(extra: ["persistence true"] + extra, bridges: [bridge])), bridge)
    }

    /// A location's style as the daemon publishes it and as `/v1/floors/…` lists it: what the
    /// two must agree on.
    struct PublishedStyle: Decodable, Equatable, CustomStringConvertible {
        struct Topic: Decodable, Equatable {
            let dataset, venue, building, floor, room, location: String
        }
        let topic: Topic
        /// The test's rules set only a color.
        let style: [String: String]
        let version: Int

        var styleTopic: String {
            "livedata/style/\(topic.dataset)/\(topic.venue)/\(topic.building)/\(topic.floor)/\(topic.room)/\(topic.location)"
        }
        var description: String { "\(topic.location)@\(topic.floor) v\(version) \(style)" }
    }

    struct FloorBody: Decodable {
        let locations: [PublishedStyle]
    }

    /// What a daemon holds for a building's two floors, by style topic.
    func held(by daemon: PartitionedDaemonsTests.Daemon, building: String) async throws -> [String: PublishedStyle] {
        var held: [String: PublishedStyle] = [:]
        for floor in ["F1", "F2"] {
            let response = try await LoopbackHTTP.request(
                "GET", port: daemon.httpPort, path: "/v1/floors/ds1/hq/\(building)/\(floor)")
            for location in try JSONDecoder().decode(FloorBody.self, from: Data(response.body.utf8)).locations {
                held[location.styleTopic] = location
            }
        }
        return held
    }

    /// The styles retained on a broker for a building, by topic.
    func retainedStyles(_ broker: MosquittoBroker, building: String) async throws -> [String: PublishedStyle] {
        try await partitions.retained(broker, "livedata/style/ds1/hq/\(building)/#").mapValues {
            try JSONDecoder().decode(PublishedStyle.self, from: Data($0.utf8))
        }
    }

    /// Waits until every location the daemon holds has its style, as held, on the central
    /// broker; returns the central broker's styles for the building (which may hold more).
    @discardableResult
    func caughtUp(_ central: MosquittoBroker, with daemon: PartitionedDaemonsTests.Daemon, building: String)
        async throws -> [String: PublishedStyle]
    {
        struct Sides {
            var held: [String: PublishedStyle]
            var seen: [String: PublishedStyle]
            var agree: Bool {
                held.count == BridgedBrokersTests.perBuilding && held.allSatisfy { seen[$0.key] == $0.value }
            }
        }
        let sides: Sides = try await eventually(
            "building \(building)'s styles on the central broker as its daemon holds them", timeout: .seconds(30),
            observing: {
                Sides(
                    held: try await held(by: daemon, building: building),
                    seen: try await retainedStyles(central, building: building))
            },
            until: { $0.agree })
        #expect(sides.held.count == Self.perBuilding)
        return sides.seen
    }

    func publish(_ broker: MosquittoBroker, _ updates: [(topic: String, payload: String)]) async throws {
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: partitions.logger)
        try await publisher.connect()
        for update in updates { try await publisher.publish(update.topic, text: update.payload, qos: .atLeastOnce) }
        await publisher.disconnect()
    }

    func occupancy(building: String, people: Int) -> [(topic: String, payload: String)] {
        (0..<Self.perBuilding).map {
            (
                "ds1/hq/\(building)/F1/R\($0)/\(building.lowercased())-\($0)/occupancy",
                #"{"properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#
            )
        }
    }

    /// A `position` update placing the building's location 0 on floor F2: it moves, and its
    /// daemon clears its old style topic with an empty retained payload.
    func move(building: String) -> (topic: String, payload: String) {
        (
            "ds1/hq/\(building)/F2/R0/\(building.lowercased())-0/position",
            #"{"properties": {"latitude": "55.1", "longitude": "12.1", "floorIndex": "2"}}"#
        )
    }

    func statuses(_ broker: MosquittoBroker) async throws -> [String: String] {
        try await partitions.retained(broker, "livedata/status/#")
    }

    func bridgesUp(_ broker: MosquittoBroker, _ bridges: [MosquittoBroker.Bridge], _ state: String) async throws {
        try await eventually("bridges \(bridges.map(\.remoteClientID)) in state \(state)", timeout: .seconds(20)) {
            let states = try await partitions.retained(broker, "$SYS/broker/connection/+/state")
            return bridges.allSatisfy { states[$0.stateTopic] == state }
        }
    }

    @Test(
        "derived changes reach the central broker; a clear made while the link is down reaches it when the bridge queued it, and is lost when the queue overflowed; a restart of one edge's daemon leaves the other's styles alone"
    )
    func bridgedEdges() async throws {
        let central = try await MosquittoBroker.start(.init(extra: ["persistence true"]))
        defer { Task { await central.stop() } }
        // Edge A queues what its bridge cannot send (the kit's 100,000 messages). Edge B
        // queues 8: an outage that outlasts the queue (mosquitto's default 1,000, against a
        // building of thousands of locations) in a test-sized building.
        let (edgeA, bridgeA) = try await edge("edge-a", to: central)
        defer { Task { await edgeA.stop() } }
        let (edgeB, bridgeB) = try await edge("edge-b", to: central, extra: ["max_queued_messages 8"])
        defer { Task { await edgeB.stop() } }
        try await bridgesUp(central, [bridgeA, bridgeB], "1")

        let eastDirectory = try TestDirectory.make(prefix: "east")
        let eastYAML = Self.yaml(
            port: edgeA.port, name: "east", building: "A", store: eastDirectory.appendingPathComponent("state.db").path)
        var east = try await partitions.start(eastYAML, in: eastDirectory)
        let westDirectory = try TestDirectory.make(prefix: "west")
        let westYAML = Self.yaml(
            port: edgeB.port, name: "west", building: "B", store: westDirectory.appendingPathComponent("state.db").path)
        var west = try await partitions.start(westYAML, in: westDirectory)

        // Derived changes reach the central broker.
        try await publish(edgeA, occupancy(building: "A", people: 2))
        try await publish(edgeB, occupancy(building: "B", people: 0))
        var seenA = try await caughtUp(central, with: east, building: "A")
        var seenB = try await caughtUp(central, with: west, building: "B")
        #expect(
            seenA.count == Self.perBuilding && seenA.values.allSatisfy { $0.style["polygonFillColor"] == "#D64545" })
        #expect(
            seenB.count == Self.perBuilding && seenB.values.allSatisfy { $0.style["polygonFillColor"] == "#4CAF50" })
        #expect(
            try await statuses(central) == ["livedata/status/east-1": "online", "livedata/status/west-1": "online"])
        #expect(try await partitions.retained(central, "livedata/legend/#").count == 1)

        // The link goes down: the central broker stops (and saves what it retains).
        try await central.terminate()
        try await bridgesUp(edgeA, [bridgeA], "0")
        try await bridgesUp(edgeB, [bridgeB], "0")
        let oldA = "livedata/style/ds1/hq/A/F1/R0/a-0"
        let oldB = "livedata/style/ds1/hq/B/F1/R0/b-0"
        // On edge A, a-0 moves: its old style topic is cleared, on the edge and into the
        // bridge's queue.
        try await publish(edgeA, [move(building: "A")])
        // On edge B, every location changes (more styles than the bridge queues), then b-0
        // moves: its clear finds the queue full.
        try await publish(edgeB, occupancy(building: "B", people: 3) + [move(building: "B")])
        try await eventually("both moves done and cleared on the edges", timeout: .seconds(20)) {
            let heldA = try await held(by: east, building: "A")
            let heldB = try await held(by: west, building: "B")
            let onEdgeA = try await retainedStyles(edgeA, building: "A")
            let onEdgeB = try await retainedStyles(edgeB, building: "B")
            return heldA[oldA] == nil && heldB[oldB] == nil
                && heldB.values.allSatisfy { $0.style["polygonFillColor"] == "#D64545" }
                && onEdgeA[oldA] == nil && onEdgeB[oldB] == nil && onEdgeB.count == Self.perBuilding
        }
        #expect(edgeB.log.contains("Outgoing messages are being dropped for client local.edge-b"))
        #expect(!edgeA.log.contains("Outgoing messages are being dropped"))

        // The link comes back: each bridge sends its queue, then every retained message it
        // exports (mosquitto's bridge does that on each connection).
        try await central.relaunch()
        try await bridgesUp(central, [bridgeA, bridgeB], "1")
        seenA = try await caughtUp(central, with: east, building: "A")
        #expect(
            seenA[oldA] == nil,
            "the clear made on edge A while the link was down reached the central broker through the bridge's queue")
        #expect(Set(seenA.keys) == Set(try await held(by: east, building: "A").keys))
        seenB = try await caughtUp(central, with: west, building: "B")
        // The queue took b-0's first change on its old floor, then had no room for the clear
        // (the edge's log above): the bridge alone would leave b-0 drawn on its old floor.
        let floorsOfB0 = try await held(by: west, building: "B").values.filter { $0.topic.location == "b-0" }.map(
            \.topic.floor)
        #expect(floorsOfB0 == ["F2"], "west holds b-0 on its new floor only")
        // mosquitto's bridge dropped b-0's clear with its full queue, and its reconnection
        // sends only what the edge retains; west, watching its bridge (partition.bridge),
        // publishes its recent clears again once the bridge is back.
        try await eventually("b-0's old style cleared on the central broker", timeout: .seconds(20)) {
            try await retainedStyles(central, building: "B")[oldB] == nil
        }
        #expect(try await partitions.metric(west, "livedata_bridge_recoveries_total") >= 1)
        #expect(try await partitions.metric(west, "livedata_bridge_clears_republished_total") >= 1)
        #expect(west.running.standardError.contains("recorded clears published again"))
        #expect(
            try await statuses(central) == ["livedata/status/east-1": "online", "livedata/status/west-1": "online"])
        for building in ["A", "B"] {
            let edge = building == "A" ? edgeA : edgeB
            // Summaries published again with the clears may still be on their way.
            try await eventually("building \(building)'s summaries on the central broker as on its edge", timeout: .seconds(10)) {
                try await partitions.retained(central, "livedata/summary/ds1/hq/\(building)/#")
                    == (try await partitions.retained(edge, "livedata/summary/ds1/hq/\(building)/#"))
            }
        }

        // East crashes and starts again (a full convergence against edge A): west's styles,
        // summaries and status on the central broker are not touched.
        let watcher = try MQTTClient(configuration: .test(port: central.port), logger: partitions.logger)
        let seen = await Inbox.collecting(watcher.messages)
        try await watcher.connect()
        for filter in ["livedata/style/ds1/hq/B/#", "livedata/summary/ds1/hq/B/#", "livedata/status/west-1"] {
            try await watcher.subscribe(filter)
        }
        let beforeB = try await partitions.retained(central, "livedata/style/ds1/hq/B/#")
        east.running.signal(SIGKILL)
        _ = try await east.running.wait(timeout: .seconds(10))
        try await eventually("east's will, offline, on the central broker", timeout: .seconds(20)) {
            try await statuses(central)["livedata/status/east-1"] == "offline"
        }
        #expect(
            try await statuses(central)["livedata/status/west-1"] == "online", "one dying marks only itself offline")
        east = try await partitions.start(eastYAML, in: eastDirectory)
        #expect(
            try await partitions.metric(east, #"livedata_convergences_total{outcome="finished"}"#) >= 1,
            "the crash called for a full read")
        try await caughtUp(central, with: east, building: "A")
        try await eventually("east online again on the central broker", timeout: .seconds(10)) {
            try await statuses(central) == ["livedata/status/east-1": "online", "livedata/status/west-1": "online"]
        }
        #expect(try await partitions.retained(central, "livedata/style/ds1/hq/B/#") == beforeB)
        let touched = await seen.items.filter { !$0.retain }
        #expect(
            touched.isEmpty,
            "east's restart touched west's topics on the central broker: \(touched.prefix(3).map(\.topic))")
        await watcher.disconnect()

        // West crashes and converges against edge B: nothing of b-0's old place comes back.
        west.running.signal(SIGKILL)
        _ = try await west.running.wait(timeout: .seconds(10))
        west = try await partitions.start(westYAML, in: westDirectory)
        #expect(
            try await partitions.metric(west, #"livedata_convergences_total{outcome="finished"}"#) >= 1,
            "the crash called for a full read")
        seenB = try await caughtUp(central, with: west, building: "B")
        #expect(seenB[oldB] == nil)

        east.running.signal(SIGTERM)
        west.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        #expect(try await west.running.result(timeout: .seconds(15)).status == 0)
    }

    /// An update of location `index` of building C: its occupancy on floor F1, or its
    /// position on `floor` (a move when the floor differs from where it is).
    static func southUpdate(_ index: Int, floor: String? = nil) -> (topic: String, payload: String) {
        guard let floor else {
            return ("ds1/hq/C/F1/R\(index)/c-\(index)/occupancy", #"{"properties": {"nrOfPeople": "1", "capacity": "8"}}"#)
        }
        return (
            "ds1/hq/C/\(floor)/R\(index)/c-\(index)/position",
            #"{"properties": {"latitude": "55.1", "longitude": "12.1", "floorIndex": "2"}}"#
        )
    }

    static func southTopic(_ index: Int, floor: String) -> String { "livedata/style/ds1/hq/C/\(floor)/R\(index)/c-\(index)" }

    @Test(
        "a bridge that comes back gets every clear it may have missed: made while it was down, before a restart of the daemon (the bridge back while the daemon was down) and after one, more than a batch of them; a location that came back keeps its style"
    )
    func clearsMissedWhileTheLinkWasDown() async throws {
        // More clears than one batch of the recovery's walk (1,024 topics).
        let count = 1_200
        let beforeRestart = 0..<(count / 2)
        let afterRestart = (count / 2)..<count
        let central = try await MosquittoBroker.start(.init(extra: ["persistence true"]))
        defer { Task { await central.stop() } }
        // An edge without persistence: restarted while the link is down, it forgets the
        // bridge's queue, clears included (and what it retained: the daemon converges it).
        let bridge = MosquittoBroker.Bridge(name: "central", remotePort: central.port, remoteClientID: "edge-c", topics: Self.outTopics)
        let edge = try await MosquittoBroker.start(.init(bridges: [bridge]))
        defer { Task { await edge.stop() } }
        try await bridgesUp(central, [bridge], "1")
        let directory = try TestDirectory.make(prefix: "south")
        let yaml = Self.yaml(port: edge.port, name: "south", building: "C", store: directory.appendingPathComponent("state.db").path)
        var south = try await partitions.start(yaml, in: directory)

        try await publish(edge, (0..<count).map { Self.southUpdate($0) })
        try await eventually("every location's style on the central broker", timeout: .seconds(60), every: .milliseconds(250)) {
            try await retainedStyles(central, building: "C").count == count
        }

        // The link goes down; the first half of the locations move to F2: their F1 styles are
        // cleared on the edge, and the clears wait in the bridge's queue.
        try await central.terminate()
        try await bridgesUp(edge, [bridge], "0")
        try await publish(edge, beforeRestart.map { Self.southUpdate($0, floor: "F2") })
        try await eventually("the first half moved and cleared on the edge", timeout: .seconds(60), every: .milliseconds(250)) {
            let onEdge = try await retainedStyles(edge, building: "C")
            return beforeRestart.allSatisfy { onEdge[Self.southTopic($0, floor: "F1")] == nil && onEdge[Self.southTopic($0, floor: "F2")] != nil }
        }

        // The daemon dies (what it cleared is in its state file or its journal, nowhere in
        // its memory); the edge restarts and forgets the bridge's queue; the link comes back
        // while the daemon is down. The central broker keeps every old style.
        south.running.signal(SIGKILL)
        _ = try await south.running.wait(timeout: .seconds(10))
        try await edge.terminate()
        try await edge.relaunch()
        try await central.relaunch()
        try await bridgesUp(central, [bridge], "1")
        let onCentralBefore = try await retainedStyles(central, building: "C")
        #expect(
            beforeRestart.allSatisfy { onCentralBefore[Self.southTopic($0, floor: "F1")] != nil },
            "the bridge alone left every old style on the central broker")

        // The daemon starts, finds its bridge up, and clears them there.
        south = try await partitions.start(yaml, in: directory)
        try await eventually(
            "the first half's old styles cleared on the central broker; the daemon's log:\n\(south.running.standardError.suffix(4000))",
            timeout: .seconds(60), every: .milliseconds(250)
        ) {
            let onCentral = try await retainedStyles(central, building: "C")
            return beforeRestart.allSatisfy { onCentral[Self.southTopic($0, floor: "F1")] == nil }
        }
        #expect(try await partitions.metric(south, "livedata_bridge_recoveries_total") >= 1)
        #expect(try await partitions.metric(south, "livedata_bridge_clears_republished_total") >= Double(beforeRestart.count))

        // Down again: the second half moves too, and location 0 comes back to its F1 place;
        // the edge restarts again, losing the queue, while the daemon runs.
        try await central.terminate()
        try await bridgesUp(edge, [bridge], "0")
        try await publish(edge, afterRestart.map { Self.southUpdate($0, floor: "F2") } + [Self.southUpdate(0, floor: "F1")])
        try await eventually("the second half moved, and location 0 back on F1, on the edge", timeout: .seconds(60), every: .milliseconds(250)) {
            let onEdge = try await retainedStyles(edge, building: "C")
            return afterRestart.allSatisfy { onEdge[Self.southTopic($0, floor: "F1")] == nil }
                && onEdge[Self.southTopic(0, floor: "F1")] != nil && onEdge[Self.southTopic(0, floor: "F2")] == nil
        }
        let recoveries = try await partitions.metric(south, "livedata_bridge_recoveries_total")
        try await edge.terminate()
        try await edge.relaunch()
        try await eventually("the daemon's styles on the restarted edge again", timeout: .seconds(60), every: .milliseconds(250)) {
            try await retainedStyles(edge, building: "C").count == count
        }
        try await central.relaunch()
        try await bridgesUp(central, [bridge], "1")

        // Back: the central broker holds exactly what the daemon holds, location 0 on F1.
        let held = try await held(by: south, building: "C")
        #expect(held.count == count && held[Self.southTopic(0, floor: "F1")] != nil)
        let onCentral = try await eventually(
            "the central broker's styles of building C as the daemon holds them; the daemon's log:\n\(south.running.standardError.suffix(4000))",
            timeout: .seconds(60), every: .milliseconds(250),
            observing: { try await retainedStyles(central, building: "C") },
            until: { Set($0.keys) == Set(held.keys) })
        #expect(onCentral[Self.southTopic(0, floor: "F1")] != nil, "location 0 came back to F1 after its clear: not cleared again")
        #expect(onCentral[Self.southTopic(0, floor: "F2")] == nil)
        #expect(try await partitions.metric(south, "livedata_bridge_recoveries_total") > recoveries)
        #expect(south.running.standardError.contains("recorded clears published again"))

        south.running.signal(SIGTERM)
        #expect(try await south.running.result(timeout: .seconds(15)).status == 0)
    }
}
