import Foundation
import LiveDataTestSupport
import LiveStatePersistence
import Logging
import Mosquitto
import Testing

/// A daemon whose `partition.owns` shrinks between two runs: the second start drops the
/// stored locations it no longer owns (counted, logged once), never keeps them, and leaves
/// their retained styles to the daemon that owns them now.
@Suite("A partition that changes between runs", .timeLimit(.minutes(5)))
struct PartitionChangeTests {
    let logger = Logger(label: "test")
    let partitions = PartitionedDaemonsTests()

    static func yaml(port: Int, name: String, owns buildings: [String], store: String) -> String {
        var file = DaemonConfigFile(brokerPort: port, clientId: name, store: store)
        file.instance = "\(name)-1"
        file.partition = name
        file.owns = buildings.map { .building($0) }
        file.rules = DaemonConfigFile.occupiedAndVacantRules
        return file.yaml
    }

    @Test("owning A and B, then only A: the start drops B's stored locations (metric, one log line), keeps none, and clears none of B's styles")
    func ownsShrink() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let perBuilding = PartitionedDaemonsTests.perBuilding
        let eastDirectory = try TestDirectory.make(prefix: "east")
        let eastStore = eastDirectory.appendingPathComponent("state.db").path

        // The first run owns both buildings; its state file holds both.
        var east = try await partitions.start(Self.yaml(port: broker.port, name: "east", owns: ["A", "B"], store: eastStore), in: eastDirectory)
        try await partitions.fill(broker, building: "A", people: 3)
        try await partitions.fill(broker, building: "B", people: 3)
        try await partitions.styles(broker, building: "A", showing: "#D64545")
        try await partitions.styles(broker, building: "B", showing: "#D64545")
        east.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        let stored = try StateDatabase(path: eastStore).readAll().records
        #expect(stored.count == 2 * perBuilding, "the first run stored both buildings")

        // Building B goes to another daemon, which publishes its own styles there.
        let westDirectory = try TestDirectory.make(prefix: "west")
        let west = try await partitions.start(
            Self.yaml(port: broker.port, name: "west", owns: ["B"], store: westDirectory.appendingPathComponent("state.db").path),
            in: westDirectory)
        try await partitions.fill(broker, building: "B", people: 0)
        try await partitions.styles(broker, building: "B", showing: "#4CAF50")

        // B's style topics watched from here on: the second run of east must clear none.
        let watcher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        let seen = await Inbox.collecting(watcher.messages)
        try await watcher.connect()
        try await watcher.subscribe("livedata/style/ds1/hq/B/#")

        // The second run owns only A.
        east = try await partitions.start(Self.yaml(port: broker.port, name: "east", owns: ["A"], store: eastStore), in: eastDirectory)
        let dropLines = east.running.standardError.split(separator: "\n").filter { $0.contains("stored locations outside partition east") }
        #expect(dropLines.count == 1, "one line for the drop: \(dropLines)")
        #expect(dropLines.first?.contains("dropped \(perBuilding) ") == true, "\(dropLines)")
        #expect(try await partitions.metric(east, "livedata_locations_dropped_outside_partition") == Double(perBuilding))
        #expect(try await partitions.metric(east, "livedata_locations_tracked") == Double(perBuilding), "only A's locations are held")
        let floorB = try await LoopbackHTTP.request("GET", port: east.httpPort, path: "/v1/floors/ds1/hq/B/F1")
        let heldInB = (try? JSONSerialization.jsonObject(with: Data(floorB.body.utf8)) as? [String: Any])?["locations"] as? [[String: Any]]
        #expect(heldInB?.isEmpty ?? true, "east answers nothing of B: \(floorB.status) \(floorB.body.prefix(200))")

        // A's updates still go on; B's styles stay west's.
        try await partitions.fill(broker, building: "A", people: 0)
        try await partitions.styles(broker, building: "A", showing: "#4CAF50")
        try await partitions.styles(broker, building: "B", showing: "#4CAF50")
        let cleared = await seen.items.filter { $0.payload.isEmpty }
        #expect(cleared.isEmpty, "east cleared \(cleared.count) of B's styles, west's now")

        // Never kept: the state file the second run leaves holds A alone.
        east.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        let kept = try StateDatabase(path: eastStore).readAll().records
        #expect(kept.count == perBuilding, "\(kept.count) locations stored after the second run")
        #expect(kept.allSatisfy { $0.address.building == "A" })
        // And a third start finds nothing to drop.
        east = try await partitions.start(Self.yaml(port: broker.port, name: "east", owns: ["A"], store: eastStore), in: eastDirectory)
        #expect(try await partitions.metric(east, "livedata_locations_dropped_outside_partition") == 0)
        #expect(!east.running.standardError.contains("stored locations outside partition"))

        east.running.signal(SIGTERM)
        west.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        #expect(try await west.running.result(timeout: .seconds(15)).status == 0)
        await watcher.disconnect()
    }
}
