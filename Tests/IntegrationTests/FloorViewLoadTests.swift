import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Synchronization
import Testing

/// Many floor-view viewers while updates flow: a real daemon and broker, viewers over TCP
/// that reconnect as EventSource does (after the stream's `retry:`, with Last-Event-ID).
/// The same stream is sent without viewers, then with them; the pipeline's rate must not
/// drop by 5 % or more, and every viewer gets its floor's events in order (a viewer that
/// was dropped comes back resumed or with a snapshot, and is counted).
///
/// Short by default; `LIVEDATA_LOAD_SECONDS` and `LIVEDATA_LOAD_VIEWERS` make it longer
/// (`scripts/bench-viewers` runs it in release for the figures).
@Suite("Floor view under load")
struct FloorViewLoadTests {
    let daemons = DaemonTests()
    static let environment = ProcessInfo.processInfo.environment
    static let seconds = environment["LIVEDATA_LOAD_SECONDS"].flatMap(Double.init) ?? 2
    static let viewerCount = environment["LIVEDATA_LOAD_VIEWERS"].flatMap(Int.init) ?? 200
    static let rate = 5_000
    static let floors = 5
    static let locations = 2_000

    static let yaml = """
        subscriptions:
          - {dataset: ds1, domain: occupancy}
        styles:
          main: {visible: true, polygonFillColor: "#E0E0E0"}
        rules:
          - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545", label: "{nrOfPeople}"}}
          - {name: vacant, domain: occupancy, when: nrOfPeople == 0, style: {polygonFillColor: "#4CAF50"}}
        output: {summaryInterval: 1s}
        log: {level: info}
        """

    /// One viewer that follows floor F0 for as long as it is told, reconnecting as
    /// EventSource does.
    final class Follower: Sendable {
        struct Tally: Sendable {
            var events = 0
            var changes = 0
            var outOfOrder = 0
            var sessions = 0
            /// Sessions the daemon ended (the viewer fell behind) rather than the test.
            var drops = 0
            var resumed = 0
            var snapshots = 0
        }

        let tally = Mutex(Tally())
        let stopping = Atomic<Bool>(false)
        /// Changes received in the current session so far.
        let current = Atomic<Int>(0)

        /// Whether it has `changes` (in one session: one never dropped), or was dropped.
        func caughtUp(_ changes: Int) -> Bool {
            current.load(ordering: .relaxed) >= changes || tally.withLock { $0.drops } > 0
        }

        func follow(port: Int) async {
            var lastID: String?
            var lastNumber: UInt64 = 0
            while !stopping.load(ordering: .relaxed) {
                guard
                    let viewer = try? await EventStreamViewer.open(
                        port: port, path: "/v1/events?dataset=ds1&venue=hq&building=B&floor=F0", lastEventID: lastID, keepEvents: false)
                else {
                    // A browser's pause before it opens the stream again; it awaits nothing.
                    try? await Task.sleep(for: .seconds(1))
                    continue
                }
                // Samples the session's count for the test's wait (``caughtUp(_:)``); the
                // viewer reads on by itself meanwhile.
                while !viewer.ended && !stopping.load(ordering: .relaxed) {
                    current.store(viewer.tally.changes, ordering: .relaxed)
                    try? await Task.sleep(for: .milliseconds(50))
                }
                let seen = viewer.tally
                let droppedHere = viewer.ended && !stopping.load(ordering: .relaxed)
                await viewer.close()
                let first = seen.first
                let number = seen.lastID?.split(separator: "-").last.flatMap { UInt64($0) } ?? lastNumber
                tally.withLock { tally in
                    tally.sessions += 1
                    if droppedHere { tally.drops += 1 }
                    tally.events += seen.count
                    tally.changes += seen.changes
                    tally.outOfOrder += seen.outOfOrder
                    if first == "snapshot" { tally.snapshots += 1 } else if first != nil { tally.resumed += 1 }
                    // Across sessions the numbering goes on (a snapshot may repeat the last id).
                    if number < lastNumber { tally.outOfOrder += 1 }
                }
                lastNumber = number
                lastID = seen.lastID ?? lastID
                // The stream's `retry: 1000`: the browser's behaviour, not a wait for anything.
                if !stopping.load(ordering: .relaxed) { try? await Task.sleep(for: .seconds(1)) }
            }
        }
    }

    /// Sends `rate` updates a second for `seconds` over the venue's floors, and waits until
    /// the daemon applied them; returns the pipeline's rate and the daemon's CPU per update.
    func phase(_ publisher: MQTTClient, daemon: DaemonTests.Daemon, start: Int) async throws -> (rate: Double, cpu: Double) {
        let count = Int(Double(Self.rate) * Self.seconds)
        let applied = try await appliedUpdates(daemon.httpPort)
        let cpuBefore = Self.cpuSeconds(daemon.running.processIdentifier)
        let began = ContinuousClock.now
        var random = SplitMix64(seed: UInt64(start))
        for index in 0..<count {
            let location = Int(random.next() % UInt64(Self.locations))
            let floor = location % Self.floors
            let timestamp = 1_763_720_000_000 + Int64(start + index)
            let payload = #"{"timestamp": \#(timestamp), "properties": {"nrOfPeople": "\#(random.next() % 4)"}}"#
            while (try? publisher.send(
                "ds1/hq/B/F\(floor)/R\(location / 10)/loc-\(location)/occupancy", payload: Array(payload.utf8), qos: .atLeastOnce)) == nil {
                // The window is full: a pause for its acknowledgements, pacing the sender.
                try await Task.sleep(for: .milliseconds(1))
            }
            // Paced: where the stream should be by now.
            if index % 50 == 49 {
                let due = began + .seconds(Double(index + 1) / Double(Self.rate))
                if ContinuousClock.now < due { try await Task.sleep(until: due) }
            }
        }
        // Four times the stream's length and 10 s, from its first update; a debug daemon
        // (whose rate is only reported) eight times that: with the viewers it may take a few
        // hundred updates a second on a loaded machine.
        let allowed = Duration.seconds(Self.seconds * 4 + 10) * (try Self.optimizedDaemon() ? 1 : 8)
        let done = try await eventually(
            "the daemon to apply the \(count) updates (observed: all it applied, from \(applied))",
            timeout: began + allowed - ContinuousClock.now,
            observing: { try await appliedUpdates(daemon.httpPort) }, until: { $0 >= applied + count })
        let elapsed = ContinuousClock.now - began
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let cpu = Self.cpuSeconds(daemon.running.processIdentifier) - cpuBefore
        return (Double(done - applied) / seconds, cpu / Double(count) * 1e6)
    }

    /// Whether the daemon under test is a release build.
    static func optimizedDaemon() throws -> Bool { try CommandRunner().executable.path.contains("/release/") }

    func appliedUpdates(_ port: Int) async throws -> Int {
        let metrics = try await LoopbackHTTP.request("GET", port: port, path: "/metrics").body
        return Int(CrashRecoveryTests.metric(metrics, "livedata_updates_applied_total") ?? 0)
    }

    /// User and system CPU time of a process, from /proc.
    static func cpuSeconds(_ pid: pid_t) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the name: state is field 3; utime and stime are fields 14 and 15.
        let ticks = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("200 viewers of one floor while 5,000 updates/s flow: the pipeline keeps its rate, each viewer its order")
    func manyViewers() async throws {
        let broker = try await MosquittoBroker.start()
        let daemon = try await daemons.startDaemon(port: broker.port, yaml: Self.yaml)
        #expect(await daemon.notify.wait(for: "READY=1"), "stderr: \(daemon.running.standardError)")
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "load-publisher"
        let publisher = try MQTTClient(configuration: configuration, logger: Logger(label: "test"))
        try await publisher.connect()

        // Every location once, so that both phases change styles rather than create locations.
        _ = try await phase(publisher, daemon: daemon, start: 0)
        let alone = try await phase(publisher, daemon: daemon, start: 1_000_000)

        // What the broker gets for F0 from here on: what each viewer must see too.
        let (watcher, published) = try await daemons.watcher(broker, filter: "livedata/style/ds1/hq/B/F0/#")
        // The retained styles come first; the viewers have those in their snapshot. With the
        // daemon's output acknowledged they are all at the broker, and a marker sent now
        // comes back behind them.
        try await CrashRecoveryTests().waitForOutput(port: daemon.httpPort)
        try await watcher.subscribe("test/marker")
        try await watcher.publish("test/marker", text: "end", qos: .atLeastOnce)
        #expect(await published.wait(timeout: .seconds(30)) { $0.contains { $0.topic == "test/marker" } })
        let retained = await published.items.count
        let followers = (0..<Self.viewerCount).map { _ in Follower() }
        let following = Task {
            await withTaskGroup(of: Void.self) { group in
                for follower in followers { group.addTask { await follower.follow(port: daemon.httpPort) } }
            }
        }
        // All connected before the stream starts (two hundred snapshots: a debug daemon on a
        // machine running the whole suite has taken over 10 s for them).
        _ = try await daemons.waitForMetric(
            daemon, "livedata_event_viewers", atLeast: Double(Self.viewerCount), timeout: try Self.optimizedDaemon() ? .seconds(10) : .seconds(60))
        let watched = try await phase(publisher, daemon: daemon, start: 2_000_000)
        // Let the viewers read what is on its way (up to 30 s), then stop them.
        let floorChanges = await published.items.count - retained
        // Every viewer has at least what the broker got, and nothing more arrives.
        var counts: [Int] = []
        try await eventually("every viewer to catch up, with nothing more arriving", timeout: .seconds(75), every: .milliseconds(250)) {
            let now = followers.map { $0.current.load(ordering: .relaxed) }
            defer { counts = now }
            return followers.allSatisfy { $0.caughtUp(floorChanges) } && now == counts
        }
        for follower in followers { follower.stopping.store(true, ordering: .relaxed) }
        await following.value

        let tallies = followers.map { $0.tally.withLock { $0 } }
        // A viewer never dropped has every one of them; one that came back with a snapshot
        // has the state instead of what it missed.
        let complete = tallies.filter { $0.drops == 0 }
        // The broker may get fewer: a style that changes again while it waits for the
        // broker's window leaves once, with its newest value (latest wins).
        let most = complete.map(\.changes).max() ?? 0
        #expect(most >= floorChanges, "viewers saw \(most) changes, the broker \(floorChanges)")
        #expect(complete.allSatisfy { $0.changes == most }, "\(complete.filter { $0.changes != most }.count) viewers missed changes of \(most)")
        let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
        let dropped = Int(CrashRecoveryTests.metric(metrics, "livedata_event_viewers_dropped_total") ?? 0)
        let events = tallies.map(\.events).reduce(0, +)
        let reconnected = tallies.map { $0.sessions - 1 }.reduce(0, +)
        print(
            """
            floor view under load: \(Self.viewerCount) viewers of F0 (1 of \(Self.floors) floors), \(Self.rate) updates/s for \(Self.seconds) s
              pipeline without viewers: \(Int(alone.rate)) updates/s, \(String(format: "%.1f", alone.cpu)) µs CPU per update
              pipeline with viewers:    \(Int(watched.rate)) updates/s, \(String(format: "%.1f", watched.cpu)) µs CPU per update (ratio \(String(format: "%.3f", watched.rate / alone.rate)))
              F0 changes published: \(floorChanges); events received: \(events) (\(events / max(Self.viewerCount, 1)) per viewer); \(complete.filter { $0.changes == most }.count) viewers got every change; out of order: \(tallies.map(\.outOfOrder).reduce(0, +))
              viewers dropped: \(dropped) (\(tallies.map(\.drops).reduce(0, +)) seen by the viewers); reconnections: \(reconnected), resumed \(tallies.map(\.resumed).reduce(0, +)), snapshots after the first \(tallies.map(\.snapshots).reduce(0, +) - Self.viewerCount)
            """)
        // The rate is a figure of the optimized daemon (scripts/bench-viewers): a debug build
        // spends about eight times the CPU on each HTTP write, and on two cores that is
        // taken from the pipeline. Every other check holds for both.
        if try Self.optimizedDaemon() {
            #expect(watched.rate >= 0.95 * alone.rate, "with viewers \(watched.rate)/s, without \(alone.rate)/s")
        } else {
            print("  (a debug daemon: the rate is reported, not held to 95 %; scripts/bench-viewers measures the release build)")
        }
        #expect(tallies.allSatisfy { $0.outOfOrder == 0 })
        #expect(tallies.allSatisfy { $0.events > 1 }, "every viewer got its snapshot and changes")
        // Each drop the viewer saw is followed by a reconnection (resumed or a snapshot),
        // but for one it saw as the test stopped; and the daemon counted every one.
        #expect(tallies.allSatisfy { $0.sessions - 1 >= $0.drops - 1 })
        #expect(dropped >= tallies.map(\.drops).reduce(0, +))
        try await daemons.stop(daemon, publisher, watcher)
    }
}
