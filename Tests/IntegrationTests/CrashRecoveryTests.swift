import Foundation
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Synchronization
import Testing

/// Real faults against `livedata serve` and a real broker: SIGKILL of the daemon at random
/// moments, a damaged journal, a full disk, a flood (the broker killed:
/// ``BrokerCrashRecoveryTests``). Afterwards every location holds the last value published
/// for it, the broker's retained styles are what the daemon reports, and no subscriber saw a
/// version go backwards. The random values and kill times come from a seed each test prints;
/// `LIVEDATA_TEST_SEED` replays it (the kills then fall at the same delays, though what they
/// interrupt still depends on the machine's speed).
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
        let random: Mutex<SplitMix64>

        /// The people counts drawn from `seed`.
        init(seed: UInt64 = SplitMix64.testSeed("the published stream's people counts")) {
            random = Mutex(SplitMix64(seed: seed))
        }

        func payload(_ index: Int, location: Int) -> [UInt8] {
            let people = random.withLock { Int.random(in: 0...9, using: &$0) }
            last.withLock { $0[location] = people }
            // 0.1 ms apart: a million updates span 100 s, all in the past (within
            // limits.futureSkew), and one location's updates are still strictly ordered.
            return Array(#"{"timestamp": \#(base + Int64(index / 10)), "properties": {"nrOfPeople": "\#(people)", "capacity": "9"}}"#.utf8)
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
                // Held by the client while the broker is down, sent once it is back.
                try await publisher.publish(Self.topic(location), payload: payload, qos: .atLeastOnce)
            } else {
                // Refused while the broker is down: try again until it is back (the pause
                // paces the retries; nothing is awaited by it).
                while !Self.send(publisher, Self.topic(location), payload) {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            stream.published.add(1, ordering: .relaxed)
        }
        await publisher.disconnect()
    }

    static func send(_ client: MQTTClient, _ topic: String, _ payload: [UInt8]) -> Bool {
        (try? client.send(topic, payload: payload, qos: .atLeastOnce)) != nil
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
        var records: [String: [String: Any]] = [:]
        var wrong: [Int] = []
        try await eventually(
            "every location to hold the last value published; \(wrong.count) of \(locations) do not, e.g. \(wrong.prefix(5).map { "loc-\($0): \(Self.people(records["loc-\($0)"] ?? [:]).map(String.init) ?? "none") instead of \(expected[$0]!)" })",
            timeout: timeout, every: .milliseconds(250)
        ) {
            records = (try? await reported(port)) ?? [:]
            wrong = (0..<locations).filter { Self.people(records["loc-\($0)"] ?? [:]) != expected[$0] }
            return wrong.isEmpty
        }
        return records
    }

    /// Waits until every publication the daemon put in line has been acknowledged by the
    /// broker, so that a fresh subscriber sees it retained.
    /// (A broker at mosquitto's default window takes about 10,000 a second.)
    func waitForOutput(port: Int, timeout: Duration = .seconds(60)) async throws {
        try await eventually("the daemon's output to drain", timeout: timeout, every: .milliseconds(100)) {
            let text = try await LoopbackHTTP.request("GET", port: port, path: "/metrics").body
            return Self.metric(text, "livedata_output_waiting") == 0 && Self.metric(text, "livedata_output_in_flight") == 0
        }
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
    ///
    /// The records are read here, after the convergence: the restored state holds the last
    /// values before the convergence has raised versions to those a killed predecessor
    /// published (republications it had not yet saved).
    func checkConvergence(port: Int, broker: MosquittoBroker, seen: Inbox<MQTTMessage>) async throws {
        let records = try await reported(port)
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
        // A message delivered again (QoS 1 after a broker restart) is not a new version.
        var delivered = Set<[UInt8]>()
        let messages = await seen.items
        for message in messages where !message.payload.isEmpty {
            guard delivered.insert(message.payload).inserted else { continue }
            guard let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any],
                let version = object["version"] as? Int
            else { continue }
            if let before = versions[message.topic], version < before { backwards.append("\(message.topic): \(before) → \(version)") }
            versions[message.topic] = version
        }
        #expect(backwards.isEmpty, "versions went backwards: \(backwards.prefix(5))")
    }

    func watcher(_ broker: MosquittoBroker, filter: String = "livedata/style/#") async throws -> (MQTTClient, Inbox<MQTTMessage>) {
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "crash-watcher"
        configuration.cleanStart = false
        let client = try MQTTClient(configuration: configuration, logger: logger)
        let inbox = await Inbox.collecting(client.messages)
        try await client.connect()
        try await client.subscribe(filter)
        return (client, inbox)
    }

    @Test("SIGKILL of the daemon at random moments, and right after the last publish: nothing acknowledged is lost, the broker converges")
    func daemonKilled() async throws {
        let updates = Int(ProcessInfo.processInfo.environment["LIVEDATA_CRASH_UPDATES"] ?? "") ?? 100_000
        let kills = Int(ProcessInfo.processInfo.environment["LIVEDATA_CRASH_KILLS"] ?? "") ?? 10
        let locations = Int(ProcessInfo.processInfo.environment["LIVEDATA_CRASH_LOCATIONS"] ?? "") ?? Self.floors * Self.perFloor
        let broker = try await MosquittoBroker.start()
        let (watcher, seen) = try await watcher(broker)
        let daemons = DaemonTests()
        // Snapshots often enough that kills land before, during and after them.
        let snapshots = "300ms"
        var daemon = try await daemons.startDaemon(port: broker.port, snapshotInterval: snapshots)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let seed = SplitMix64.testSeed("the daemon's kill times and the stream")
        var random = SplitMix64(seed: seed)
        let stream = Stream(seed: seed &+ 1)
        let publishing = Task { try await publish(stream, count: updates, locations: locations, broker: broker) }
        var killed = 0
        while killed < kills {
            // The kill's random moment: the fault under test, not a wait for anything.
            try await Task.sleep(for: .milliseconds(Int.random(in: 200...900, using: &random)))
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
        let restarted = ContinuousClock.now
        daemon = try await daemons.startDaemon(port: broker.port, directory: daemon.directory, snapshotInterval: snapshots)
        // A correctness test, not a timing one: under a loaded machine (the whole suite on two
        // cores) the replay and the convergence take several times what they take alone.
        #expect(await daemon.notify.wait(for: "READY=1", timeout: .seconds(60)), "stderr: \(daemon.running.standardError.suffix(2_000))")
        print("crash test: ready \(ContinuousClock.now - restarted) after the last kill")
        #expect(killed >= min(kills, 3), "killed \(killed) times")

        let records = try await waitForLastValues(stream, locations: locations, port: daemon.httpPort)
        #expect(records.count == locations)
        try await waitForConvergence(daemon)
        try await waitForOutput(port: daemon.httpPort)
        try await checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)
        let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
        print("crash test: \(updates) updates, \(killed) kills; " + metrics.split(separator: "\n").filter {
            $0.hasPrefix("livedata_journal_replayed") || $0.hasPrefix("livedata_intake_queue_peak")
        }.joined(separator: "; "))
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        await watcher.disconnect()
    }

    @Test(
        "after a clean stop the start skips the read when both markers' topics show the stop's marker, and reads every style back when another marker came to either since",
        arguments: [nil, "", "/alternate"])
    func markerSinceTheStop(at suffix: String?) async throws {
        let broker = try await MosquittoBroker.start()
        let daemons = DaemonTests()
        let first = try await daemons.startDaemon(port: broker.port)
        #expect(await first.notify.wait(for: "READY=1"))
        let stream = Stream()
        try await publish(stream, count: 50, locations: 50, broker: broker)
        _ = try await waitForLastValues(stream, locations: 50, port: first.httpPort, timeout: .seconds(20))
        try await waitForOutput(port: first.httpPort)
        first.signal(SIGTERM)
        #expect(try await first.running.wait(timeout: .seconds(10)) == .exited(0))
        if let suffix {
            // What a run under the same client id leaves: a marker of its own.
            let client = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
            try await client.connect()
            try await client.publish(
                "livedata/checkpoint/daemon-test\(suffix)", text: #"{"token": "another", "sequence": 1, "locations": 50, "scope": "*"}"#,
                qos: .atLeastOnce, retain: true)
            await client.disconnect()
        }
        let second = try await daemons.startDaemon(port: broker.port, directory: first.directory)
        #expect(await second.notify.wait(for: "READY=1"))
        // READY=1 says restored and connected: the markers are read after it.
        let expected =
            suffix == nil
            ? ["the broker holds the marker of the last stop: nothing to converge"]
            : ["the broker does not hold the marker of the last stop: converging", "converged with the broker: "]
        let other = suffix == nil ? "the broker does not hold the marker" : "the broker holds the marker"
        try await eventually("the start's marker check logged") {
            let log = second.running.standardError
            return expected.allSatisfy { log.contains($0) } || log.contains(other)
        }
        let log = second.running.standardError
        #expect(
            expected.allSatisfy { log.contains($0) },
            "first run: \(Self.notDebug(first.running.standardError))\nsecond run: \(Self.notDebug(log))")
        second.signal(SIGTERM)
        _ = try await second.running.wait(timeout: .seconds(10))
    }

    /// A daemon's log without its debug lines, for a failure's message.
    static func notDebug(_ log: String) -> String {
        log.split(separator: "\n").filter { !$0.hasPrefix("debug ") }.suffix(40).joined(separator: "\n")
    }

    /// The start of both lines a reconnection to a broker that kept the daemon's session logs:
    /// the marker held, or a full read follows.
    static let sessionResumed = "the broker resumed the session"

    /// How many times the daemon found its session at a broker after a reconnection.
    func checks(_ daemon: DaemonTests.Daemon) -> Int {
        daemon.running.standardError.components(separatedBy: Self.sessionResumed).count - 1
    }

    @Test("a torn journal tail and a corrupt record in the middle: the start succeeds, counts them, and loses nothing else")
    func damagedJournal() async throws {
        let broker = try await MosquittoBroker.start()
        let daemons = DaemonTests()
        let first = try await daemons.startDaemon(port: broker.port)
        #expect(await first.notify.wait(for: "READY=1"))
        let stream = Stream()
        try await publish(stream, count: 50, locations: 50, broker: broker)
        _ = try await waitForLastValues(stream, locations: 50, port: first.httpPort, timeout: .seconds(20))
        // Killed before its first snapshot (every 5 s): the journal holds all 50.
        first.signal(SIGKILL)
        _ = try await first.running.wait(timeout: .seconds(10))
        let folder = first.storePath + ".journal"
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: folder).first { $0.hasSuffix(".journal") })
        let path = "\(folder)/\(segment)"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        var starts: [Int] = []
        var offset = 0
        while offset + 8 <= bytes.count {
            starts.append(offset)
            offset += 8 + Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16
        }
        #expect(starts.count == 50)
        bytes[starts[10] + 30] ^= 0xFF  // inside the 11th record's body: its checksum fails
        bytes.removeLast(bytes.count - (starts[49] + 12))  // the last record cut short
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let second = try await daemons.startDaemon(port: broker.port, directory: first.directory)
        #expect(await second.notify.wait(for: "READY=1"), "\(second.running.standardError.suffix(2000))")
        #expect(second.running.standardError.contains("replayed 48 journaled updates; skipped 1 corrupt records; dropped an incomplete last record"))
        let metrics = try await LoopbackHTTP.request("GET", port: second.httpPort, path: "/metrics").body
        #expect(metrics.contains("livedata_journal_corrupt_records 1"))
        #expect(metrics.contains("livedata_journal_replayed_records 48"))
        let records = try await reported(second.httpPort)
        let expected = stream.last.withLock { $0 }
        #expect(records.count == 48)
        for location in 0..<50 where location != 10 && location != 49 {
            #expect(Self.people(records["loc-\(location)"] ?? [:]) == expected[location], "loc-\(location)")
        }
        second.signal(SIGTERM)
        _ = try await second.running.wait(timeout: .seconds(10))
    }

    @Test("a state directory on a small tmpfs that fills up: no crash, readiness says why, nothing lost once space is freed")
    func fullDisk() async throws {
        let directory = try TestDirectory.make(prefix: "full-disk")
        // A real full disk: a 4 MiB tmpfs (the test runs as root, as the CI does; it fails,
        // not skips, where it cannot mount).
        #expect(mount("tmpfs", directory.path, "tmpfs", 0, "size=4m") == 0, "cannot mount a tmpfs: \(String(cString: strerror(errno)))")
        defer { umount2(directory.path, Int32(MNT_DETACH)) }
        let broker = try await MosquittoBroker.start()
        let daemon = try await DaemonTests().startDaemon(port: broker.port, directory: directory, snapshotInterval: "200ms")
        #expect(await daemon.notify.wait(for: "READY=1"))
        let stream = Stream()
        try await publish(stream, count: 20, locations: 20, broker: broker)
        _ = try await waitForLastValues(stream, locations: 20, port: daemon.httpPort, timeout: .seconds(20))

        // Fill the disk.
        let filler = directory.appendingPathComponent("filler").path
        let descriptor = open(filler, O_WRONLY | O_CREAT, 0o600)
        let block = [UInt8](repeating: 0, count: 65_536)
        while block.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        close(descriptor)
        // Updates now cannot be journaled: the daemon holds them, unacknowledged, and says why.
        try await publish(stream, count: 40, locations: 20, broker: broker)
        // A snapshot may find the disk full before the journal does, and /readyz then names
        // the state file; the journal's failure, once it comes, is the one it names.
        let readiness = try await eventually(
            "/readyz to answer 503 for the journal", every: .milliseconds(100),
            observing: { try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/readyz") },
            until: { $0.status == 503 && $0.body.contains("No space left on device") })
        #expect(readiness.body.contains("cannot write") && readiness.body.contains("No space left on device"), "\(readiness.body)")
        let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
        #expect(metrics.contains(#"livedata_storage_failures_total{reason="journal"}"#))
        #expect(daemon.running.isRunning)

        // Space again: everything published meanwhile arrives, and readiness comes back.
        unlink(filler)
        _ = try await waitForLastValues(stream, locations: 20, port: daemon.httpPort, timeout: .seconds(30))
        try await eventually(
            "/readyz to answer 200 again", every: .milliseconds(100),
            observing: { try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/readyz") }, until: { $0.status == 200 })
        #expect(daemon.running.standardError.contains("the intake journal is writable again"))
        daemon.signal(SIGTERM)
        #expect(try await daemon.running.wait(timeout: .seconds(10)) == .exited(0))
    }

    @Test("a flood faster than the pipeline: the intake queue stays within limits.queue, the broker holds the rest, nothing is lost")
    func flood() async throws {
        let updates = Int(ProcessInfo.processInfo.environment["LIVEDATA_FLOOD_UPDATES"] ?? "") ?? 60_000
        let locations = Int(ProcessInfo.processInfo.environment["LIVEDATA_FLOOD_LOCATIONS"] ?? "") ?? 20_000
        let broker = try await MosquittoBroker.start(MosquittoBroker.Options(extra: ["max_queued_messages 1000000"]))
        let yaml = """
            subscriptions: [{dataset: ds1, domain: occupancy}]
            rules:
              - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545", label: "{nrOfPeople}/{capacity}"}}
            limits: {queue: 500, queueBytes: 1048576}
            """
        let daemon = try await DaemonTests().startDaemon(port: broker.port, yaml: yaml)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let stream = Stream()
        let started = ContinuousClock.now
        try await publish(stream, count: updates, locations: locations, broker: broker)
        let published = ContinuousClock.now - started
        // The last value of every location, over the floors endpoint of each floor.
        let expected = stream.last.withLock { $0 }
        /// The locations without their last value, once every update was taken (nil before).
        func missing() async throws -> Int? {
            let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
            guard metrics.contains("livedata_intake_queue_depth 0"), let applied = Self.metric(metrics, "livedata_updates_received_total"),
                applied >= Double(updates)
            else { return nil }
            var records: [String: [String: Any]] = [:]
            for floor in 0..<Self.floors {
                let response = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/v1/floors/ds1/hq/B/F\(floor)")
                let object = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any]
                for record in object?["locations"] as? [[String: Any]] ?? [] {
                    if let id = record["location"] as? String { records[id] = record }
                }
            }
            return (0..<locations).filter { Self.people(records["loc-\($0)"] ?? [:]) != expected[$0] }.count
        }
        try await eventually(
            "every location's last value (observed: the locations without it, nil while updates are still queued)",
            timeout: .seconds(120), every: .milliseconds(500), observing: missing, until: { $0 == 0 })
        let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
        let peak = Self.metric(metrics, "livedata_intake_queue_peak") ?? -1
        let blocked = Self.metric(metrics, "livedata_intake_blocked_milliseconds_total") ?? -1
        #expect(peak <= 500 && peak > 0, "queue peak \(peak)")
        let status = try String(contentsOfFile: "/proc/\(daemon.running.processIdentifier)/status", encoding: .utf8)
        let peakResident = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.map(String.init) ?? "?"
        print("flood: \(updates) updates over \(locations) locations published in \(published); queue peak \(Int(peak)), network thread blocked \(Int(blocked)) ms; daemon \(peakResident)")
        // The bound: the state (under 2 KiB a location, in a debug build) and a fixed 96 MiB
        // for the rest (the runtime, the queue's limits.queueBytes and the HTTP server),
        // whatever the rate; an unbounded hand-off would grow with the input instead.
        let kilobytes = peakResident.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) } ?? .max
        #expect(kilobytes < 96 * 1024 + 2 * locations, "peak resident \(peakResident) for \(locations) locations")
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(10))
    }

    static func metric(_ text: String, _ name: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// Waits until a convergence has finished after the last connection the daemon made
    /// (its own or its retained reader's): after a start, the first one; after broker
    /// restarts, the one that followed them all (two restarts may fall into one reconnection
    /// delay, so their number is not the number of convergences). A reconnection to a broker
    /// that resumed the session and holds the last acknowledged marker needs no read: the
    /// daemon sends again what followed the marker, and that is its convergence.
    func waitForConvergence(_ daemon: DaemonTests.Daemon) async throws {
        func finished() -> Bool {
            let log = daemon.running.standardError
            let ends = ["converged with the broker", "holds the last marker"].compactMap { log.range(of: $0, options: .backwards) }
            guard let converged = ends.max(by: { $0.lowerBound < $1.lowerBound }) else { return false }
            guard let connected = log.range(of: "connected to the MQTT broker", options: .backwards) else { return true }
            return converged.lowerBound > connected.lowerBound
        }
        try await eventually(
            "a convergence finished after the last connection:\n\(daemon.running.standardError.suffix(3000))", timeout: .seconds(60),
            every: .milliseconds(100), finished)
    }
}
