import Foundation
import LiveDataTestSupport
import LiveStatePersistence
import Mosquitto
import Synchronization
import Testing

/// What the record of cleared topics (`partition.bridge`) costs at scale: the state file's
/// size and write time for that many clears, and a daemon that starts with them recorded
/// and its bridge up publishing every one again, each to reach the central broker. The
/// suite runs it at 20,000 clears; `LIVEDATA_BRIDGE_CLEARS=1000000` with a release daemon
/// (`LIVEDATA_EXECUTABLE`) gives the figures in docs/performance.md.
@Suite("Cleared topics for a bridge, at scale", .timeLimit(.minutes(20)))
struct BridgeClearsScaleTests {
    let partitions = PartitionedDaemonsTests()
    static let clears = ProcessInfo.processInfo.environment["LIVEDATA_BRIDGE_CLEARS"].flatMap { Int($0) } ?? 20_000

    static func topic(_ index: Int) -> String {
        "livedata/style/ds1/hq/Z/F\(index % 50)/R\(index % 1000)/gone-\(index)"
    }

    /// Counts the clears (empty payloads) a subscriber gets; when it had `expected`.
    final class ClearCounter: Sendable {
        let state = Mutex<(count: Int, last: ContinuousClock.Instant?)>((0, nil))
        var count: Int { state.withLock { $0.count } }
        var last: ContinuousClock.Instant? { state.withLock { $0.last } }
    }

    func fileSize(_ path: String) -> Int {
        ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
    }

    func peakResident(_ daemon: PartitionedDaemonsTests.Daemon) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(daemon.running.processIdentifier)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) } ?? -1
    }

    @Test("a start with every clear recorded and the bridge up publishes each again, and each reaches the central broker")
    func republishAtScale() async throws {
        let count = Self.clears
        let central = try await MosquittoBroker.start(.init(extra: ["max_queued_messages 0"]))
        defer { Task { await central.stop() } }
        let bridge = MosquittoBroker.Bridge(
            name: "central", remotePort: central.port, remoteClientID: "edge-z", topics: BridgedBrokersTests.outTopics)
        let edge = try await MosquittoBroker.start(.init(extra: ["max_queued_messages 0"], bridges: [bridge]))
        defer { Task { await edge.stop() } }
        try await eventually("the bridge up", timeout: .seconds(20)) {
            try await partitions.retained(central, "$SYS/broker/connection/+/state")[bridge.stateTopic] == "1"
        }

        // The state file, as the snapshots leave it after `count` clears.
        let directory = try TestDirectory.make(prefix: "bridge-scale")
        let store = directory.appendingPathComponent("state.db").path
        let emptySize: Int
        let recordTime: Duration
        let pruneScan: Duration
        do {
            let database = try StateDatabase(path: store)
            emptySize = fileSize(store)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var topics: [String: Int64] = [:]
            topics.reserveCapacity(count)
            for index in 0..<count { topics[Self.topic(index)] = now }
            recordTime = try ContinuousClock().measure { try database.recordCleared(topics) }
            // What a prune that finds nothing past the horizon costs: a read of the table.
            var pruned = -1
            pruneScan = try ContinuousClock().measure { pruned = try database.forgetCleared(before: 0) }
            #expect(pruned == 0)
            #expect(try database.countCleared() == count)
        }
        let recordedSize = fileSize(store) - emptySize

        let watcher = try MQTTClient(configuration: .test(port: central.port), logger: partitions.logger)
        let counter = ClearCounter()
        let counting = Task {
            for await message in watcher.messages where message.payload.isEmpty {
                counter.state.withLock {
                    $0.count += 1
                    $0.last = .now
                }
            }
        }
        defer { counting.cancel() }
        try await watcher.connect()
        try await watcher.subscribe("livedata/style/ds1/hq/Z/#", qos: .atLeastOnce)

        // The same daemon with nothing recorded, for its memory.
        let idleDirectory = try TestDirectory.make(prefix: "bridge-idle")
        let idle = try await partitions.start(
            BridgedBrokersTests.yaml(
                port: edge.port, name: "idle", building: "Z", store: idleDirectory.appendingPathComponent("state.db").path),
            in: idleDirectory)
        try await Task.sleep(for: .seconds(2))
        let idlePeak = try peakResident(idle)
        idle.running.signal(SIGTERM)
        #expect(try await idle.running.result(timeout: .seconds(30)).status == 0)

        let yaml = BridgedBrokersTests.yaml(port: edge.port, name: "zed", building: "Z", store: store)
        let started = ContinuousClock.now
        let daemon = try await partitions.start(yaml, in: directory)
        try await eventually(
            "every recorded clear on the central broker (\(counter.count) of \(count) so far)", timeout: .seconds(900),
            every: .milliseconds(200)
        ) { counter.count >= count }
        let reached = (counter.last ?? .now) - started
        let republished = try await partitions.metric(daemon, "livedata_bridge_clears_republished_total")
        #expect(republished == Double(count))
        let walkLine = daemon.running.standardError.split(separator: "\n").first { $0.contains("recorded clears published again") } ?? ""
        let peak = try peakResident(daemon)
        print(
            "bridge clears at \(count): state file +\(recordedSize / 1024) KiB (\(recordedSize / max(count, 1)) bytes a clear); recorded in one transaction in \(recordTime); a prune's read of the table \(pruneScan); start to the last clear on the central broker \(reached); daemon peak resident \(peak) KiB (with nothing recorded \(idlePeak) KiB); \(walkLine)"
        )
        await watcher.disconnect()
        daemon.running.signal(SIGTERM)
        #expect(try await daemon.running.result(timeout: .seconds(30)).status == 0)
    }
}
