import Foundation
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Testing

/// Two daemons on one broker and one prefix, each owning a building of its own.
@Suite("Two partitions on one broker", .timeLimit(.minutes(5)))
struct PartitionedDaemonsTests {
    let logger = Logger(label: "test")
    static let perBuilding = 150

    /// A daemon's config: `owns` is the building it owns, `nil` for no partition at all.
    /// `bridge`: the `partition.bridge` to watch, if any.
    static func yaml(port: Int, name: String, owns building: String?, store: String, vacant: String = "#4CAF50", bridge: String? = nil)
        -> String
    {
        let partition =
            building.map {
                """
                instance: \(name)-1
                partition:
                  name: \(name)
                  owns:
                    - {dataset: ds1, venue: hq, building: \($0)}
                \(bridge.map { "  bridge: \($0)\n" } ?? "")
                """
            } ?? ""
        return partition + """
            broker: {host: 127.0.0.1, port: \(port), clientId: \(name), keepalive: 5s}
            subscriptions:
              - {dataset: ds1, domain: occupancy}
              - {dataset: ds1, domain: position}
            rules:
              - name: occupied
                domain: occupancy
                when: nrOfPeople > 0
                style: {polygonFillColor: "#D64545"}
                legend: Occupied
              - name: vacant
                domain: occupancy
                when: nrOfPeople == 0
                style: {polygonFillColor: "\(vacant)"}
                legend: Vacant
            store: {path: \(store)}
            http: {listen: "127.0.0.1:0"}
            """
    }

    typealias Daemon = DaemonTests.Daemon

    func start(_ yaml: String, in directory: URL? = nil) async throws -> Daemon {
        let directory = try directory ?? TestDirectory.make(prefix: "partition")
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await CommandRunner().start(["serve", "--config", configPath], environment: ["NOTIFY_SOCKET": notify.path])
        let port = try await DaemonTests.listeningPort(running)
        #expect(await notify.wait(for: "READY=1"), "\(running.standardError.suffix(3000))")
        return Daemon(running: running, notify: notify, directory: directory, httpPort: port)
    }

    func metric(_ daemon: Daemon, _ name: String) async throws -> Double {
        CrashRecoveryTests.metric(try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body, name) ?? 0
    }

    /// Every retained message under `filter`, as a fresh subscriber gets them: topic → payload.
    func retained(_ broker: MosquittoBroker, _ filter: String) async throws -> [String: String] {
        let reader = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        let inbox = await Inbox.collecting(reader.messages)
        try await reader.connect()
        try await reader.subscribe(filter)
        try await reader.subscribe("partition-test/end")
        try await reader.publish("partition-test/end", text: "end", qos: .atLeastOnce)
        _ = await inbox.wait(timeout: .seconds(30)) { $0.contains { $0.topic == "partition-test/end" } }
        await reader.disconnect()
        var found: [String: String] = [:]
        for message in await inbox.items where message.retain && !message.payload.isEmpty {
            found[message.topic] = String(decoding: message.payload, as: UTF8.self)
        }
        return found
    }

    /// One occupancy update per location of a building, QoS 1.
    func fill(_ broker: MosquittoBroker, building: String, people: Int) async throws {
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        for index in 0..<Self.perBuilding {
            try await publisher.publish(
                "ds1/hq/\(building)/F1/R\(index)/\(building.lowercased())-\(index)/occupancy",
                text: #"{"properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#, qos: .atLeastOnce)
        }
        await publisher.disconnect()
    }

    func styles(_ broker: MosquittoBroker, building: String, showing color: String) async throws {
        try await eventually("building \(building)'s \(Self.perBuilding) styles at the broker, \(color)", timeout: .seconds(30)) {
            let styles = try await retained(broker, "livedata/style/ds1/hq/\(building)/#")
            return styles.count == Self.perBuilding && styles.values.allSatisfy { $0.contains(color) }
        }
    }

    @Test(
        "each takes, publishes and converges only its own building; a restart or a crash of one leaves the other's styles, summaries and status alone"
    )
    func twoPartitions() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let eastDirectory = try TestDirectory.make(prefix: "east")
        let eastStore = eastDirectory.appendingPathComponent("state.db").path
        var east = try await start(Self.yaml(port: broker.port, name: "east", owns: "A", store: eastStore), in: eastDirectory)
        let westDirectory = try TestDirectory.make(prefix: "west")
        let west = try await start(
            Self.yaml(port: broker.port, name: "west", owns: "B", store: westDirectory.appendingPathComponent("state.db").path),
            in: westDirectory)

        // The other building's clearings, watched for from here on: there must be none.
        let watcher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        let seen = await Inbox.collecting(watcher.messages)
        try await watcher.connect()
        try await watcher.subscribe("livedata/style/ds1/hq/B/#")
        try await watcher.subscribe("livedata/summary/ds1/hq/B/#")

        try await fill(broker, building: "A", people: 2)
        try await fill(broker, building: "B", people: 0)
        try await styles(broker, building: "A", showing: "#D64545")
        try await styles(broker, building: "B", showing: "#4CAF50")
        #expect(try await metric(east, "livedata_locations_tracked") == Double(Self.perBuilding))
        #expect(try await metric(west, "livedata_locations_tracked") == Double(Self.perBuilding))
        let statuses = try await retained(broker, "livedata/status/#")
        #expect(statuses == ["livedata/status/east-1": "online", "livedata/status/west-1": "online"])
        // The same rules: one legend, and no daemon sees the other's as a conflict.
        #expect(try await retained(broker, "livedata/legend/#").count == 1)
        #expect(try await metric(east, "livedata_legend_conflicts_total") == 0)
        #expect(try await metric(west, "livedata_legend_conflicts_total") == 0)

        // A clean restart of east, then a crash and a start with its full convergence.
        east.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        east = try await start(Self.yaml(port: broker.port, name: "east", owns: "A", store: eastStore), in: eastDirectory)
        east.running.signal(SIGKILL)
        _ = try await east.running.wait(timeout: .seconds(10))
        try await eventually("east's will: offline at its own status topic", timeout: .seconds(20)) {
            try await retained(broker, "livedata/status/#")["livedata/status/east-1"] == "offline"
        }
        #expect(try await retained(broker, "livedata/status/#")["livedata/status/west-1"] == "online", "one dying marks only itself offline")
        east = try await start(Self.yaml(port: broker.port, name: "east", owns: "A", store: eastStore), in: eastDirectory)
        #expect(try await metric(east, #"livedata_convergences_total{outcome="finished"}"#) >= 1, "the crash called for a full read")
        try await styles(broker, building: "A", showing: "#D64545")
        try await styles(broker, building: "B", showing: "#4CAF50")
        let clearings = await seen.items.filter { $0.payload.isEmpty }
        #expect(clearings.isEmpty, "east cleared \(clearings.count) of west's retained messages: \(clearings.prefix(3).map(\.topic))")
        #expect(try await retained(broker, "livedata/summary/ds1/hq/B/#").count == 2, "west's building and floor summaries")

        east.running.signal(SIGTERM)
        west.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        #expect(try await west.running.result(timeout: .seconds(15)).status == 0)
        await watcher.disconnect()
    }

    @Test(
        "an update of another partition's building that still reaches a daemon (its session from a run without a partition) is refused as outside_partition, counted, and not taken"
    )
    func outsidePartition() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "east")
        let store = directory.appendingPathComponent("state.db").path
        // A run without a partition subscribes to the whole dataset; the broker keeps that
        // subscription in the daemon's session.
        var east = try await start(Self.yaml(port: broker.port, name: "east", owns: nil, store: store), in: directory)
        east.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        east = try await start(Self.yaml(port: broker.port, name: "east", owns: "A", store: store), in: directory)
        try await fill(broker, building: "B", people: 1)
        try await fill(broker, building: "A", people: 1)
        try await styles(broker, building: "A", showing: "#D64545")
        let refused = try await eventually(
            "every update of building B refused", timeout: .seconds(20),
            observing: { try await metric(east, #"livedata_updates_rejected_total{reason="outside_partition"}"#) },
            until: { $0 >= Double(Self.perBuilding) })
        #expect(refused == Double(Self.perBuilding))
        #expect(try await metric(east, "livedata_locations_tracked") == Double(Self.perBuilding))
        #expect(try await retained(broker, "livedata/style/ds1/hq/B/#").isEmpty)
        east.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
    }

    @Test("two daemons whose rules give one dataset different legends: a warning and a metric, not a silent overwrite")
    func legendConflict() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let east = try await start(
            Self.yaml(port: broker.port, name: "east", owns: "A", store: try TestDirectory.make(prefix: "east").appendingPathComponent("state.db").path))
        try await eventually("east's legend retained", timeout: .seconds(10)) {
            try await retained(broker, "livedata/legend/#").count == 1
        }
        let west = try await start(
            Self.yaml(
                port: broker.port, name: "west", owns: "B",
                store: try TestDirectory.make(prefix: "west").appendingPathComponent("state.db").path, vacant: "#2196F3"))
        #expect(try await metric(west, "livedata_legend_conflicts_total") == 1)
        #expect(west.running.standardError.contains("the legend retained for dataset ds1 differs from this daemon's"))
        east.running.signal(SIGTERM)
        west.running.signal(SIGTERM)
        _ = try await east.running.result(timeout: .seconds(15))
        _ = try await west.running.result(timeout: .seconds(15))
    }

    @Test(
        "an asset that moves into the other partition's building is handed over: the new owner publishes it, the old one clears its old style; and back again"
    )
    func handOver() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let east = try await start(
            Self.yaml(port: broker.port, name: "east", owns: "A", store: try TestDirectory.make(prefix: "east").appendingPathComponent("state.db").path))
        let west = try await start(
            Self.yaml(port: broker.port, name: "west", owns: "B", store: try TestDirectory.make(prefix: "west").appendingPathComponent("state.db").path))
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        let start = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
        func position(_ path: String, at offset: Int64) async throws {
            try await publisher.publish(
                "ds1/hq/\(path)/asset-1/position",
                text: #"{"timestamp": \#(start + offset), "properties": {"latitude": "55.1", "longitude": "12.1", "floorIndex": "1"}}"#,
                qos: .atLeastOnce)
        }
        func where_() async throws -> [String] {
            try await retained(broker, "livedata/style/#").keys.filter { $0.hasSuffix("/asset-1") }.sorted()
        }
        try await position("A/F1/R1", at: 0)
        try await eventually("the asset's style in building A", timeout: .seconds(15)) {
            try await where_() == ["livedata/style/ds1/hq/A/F1/R1/asset-1"]
        }
        try await position("B/F2/R3", at: 1_000)
        try await eventually("the asset's style in building B only", timeout: .seconds(15)) {
            try await where_() == ["livedata/style/ds1/hq/B/F2/R3/asset-1"]
        }
        #expect(try await metric(east, "livedata_locations_handed_over_total") == 1)
        #expect(try await metric(west, "livedata_locations_handed_over_total") == 0)
        try await position("A/F1/R2", at: 2_000)
        try await eventually("the asset back in building A only", timeout: .seconds(15)) {
            try await where_() == ["livedata/style/ds1/hq/A/F1/R2/asset-1"]
        }
        #expect(try await metric(west, "livedata_locations_handed_over_total") == 1)
        await publisher.disconnect()
        east.running.signal(SIGTERM)
        west.running.signal(SIGTERM)
        #expect(try await east.running.result(timeout: .seconds(15)).status == 0)
        #expect(try await west.running.result(timeout: .seconds(15)).status == 0)
    }
}
