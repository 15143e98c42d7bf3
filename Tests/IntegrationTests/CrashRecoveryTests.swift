import Foundation
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Synchronization
import Testing

/// Real faults against `livedata serve` and a real broker: SIGKILL of the daemon at random
/// moments, SIGKILL of the broker. Afterwards every location holds the last value published
/// for it, the broker's retained styles are what the daemon reports, and no subscriber saw a
/// version go backwards.
@Suite("Crash recovery", .timeLimit(.minutes(5)), .serialized)
struct CrashRecoveryTests {
    let logger = Logger(label: "test")
    static let floors = 5
    static let perFloor = 100

    static func topic(_ location: Int) -> String {
        "ds1/hq/B/F\(location % floors)/R\(location % 10)/loc-\(location)/occupancy"
    }

    /// The published stream: `updates` updates round-robin over the locations, each with a
    /// later timestamp than the one before; the last value per location is remembered.
    final class Stream: Sendable {
        let last = Mutex<[Int: Int]>([:])
        let published = Atomic<Int>(0)
        let base = Int64(Date().timeIntervalSince1970 * 1000) - 200_000

        func payload(_ index: Int, location: Int) -> [UInt8] {
            let people = Int.random(in: 0...9)
            last.withLock { $0[location] = people }
            return Array(#"{"timestamp": \#(base + Int64(index)), "properties": {"nrOfPeople": "\#(people)", "capacity": "9"}}"#.utf8)
        }
    }

    /// Publishes `count` updates over `locations` at QoS 1, in windows of 500 (each window
    /// ends with a publish whose acknowledgement is awaited).
    func publish(_ stream: Stream, count: Int, locations: Int, broker: MosquittoBroker) async throws {
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "crash-publisher"
        let publisher = try MQTTClient(configuration: configuration, logger: logger)
        try await publisher.connect()
        for index in 0..<count {
            let location = index % locations
            let payload = stream.payload(index, location: location)
            if index % 500 == 499 || index == count - 1 {
                try await publisher.publish(Self.topic(location), payload: payload, qos: .atLeastOnce)
            } else {
                try publisher.send(Self.topic(location), payload: payload, qos: .atLeastOnce)
            }
            stream.published.add(1, ordering: .relaxed)
        }
        await publisher.disconnect()
    }

    /// Every location's `nrOfPeople` and the record as the daemon reports it over HTTP.
    func reported(_ port: Int) async throws -> [String: [String: Any]] {
        var records: [String: [String: Any]] = [:]
        for floor in 0..<Self.floors {
            let response = try await LoopbackHTTP.request("GET", port: port, path: "/v1/floors/ds1/hq/B/F\(floor)")
            let object = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any]
            for record in object?["locations"] as? [[String: Any]] ?? [] {
                if let id = record["location"] as? String { records[id] = record }
            }
        }
        return records
    }

    static func people(_ record: [String: Any]) -> Int? {
        let text = ((record["live"] as? [String: Any])?["occupancy"] as? [String: Any])?["nrOfPeople"] as? String
        return text.flatMap { Int($0) }
    }

    /// Waits until the daemon reports the last published value for every location.
    func waitForLastValues(_ stream: Stream, locations: Int, port: Int, timeout: Duration = .seconds(90)) async throws -> [String: [String: Any]] {
        let expected = stream.last.withLock { $0 }
        let deadline = ContinuousClock.now + timeout
        var records: [String: [String: Any]] = [:]
        while ContinuousClock.now < deadline {
            records = (try? await reported(port)) ?? [:]
            let wrong = (0..<locations).filter { Self.people(records["loc-\($0)"] ?? [:]) != expected[$0] }
            if wrong.isEmpty { return records }
            try await Task.sleep(for: .milliseconds(250))
        }
        let wrong = (0..<locations).filter { Self.people(records["loc-\($0)"] ?? [:]) != expected[$0] }
        Issue.record("\(wrong.count) of \(locations) locations do not hold the last value published, e.g. \(wrong.prefix(5).map { "loc-\($0): \(Self.people(records["loc-\($0)"] ?? [:]).map(String.init) ?? "none") instead of \(expected[$0]!)" })")
        return records
    }

    /// The retained styles as a fresh subscriber gets them, by location id.
    func retainedStyles(_ broker: MosquittoBroker) async throws -> [String: [String: Any]] {
        let reader = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        let inbox = await Inbox.collecting(reader.messages)
        try await reader.connect()
        try await reader.subscribe("livedata/style/#")
        try await reader.subscribe("crash-test/marker")
        try await reader.publish("crash-test/marker", text: "end", qos: .atLeastOnce)
        _ = await inbox.wait(timeout: .seconds(30)) { $0.contains { $0.topic == "crash-test/marker" } }
        await reader.disconnect()
        var styles: [String: [String: Any]] = [:]
        for message in await inbox.items where message.retain && !message.payload.isEmpty {
            guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                let id = object["location"] as? String
            else { continue }
            styles[id] = object
        }
        return styles
    }

    /// The three checks: last values (done by the caller), retained styles equal to the
    /// daemon's records, and no version going backwards in `seen`.
    func checkConvergence(_ records: [String: [String: Any]], broker: MosquittoBroker, seen: Inbox<MQTTMessage>) async throws {
        let retained = try await retainedStyles(broker)
        #expect(retained.count == records.count, "retained styles for \(retained.count) locations, the daemon tracks \(records.count)")
        var disagreeing: [String] = []
        for (id, record) in records {
            let style = retained[id]
            if NSDictionary(dictionary: style?["style"] as? [String: Any] ?? [:]) != NSDictionary(dictionary: record["style"] as? [String: Any] ?? [:])
                || style?["version"] as? Int != record["version"] as? Int
            {
                disagreeing.append(id)
            }
        }
        #expect(
            disagreeing.isEmpty,
            "\(disagreeing.count) retained styles differ from the daemon's, e.g. \(disagreeing.prefix(2).map { "\($0): retained \(retained[$0].map { "\($0["style"]!) v\($0["version"]!)" } ?? "none"), daemon \(records[$0]!["style"]!) v\(records[$0]!["version"]!)" })")
        var versions: [String: Int] = [:]
        var backwards: [String] = []
        for message in await seen.items where !message.payload.isEmpty {
            guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                let version = object["version"] as? Int
            else { continue }
            if let before = versions[message.topic], version < before { backwards.append("\(message.topic): \(before) → \(version)") }
            versions[message.topic] = version
        }
        #expect(backwards.isEmpty, "versions went backwards: \(backwards.prefix(5))")
    }

    func watcher(_ broker: MosquittoBroker) async throws -> (MQTTClient, Inbox<MQTTMessage>) {
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "crash-watcher"
        configuration.cleanStart = false
        let client = try MQTTClient(configuration: configuration, logger: logger)
        let inbox = await Inbox.collecting(client.messages)
        try await client.connect()
        try await client.subscribe("livedata/style/#")
        return (client, inbox)
    }

    @Test("SIGKILL of the daemon at random moments, and right after the last publish: nothing acknowledged is lost, the broker converges")
    func daemonKilled() async throws {
        let updates = Int(ProcessInfo.processInfo.environment["LIVEDATA_CRASH_UPDATES"] ?? "") ?? 100_000
        let kills = Int(ProcessInfo.processInfo.environment["LIVEDATA_CRASH_KILLS"] ?? "") ?? 10
        let locations = Self.floors * Self.perFloor
        let broker = try await MosquittoBroker.start()
        let (watcher, seen) = try await watcher(broker)
        let daemons = DaemonTests()
        // Snapshots often enough that kills land before, during and after them.
        let snapshots = "300ms"
        var daemon = try await daemons.startDaemon(port: broker.port, snapshotInterval: snapshots)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let stream = Stream()
        let publishing = Task { try await publish(stream, count: updates, locations: locations, broker: broker) }
        var killed = 0
        while killed < kills {
            try await Task.sleep(for: .milliseconds(Int.random(in: 200...900)))
            if stream.published.load(ordering: .relaxed) >= updates { break }
            daemon.signal(SIGKILL)
            _ = try await daemon.running.wait(timeout: .seconds(10))
            killed += 1
            daemon = try await daemons.startDaemon(port: broker.port, directory: daemon.directory, snapshotInterval: snapshots)
        }
        try await publishing.value
        // Once more, right after the publisher's last acknowledged message.
        daemon.signal(SIGKILL)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        killed += 1
        daemon = try await daemons.startDaemon(port: broker.port, directory: daemon.directory, snapshotInterval: snapshots)
        #expect(await daemon.notify.wait(for: "READY=1"))
        #expect(killed >= min(kills, 3), "killed \(killed) times")

        let records = try await waitForLastValues(stream, locations: locations, port: daemon.httpPort)
        #expect(records.count == locations)
        try await waitForConvergence(daemon)
        // What the last changes published is on its way to the broker.
        try await Task.sleep(for: .seconds(1))
        try await checkConvergence(records, broker: broker, seen: seen)
        let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
        print("crash test: \(updates) updates, \(killed) kills; " + metrics.split(separator: "\n").filter {
            $0.hasPrefix("livedata_journal_replayed") || $0.hasPrefix("livedata_intake_queue_peak")
        }.joined(separator: "; "))
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        await watcher.disconnect()
    }

    /// Waits until the daemon has logged a finished convergence since it started.
    func waitForConvergence(_ daemon: DaemonTests.Daemon) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if daemon.running.standardError.contains("converged with the broker") { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("no convergence finished:\n\(daemon.running.standardError.suffix(3000))")
    }
}
