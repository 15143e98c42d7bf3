import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Synchronization
import Testing

/// Replicas of one partition (`partition.failover`) as real processes on a real broker: the
/// active killed, killed again; the broker restarted; a replica that starts with nothing.
/// The hand-overs without a crash and the state copy: ``FailoverHandOverTests``; the active
/// cut off: ``FailoverCutTests``.
@Suite("Failover: a standby takes the partition over", .serialized, .timeLimit(.minutes(5)))
struct FailoverTests {
    let logger = Logger(label: "test")
    static let locations = 200
    static let keepalive = 5
    /// The issue's bound: a standby publishes within 2 × keepalive + 1 s of the active's death.
    static let takeoverBound = Duration.seconds(2 * keepalive + 1)

    static func yaml(
        port: Int, instance: String, store: String, peers: [Int] = [], brokerHost: String = "127.0.0.1", httpHost: String = "127.0.0.1"
    ) -> String {
        let peerList = peers.isEmpty ? "" : "  peers: [" + peers.map { "\"http://127.0.0.1:\($0)\"" }.joined(separator: ", ") + "]\n"
        return """
            instance: \(instance)
            partition:
              name: east
              owns:
                - {dataset: ds1, venue: hq}
              failover: true
            \(peerList)broker: {host: \(brokerHost), port: \(port), clientId: \(instance), keepalive: \(keepalive)s}
            subscriptions:
              - {dataset: ds1, domain: occupancy}
            rules:
              - name: occupied
                domain: occupancy
                when: nrOfPeople > 0
                style: {polygonFillColor: "#D64545", label: "{nrOfPeople}/{capacity}"}
                legend: Occupied
              - name: vacant
                domain: occupancy
                when: nrOfPeople == 0
                style: {polygonFillColor: "#4CAF50", label: "{nrOfPeople}/{capacity}"}
                legend: Vacant
            store: {path: \(store)}
            http: {listen: "\(httpHost):0", token: sesame}
            """
    }

    final class Replica: Sendable {
        let name: String
        let running: ChildProcess
        let httpPort: Int
        /// Where its HTTP server listens: loopback, or its network namespace's address.
        let httpHost: String
        let notify: NotifySocket?
        init(name: String, running: ChildProcess, httpPort: Int, httpHost: String = "127.0.0.1", notify: NotifySocket? = nil) {
            self.name = name
            self.running = running
            self.httpPort = httpPort
            self.httpHost = httpHost
            self.notify = notify
        }

        /// Whether a `STATUS=` line sent to systemd so far starts with `prefix`.
        func saidStatus(startingWith prefix: String) -> Bool {
            notify?.messages.contains { $0.split(separator: "\n").contains { $0.hasPrefix("STATUS=" + prefix) } } ?? false
        }
    }

    func start(_ name: String, broker: MosquittoBroker, peers: [Int] = [], directory: URL? = nil) async throws -> Replica {
        let directory = try directory ?? TestDirectory.make(prefix: "replica-\(name)")
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try Self.yaml(port: broker.port, instance: name, store: directory.appendingPathComponent("state.db").path, peers: peers)
            .write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await CommandRunner().start(["serve", "--config", configPath], environment: ["NOTIFY_SOCKET": notify.path])
        let port = try await DaemonTests.listeningPort(running)
        #expect(await notify.wait(for: "READY=1", timeout: .seconds(60)), "\(name): \(running.standardError.suffix(3000))")
        return Replica(name: name, running: running, httpPort: port, notify: notify)
    }

    /// A replica's `/readyz` replica block: role and epoch.
    func role(_ replica: Replica) async -> (role: String, epoch: Int)? {
        if case .success(let role) = await roleOrWhyNot(replica) { return role }
        return nil
    }

    /// ``role(_:)``, or why there is none (for a failure's message).
    func roleOrWhyNot(_ replica: Replica) async -> Result<(role: String, epoch: Int), WhyNot> {
        guard replica.running.isRunning else { return .failure(WhyNot("not running")) }
        let answer: LoopbackHTTP.Response
        do {
            answer = try await LoopbackHTTP.request("GET", port: replica.httpPort, path: "/readyz", host: replica.httpHost, timeout: 2)
        } catch {
            return .failure(WhyNot("\(error)"))
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
            let block = object["replica"] as? [String: Any], let role = block["role"] as? String, let epoch = block["epoch"] as? Int
        else { return .failure(WhyNot("\(answer.status): \(answer.body.prefix(300))")) }
        return .success((role, epoch))
    }

    struct WhyNot: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Waits until exactly one of `replicas` says it is active; returns it and its epoch.
    func active(among replicas: [Replica], timeout: Duration = .seconds(30)) async throws -> (Replica, Int) {
        var found: (Replica, Int)?
        // What each said last (nothing: no answer within its timeout), for the failure's message.
        var said: [String] = []
        try await eventually("one active replica among \(replicas.map(\.name))", timeout: timeout, every: .milliseconds(100)) {
            var actives: [(Replica, Int)] = []
            said = []
            for replica in replicas {
                switch await roleOrWhyNot(replica) {
                case .success(let role):
                    said.append("\(replica.name): \(role.role), epoch \(role.epoch)")
                    if role.role == "active" { actives.append((replica, role.epoch)) }
                case .failure(let whyNot):
                    said.append("\(replica.name): \(whyNot)")
                }
            }
            found = actives.count == 1 ? actives[0] : nil
            return found != nil
        }
        guard let found else { throw MosquittoBroker.Failure.toolFailed("no single active replica (last seen: \(said.joined(separator: "; ")))") }
        return found
    }

    /// Everything published under the prefix, with when it arrived, in the broker's order.
    final class Recorder: Sendable {
        struct Entry: Sendable {
            var at: ContinuousClock.Instant
            var topic: String
            var payload: [UInt8]
            var retain: Bool
        }
        let entries = Mutex<[Entry]>([])
        let client: MQTTClient

        init(port: Int, logger: Logger) async throws {
            client = try MQTTClient(configuration: .test(port: port), logger: logger)
            let messages = client.messages
            Task { [self] in
                for await message in messages {
                    let entry = Entry(at: .now, topic: message.topic, payload: message.payload, retain: message.retain)
                    self.entries.withLock { $0.append(entry) }
                }
            }
            try await client.connect()
            try await client.subscribe("livedata/style/#")
            try await client.subscribe("livedata/owner/#")
            try await client.subscribe("livedata/sync/#")
        }

        /// The active's failover markers seen, in order.
        var markers: [[String: Any]] {
            all.compactMap { entry in
                guard entry.topic.hasPrefix("livedata/sync/") else { return nil }
                return try? JSONSerialization.jsonObject(with: Data(entry.payload)) as? [String: Any]
            }
        }

        var all: [Entry] { entries.withLock { $0 } }

        /// Styles as (location, epoch, version, label), live ones only (not retained at subscription).
        func styles(after: ContinuousClock.Instant? = nil) -> [(location: String, epoch: Int, version: Int, label: String, at: ContinuousClock.Instant)] {
            all.compactMap { entry in
                guard entry.topic.hasPrefix("livedata/style/"), !entry.payload.isEmpty, after.map({ entry.at > $0 }) ?? true,
                    let object = try? JSONSerialization.jsonObject(with: Data(entry.payload)) as? [String: Any],
                    let version = object["version"] as? Int, let style = object["style"] as? [String: Any]
                else { return nil }
                return (
                    String(entry.topic.split(separator: "/").last!), object["epoch"] as? Int ?? 0, version, style["label"] as? String ?? "",
                    entry.at
                )
            }
        }

        /// Locations whose (epoch, version) went backwards in what this subscriber saw.
        func backwards() -> [String] {
            var last: [String: (Int, Int)] = [:]
            var found: [String] = []
            for style in styles() {
                if let before = last[style.location], (style.epoch, style.version) < before { found.append(style.location) }
                last[style.location] = (style.epoch, style.version)
            }
            return found
        }

        /// The epochs of the claims (unreleased leases) in the order seen.
        var claimedEpochs: [Int] {
            all.compactMap { entry in
                guard entry.topic.hasPrefix("livedata/owner/"),
                    let object = try? JSONSerialization.jsonObject(with: Data(entry.payload)) as? [String: Any],
                    object["released"] == nil, let epoch = object["epoch"] as? Int
                else { return nil }
                return epoch
            }
        }
    }

    /// The people count each location last got.
    final class Feed: Sendable {
        let expected = Mutex<[String: Int]>([:])
        let client: MQTTClient

        init(port: Int, logger: Logger) async throws {
            client = try MQTTClient(configuration: .test(port: port), logger: logger)
            try await client.connect()
        }

        /// `count` updates, round robin over the locations, each a new count of people.
        func send(_ count: Int, from first: Int = 0, pause: Duration = .milliseconds(2)) async throws {
            for index in first..<(first + count) {
                let location = index % FailoverTests.locations
                let people = (index / FailoverTests.locations) % 9 + 1
                try await client.publish(
                    "ds1/hq/A/F1/R\(location)/desk-\(location)/occupancy",
                    text: #"{"properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#, qos: .atLeastOnce)
                expected.withLock { $0["desk-\(location)"] = people }
                // Paced as sensors send, not a wait for anything.
                if index % 50 == 49 { try await Task.sleep(for: pause * 50) }
            }
        }
    }

    /// Every retained style, by location: its label.
    func retainedLabels(_ broker: MosquittoBroker) async throws -> [String: String] {
        try await CrashRecoveryTests().retainedStyles(broker).compactMapValues { ($0["style"] as? [String: Any])?["label"] as? String }
    }

    /// The retained styles show every location's last update, and so does the replica's state.
    func expectConverged(_ broker: MosquittoBroker, _ feed: Feed, active: Replica) async throws {
        let expected = feed.expected.withLock { $0 }.mapValues { "\($0)/8" }
        var last: [String: String] = [:]
        try await eventually("the retained styles to show every location's last update", timeout: .seconds(30), every: .milliseconds(500)) {
            last = try await retainedLabels(broker)
            return last == expected
        }
        let differing = expected.filter { last[$0.key] != $0.value }.prefix(5)
        #expect(differing.isEmpty, "retained differs from the last updates at \(differing.map { "\($0.key): \(last[$0.key] ?? "none") not \($0.value)" })")
        let floor = try await LoopbackHTTP.request("GET", port: active.httpPort, path: "/v1/floors/ds1/hq/A/F1")
        let records = (try JSONSerialization.jsonObject(with: Data(floor.body.utf8)) as? [String: Any])?["locations"] as? [[String: Any]] ?? []
        var state: [String: String] = [:]
        for record in records {
            state[record["location"] as? String ?? ""] = (record["style"] as? [String: Any])?["label"] as? String
        }
        #expect(state == expected, "the active's state is every location's last update")
    }

    @Test("the active SIGKILLed mid-stream: a standby publishes within 2 × keepalive + 1 s; the styles end right and no version goes backwards")
    func killedActive() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let (active, standby, epoch, recorder, feed) = try await pair(broker)
        #expect(await role(standby)?.role == "standby")
        try await feed.send(600)
        let killedAt = ContinuousClock.now
        active.running.signal(SIGKILL)
        try await feed.send(600, from: 600)
        let (taker, newEpoch) = try await self.active(among: [standby])
        #expect(taker === standby)
        #expect(newEpoch > epoch, "the epoch grew: \(epoch) → \(newEpoch)")
        let published = recorder.styles(after: killedAt).first { $0.epoch == newEpoch }
        #expect(published != nil, "the new active published")
        if let published {
            #expect(published.at - killedAt <= Self.takeoverBound, "took over in \(published.at - killedAt)")
            print("failover: SIGKILL to the first style under the new epoch: \(published.at - killedAt)")
        }
        try await expectConverged(broker, feed, active: standby)
        #expect(recorder.backwards().isEmpty, "versions went backwards at \(recorder.backwards().prefix(5))")
        standby.running.signal(SIGTERM)
        #expect(try await standby.running.result(timeout: .seconds(15)).status == 0)
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }

    @Test("three replicas, the active killed twice in a row: the epochs only grow, the last one standing is active and right")
    func threeReplicas() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        var replicas: [Replica] = []
        for name in ["east-1", "east-2", "east-3"] { replicas.append(try await start(name, broker: broker)) }
        let recorder = try await Recorder(port: broker.port, logger: logger)
        let feed = try await Feed(port: broker.port, logger: logger)
        var epochs: [Int] = []
        var sent = 0
        for _ in 0..<2 {
            let (active, epoch) = try await active(among: replicas)
            epochs.append(epoch)
            try await feed.send(300, from: sent)
            sent += 300
            active.running.signal(SIGKILL)
            _ = try await active.running.wait(timeout: .seconds(10))
            replicas.removeAll { $0 === active }
        }
        let (last, epoch) = try await active(among: replicas)
        epochs.append(epoch)
        try await feed.send(300, from: sent)
        #expect(epochs == epochs.sorted() && Set(epochs).count == 3, "epochs \(epochs)")
        let claims = recorder.claimedEpochs
        #expect(claims == claims.sorted(), "claims seen at the owner topic: \(claims)")
        try await expectConverged(broker, feed, active: last)
        #expect(recorder.backwards().isEmpty, "versions went backwards at \(recorder.backwards().prefix(5))")
        last.running.signal(SIGTERM)
        #expect(try await last.running.result(timeout: .seconds(15)).status == 0)
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }

    @Test("a replica started on an empty state file copies a peer's state, joins as a standby, and takes over correctly")
    func emptyReplica() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let first = try await start("east-1", broker: broker)
        let second = try await start("east-2", broker: broker)
        let feed = try await Feed(port: broker.port, logger: logger)
        try await feed.send(Self.locations * 2)
        let (active, _) = try await active(among: [first, second])
        try await expectConverged(broker, feed, active: active)
        let fresh = try await start("east-3", broker: broker, peers: [first.httpPort, second.httpPort])
        #expect(await role(fresh)?.role == "standby")
        let tracked = try await LoopbackHTTP.request("GET", port: fresh.httpPort, path: "/metrics").body
        #expect(CrashRecoveryTests.metric(tracked, "livedata_locations_tracked") == Double(Self.locations), "copied every location")
        let refused = try await LoopbackHTTP.request("GET", port: first.httpPort, path: "/v1/state")
        #expect(refused.status == 401, "the state copy needs the token")
        // A replica restarted on an empty disk keeps its client id, so its session hands it
        // what was queued while it was down: it must still copy, not join with that part.
        let standby = active === first ? second : first
        standby.running.signal(SIGKILL)
        _ = try await standby.running.wait(timeout: .seconds(10))
        let directory = try TestDirectory.make(prefix: "replica-\(standby.name)-empty")
        try await feed.send(Self.locations / 4, from: Self.locations * 2)
        let restarted = try await start(standby.name, broker: broker, peers: [active.httpPort, fresh.httpPort], directory: directory)
        // The line may reach the captured output a moment after READY=1.
        try await eventually("the copy logged: \(restarted.running.standardError.suffix(2000))", timeout: .seconds(10)) {
            restarted.running.standardError.contains("copied the state of")
        }
        let restartedTracked = try await LoopbackHTTP.request("GET", port: restarted.httpPort, path: "/metrics").body
        #expect(CrashRecoveryTests.metric(restartedTracked, "livedata_locations_tracked") == Double(Self.locations))
        restarted.running.signal(SIGTERM)
        #expect(try await restarted.running.result(timeout: .seconds(15)).status == 0)
        // Both others gone: the fresh one is the partition's only replica.
        for replica in [first, second] where replica.running.isRunning { replica.running.signal(SIGKILL) }
        let (taker, _) = try await self.active(among: [fresh])
        try await feed.send(Self.locations, from: Self.locations * 3)
        try await expectConverged(broker, feed, active: taker)
        fresh.running.signal(SIGTERM)
        #expect(try await fresh.running.result(timeout: .seconds(15)).status == 0)
        await feed.client.disconnect()
    }

    @Test("the broker restarted: every connection drops, no will is published, and a replica is active again in seconds, the styles right")
    func brokerRestart() async throws {
        let broker = try await MosquittoBroker.start(MosquittoBroker.Options(extra: ["persistence true", "autosave_interval 1"]))
        defer { Task { await broker.stop() } }
        let first = try await start("east-1", broker: broker)
        let second = try await start("east-2", broker: broker)
        let feed = try await Feed(port: broker.port, logger: logger)
        try await feed.send(400)
        let (holder, epoch) = try await active(among: [first, second])
        // The broker comes back with what it saved last: a save made after the active's
        // publications were acknowledged holds the lease and the styles.
        try await CrashRecoveryTests().waitForOutput(port: holder.httpPort)
        func saves() -> Int { broker.log.components(separatedBy: "Saving in-memory database").count - 1 }
        let savedBefore = saves()
        try await eventually("the broker to save its state") { saves() > savedBefore }
        let restartedAt = ContinuousClock.now
        try await broker.restart(after: .seconds(1))
        try await eventually("a replica active under a higher epoch", timeout: .seconds(30), every: .milliseconds(200)) {
            var epochs: [Int] = []
            for replica in [first, second] {
                if let role = await role(replica), role.role == "active" { epochs.append(role.epoch) }
            }
            return epochs.count == 1 && epochs[0] > epoch
        }
        let took = ContinuousClock.now - restartedAt
        #expect(took < .seconds(Self.keepalive * 2), "active again \(took) after the restart (the broker was away 1 s)")
        try await feed.send(400, from: 400)
        let (taker, _) = try await active(among: [first, second])
        try await expectConverged(broker, feed, active: taker)
        for replica in [first, second] { replica.running.signal(SIGTERM) }
        for replica in [first, second] { #expect(try await replica.running.result(timeout: .seconds(15)).status == 0) }
        await feed.client.disconnect()
    }
}

extension FailoverTests {
    /// A count shared with a task.
    final class Count: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// A replica's convergences: finished, skipped (no read), and the retained messages read.
    func convergences(_ replica: Replica) async throws -> (finished: Double, skipped: Double, read: Double) {
        let text = try await LoopbackHTTP.request("GET", port: replica.httpPort, path: "/metrics").body
        return (
            CrashRecoveryTests.metric(text, #"livedata_convergences_total{outcome="finished"}"#) ?? -1,
            CrashRecoveryTests.metric(text, #"livedata_convergences_total{outcome="skipped"}"#) ?? -1,
            CrashRecoveryTests.metric(text, "livedata_convergence_read_total") ?? -1
        )
    }

    /// Two replicas, the feed's first 600 updates in, and the standby following the active's
    /// markers (one that covers a fence seen after the feed).
    func followedPair(_ broker: MosquittoBroker) async throws -> Pair {
        let pair = try await pair(broker)
        try await pair.feed.send(600)
        let fed = pair.recorder.markers.count
        try await eventually("the active's markers to cover a fence after the feed", timeout: .seconds(10), every: .milliseconds(100)) {
            pair.recorder.markers.dropFirst(fed).contains { $0["covers"] != nil }
        }
        return pair
    }

    typealias Pair = (active: Replica, standby: Replica, epoch: Int, recorder: Recorder, feed: Feed)

    /// Two replicas of one partition on `broker` (east-1 and east-2, made by `start`: this
    /// suite's configuration by default), once one of them holds the lease, with a recorder
    /// of the broker's traffic and a feed of updates.
    func pair(_ broker: MosquittoBroker, start: ((String) async throws -> Replica)? = nil) async throws -> Pair {
        let start = start ?? { try await self.start($0, broker: broker) }
        let first = try await start("east-1")
        let second = try await start("east-2")
        let (active, epoch) = try await active(among: [first, second])
        let recorder = try await Recorder(port: broker.port, logger: logger)
        let feed = try await Feed(port: broker.port, logger: logger)
        return (active, active === first ? second : first, epoch, recorder, feed)
    }

}

/// A network namespace joined to this one by a veth pair: a replica inside reaches the
/// broker at ``hostAddress``, and ``cut()`` takes the link down as a failed switch port would.
/// Needs root and iproute2; a test that uses it fails (never skips) without them, saying so.
struct NetworkNamespace {
    /// iproute2's `ip`, wherever the distribution puts it.
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"

    /// What the namespace needs and this machine lacks, with how to get it; nil when nothing.
    static var missingRequirements: String? {
        var missing: [String] = []
        if geteuid() != 0 { missing.append("root (network namespaces and veth pairs need CAP_NET_ADMIN: run the tests as root)") }
        if !FileManager.default.isExecutableFile(atPath: ip) {
            missing.append("iproute2's ip (scripts/install-dependencies installs it, or: apt-get install iproute2)")
        }
        return missing.isEmpty ? nil : "this test cuts a replica's link in a network namespace and needs " + missing.joined(separator: " and ")
    }
    let name: String
    let hostInterface: String
    let hostAddress: String
    let innerAddress: String

    static func create() throws -> NetworkNamespace {
        if let missingRequirements { throw Failure(description: missingRequirements) }
        let id = Int(getpid()) % 10_000
        let subnet = id % 250 + 1
        let namespace = NetworkNamespace(
            name: "ldfo\(id)", hostInterface: "ldfo\(id)h", hostAddress: "10.231.\(subnet).1", innerAddress: "10.231.\(subnet).2")
        namespace.remove()
        do {
            try run(["netns", "add", namespace.name])
            try run(["link", "add", namespace.hostInterface, "type", "veth", "peer", "name", "ldfo\(id)n"])
            try run(["link", "set", "ldfo\(id)n", "netns", namespace.name])
            try run(["addr", "add", "\(namespace.hostAddress)/30", "dev", namespace.hostInterface])
            try run(["link", "set", namespace.hostInterface, "up"])
            try run(["netns", "exec", namespace.name, ip, "addr", "add", "\(namespace.innerAddress)/30", "dev", "ldfo\(id)n"])
            try run(["netns", "exec", namespace.name, ip, "link", "set", "ldfo\(id)n", "up"])
            try run(["netns", "exec", namespace.name, ip, "link", "set", "lo", "up"])
        } catch {
            namespace.remove()
            throw error
        }
        return namespace
    }

    func cut() throws { try Self.run(["link", "set", hostInterface, "down"]) }
    func heal() throws { try Self.run(["link", "set", hostInterface, "up"]) }

    /// Deletes the namespace (its end of the pair goes with it, and so the pair).
    func remove() {
        try? Self.run(["link", "del", hostInterface])
        try? Self.run(["netns", "del", name])
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ip)
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Failure(description: "cannot run \(ip) (scripts/install-dependencies installs iproute2): \(error)")
        }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw Failure(
                description: "ip \(arguments.joined(separator: " ")) failed: \(message) (the failover link test needs root and iproute2 for network namespaces)")
        }
    }
}
