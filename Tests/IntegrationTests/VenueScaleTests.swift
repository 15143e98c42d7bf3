import Foundation
import LiveDataConfiguration
import LiveDataServer
import LiveDataTestSupport
import Logging
import Mosquitto
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

/// A venue's scale: starts with tens of thousands of retained styles and queued updates,
/// reconnections that must not read every style back, and a watchdog that must see a stuck
/// pipeline. `LIVEDATA_SCALE_LOCATIONS` sets the size (`scripts/venue-scale` runs the long
/// form).
@Suite("Venue scale", .timeLimit(.minutes(40)), .serialized)
struct VenueScaleTests {
    let logger = Logger(label: "test")
    static let locations = Int(ProcessInfo.processInfo.environment["LIVEDATA_SCALE_LOCATIONS"] ?? "") ?? 50_000
    /// How long a fill may take to show: longer for the long form's million locations.
    static let patience = Duration.seconds(max(90, locations / 4000))
    let crash = CrashRecoveryTests()
    let daemons = DaemonTests()

    func metrics(_ daemon: DaemonTests.Daemon) async throws -> String {
        try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
    }

    func metric(_ daemon: DaemonTests.Daemon, _ name: String) async throws -> Int {
        Int(CrashRecoveryTests.metric(try await metrics(daemon), name) ?? -1)
    }

    /// Convergences finished or skipped (a checkpoint made the read needless).
    func convergencesDone(_ text: String) -> Int {
        Int(CrashRecoveryTests.metric(text, #"livedata_convergences_total{outcome="finished"}"#) ?? 0)
            + Int(CrashRecoveryTests.metric(text, #"livedata_convergences_total{outcome="skipped"}"#) ?? 0)
    }

    /// Waits until every publication the daemon put in line has been acknowledged.
    /// (A broker at mosquitto's default window takes about 10,000 a second.)
    func waitForOutput(_ daemon: DaemonTests.Daemon, timeout: Duration = .seconds(max(60, locations / 4000))) async throws {
        try await crash.waitForOutput(port: daemon.httpPort, timeout: timeout)
    }

    /// Waits until an acknowledged sync marker covers everything the daemon handed over.
    func waitForMarker(_ daemon: DaemonTests.Daemon) async throws {
        try await eventually("a sync marker to cover every publication", timeout: .seconds(30), every: .milliseconds(100)) {
            CrashRecoveryTests.metric(try await metrics(daemon), "livedata_output_unmarked") == 0
        }
    }

    /// Watches the daemon's `/readyz` until READY=1: records whether it ever answered 200
    /// before a convergence had finished (or been skipped), and how long the start took.
    func watchStart(_ daemon: DaemonTests.Daemon, since started: ContinuousClock.Instant) async throws -> (readyEarly: Bool, seconds: Double) {
        var early = false
        try await eventually(
            "READY=1:\n\(daemon.running.standardError.suffix(3000))", timeout: .seconds(120), every: .milliseconds(25)
        ) {
            let ready = try? await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/readyz")
            guard ready?.status == 200 else { return false }
            let text = try await metrics(daemon)
            if convergencesDone(text) == 0 { early = true }
            // Ready at /readyz and to systemd alike.
            return daemon.notify.messages.contains { $0.hasPrefix("READY=1") }
        }
        let elapsed = ContinuousClock.now - started
        return (early, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    /// The daemon's resident memory, from /proc.
    static func residentBytes(_ daemon: DaemonTests.Daemon) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(daemon.running.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// What the start logged about its restore: milliseconds.
    static func restoreMilliseconds(_ daemon: DaemonTests.Daemon) -> Int? {
        let line = daemon.running.standardError.split(separator: "\n").first { $0.contains("restored ") && $0.contains("restore.milliseconds=") }
        let field = line?.split(separator: " ").first { $0.hasPrefix("restore.milliseconds=") }
        return field.flatMap { Int($0.dropFirst("restore.milliseconds=".count)) }
    }

    /// Queues one update per location at the broker while the daemon is down, starts it
    /// again on its state, and checks the start: never ready before a convergence finished
    /// (or was skipped), then every location with the update queued for it.
    /// - Returns: the new daemon, and the seconds from its launch to READY=1.
    func startWithQueuedUpdates(_ directory: URL, broker: MosquittoBroker) async throws -> (DaemonTests.Daemon, Double) {
        let queued = CrashRecoveryTests.Stream()
        try await crash.publish(queued, count: Self.locations, locations: Self.locations, broker: broker)
        let started = ContinuousClock.now
        let daemon = try await daemons.startDaemon(port: broker.port, directory: directory)
        let start = try await watchStart(daemon, since: started)
        #expect(!start.readyEarly, "ready before a convergence had finished")
        _ = try await crash.waitForLastValues(queued, locations: Self.locations, port: daemon.httpPort, timeout: Self.patience)
        return (daemon, start.seconds)
    }

    @Test("a start with 50,000 retained styles and 50,000 updates queued at the broker, after SIGTERM and after SIGKILL: not ready before it has converged, nothing lost, the broker's styles are the state's")
    func startWithBacklog() async throws {
        let locations = Self.locations
        // The daemon's session must hold a whole fill while it falls behind or is down.
        let broker = try await MosquittoBroker.start(MosquittoBroker.Options(extra: ["max_queued_messages \(max(100_000, 2 * locations))"]))
        // Every style message a subscriber saw, for the check that no version went back: at
        // the long form's million locations that is millions of messages, so there only the
        // retained styles are compared with the state.
        let (watcher, seen) = try await crash.watcher(broker, filter: locations <= 200_000 ? "livedata/style/#" : "unwatched")
        var daemon = try await daemons.startDaemon(port: broker.port)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let emptyBytes = Self.residentBytes(daemon)
        let fill = CrashRecoveryTests.Stream()
        try await crash.publish(fill, count: locations, locations: locations, broker: broker)
        _ = try await crash.waitForLastValues(fill, locations: locations, port: daemon.httpPort, timeout: Self.patience)
        try await waitForOutput(daemon)
        let filledBytes = Self.residentBytes(daemon)

        // A clean stop: the checkpoint at the broker spares the next start the read.
        daemon.signal(SIGTERM)
        let stopped = try await daemon.running.result(timeout: .seconds(30))
        #expect(stopped.status == 0)
        #expect(!stopped.standardError.contains("not yet acknowledged"), "\(stopped.standardError.suffix(2000))")
        let afterStop: Double
        (daemon, afterStop) = try await startWithQueuedUpdates(daemon.directory, broker: broker)
        let skipped = try await metric(daemon, #"livedata_convergences_total{outcome="skipped"}"#)
        let readAfterStop = try await metric(daemon, "livedata_convergence_read_total")
        #expect(skipped == 1, "the checkpoint held: no full read")
        #expect(readAfterStop <= 3, "read back \(readAfterStop) messages: the markers' two topics and the reader's end marker at most")
        try await waitForOutput(daemon)
        let restartedBytes = Self.residentBytes(daemon)
        let restore = Self.restoreMilliseconds(daemon)
        try await crash.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)

        // A crash: no checkpoint; the start reads every retained style back.
        daemon.signal(SIGKILL)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        let afterKill: Double
        (daemon, afterKill) = try await startWithQueuedUpdates(daemon.directory, broker: broker)
        let finished = try await metric(daemon, #"livedata_convergences_total{outcome="finished"}"#)
        let readAfterKill = try await metric(daemon, "livedata_convergence_read_total")
        #expect(finished >= 1)
        #expect(readAfterKill >= locations, "a full read: \(readAfterKill) retained messages")
        try await waitForOutput(daemon)
        try await crash.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)
        print(
            """
            start with a backlog: \(locations) locations, \(locations) queued updates; ready after SIGTERM in \(String(format: "%.2f", afterStop)) s (\(readAfterStop) read back), after SIGKILL in \(String(format: "%.2f", afterKill)) s (\(readAfterKill) read back); restore \(restore.map(String.init) ?? "?") ms
            resident memory: \(emptyBytes >> 20) MB empty; \((filledBytes - emptyBytes) / locations) bytes per location after the fill, \((restartedBytes - emptyBytes) / locations) after a restart
            """
        )
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(30))
        await watcher.disconnect()
    }

    @Test("a reconnection to a broker that kept its store reads back one marker, not every style; one restored from an older save, or with no store, gets a full read and is corrected")
    func reconnect() async throws {
        let locations = min(Self.locations, 20_000)
        // Saved only when stopped: a SIGKILL goes back to the last clean stop's save.
        let broker = try await MosquittoBroker.start(
            MosquittoBroker.Options(extra: ["persistence true", "autosave_interval 3600", "autosave_on_changes false"]))
        let (watcher, seen) = try await crash.watcher(broker)
        let daemon = try await daemons.startDaemon(port: broker.port)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let fill = CrashRecoveryTests.Stream()
        try await crash.publish(fill, count: locations, locations: locations, broker: broker)
        _ = try await crash.waitForLastValues(fill, locations: locations, port: daemon.httpPort, timeout: Self.patience)
        try await waitForOutput(daemon)
        // A marker follows what was handed over within about a second.
        try await waitForMarker(daemon)

        func counts() async throws -> (read: Int, skipped: Int, finished: Int) {
            let text = try await metrics(daemon)
            return (
                Int(CrashRecoveryTests.metric(text, "livedata_convergence_read_total") ?? 0),
                Int(CrashRecoveryTests.metric(text, #"livedata_convergences_total{outcome="skipped"}"#) ?? 0),
                Int(CrashRecoveryTests.metric(text, #"livedata_convergences_total{outcome="finished"}"#) ?? 0)
            )
        }
        func waitForReconvergence(_ before: (read: Int, skipped: Int, finished: Int)) async throws -> (read: Int, skipped: Int, finished: Int) {
            try await eventually(
                "a convergence finished or skipped", timeout: .seconds(60), every: .milliseconds(100), observing: { try await counts() },
                until: { $0.skipped + $0.finished != before.skipped + before.finished })
        }

        // A clean broker restart: it saved the session, the styles and the marker.
        var before = try await counts()
        try await broker.terminate()
        try await broker.relaunch()
        var after = try await waitForReconvergence(before)
        #expect(after.skipped == before.skipped + 1, "the marker held: no full read")
        #expect(after.read - before.read <= 3, "read back \(after.read - before.read) messages: the markers' two topics and the reader's end marker at most")
        let readAfterCleanRestart = after.read - before.read
        try await crash.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)

        // Changes after that save, then a crash: the broker comes back with the old save, whose
        // marker is not the last one acknowledged: a full read corrects what it lost.
        let more = CrashRecoveryTests.Stream()
        try await crash.publish(more, count: locations / 4, locations: locations / 4, broker: broker)
        _ = try await crash.waitForLastValues(more, locations: locations / 4, port: daemon.httpPort)
        try await waitForOutput(daemon)
        // The marker after these changes, as above.
        try await waitForMarker(daemon)
        before = try await counts()
        await broker.stop()
        try await broker.relaunch()
        after = try await waitForReconvergence(before)
        #expect(after.finished == before.finished + 1, "a full read")
        #expect(after.read - before.read >= locations, "read back \(after.read - before.read) retained messages")
        let readAfterOlderSave = after.read - before.read
        try await waitForOutput(daemon)
        try await crash.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)

        // A broker that lost everything (no session, no retained styles): a full read, and
        // every style published again.
        before = try await counts()
        await broker.stop()
        try? FileManager.default.removeItem(at: broker.directory.appendingPathComponent("mosquitto.db"))
        try await broker.relaunch()
        after = try await waitForReconvergence(before)
        #expect(after.finished == before.finished + 1, "a full read")
        try await waitForOutput(daemon)
        try await crash.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)
        print(
            "reconnection: \(locations) locations; read back after a clean broker restart: \(readAfterCleanRestart) messages, after a restart from an older save: \(readAfterOlderSave), after one from nothing: \(after.read - before.read)"
        )
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(30))
        await watcher.disconnect()
    }

    @Test("the watchdog: pinged while the pipeline moves or has nothing to do; a stalled pipeline with updates waiting stops the pings, which resume when it moves")
    func watchdog() async throws {
        let broker = try await MosquittoBroker.start()
        let notify = try NotifySocket()
        var config = try LiveDataConfig.parse(yaml: DaemonServicesTests.yaml, file: "test.yaml")
        config.broker.port = broker.port
        config.broker.clientId = "watchdog-test"
        config.store.path = ":memory:"
        config.http.listen = "127.0.0.1:0"
        // Pinged every 200 ms.
        let daemon = try await LiveDataDaemon(
            config: config, configPath: "test.yaml", logger: logger,
            notifier: SystemdNotifier(environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"]))
        let sensor = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await sensor.connect()
        func pings() -> Int { notify.messages.filter { $0 == "WATCHDOG=1" }.count }
        func send(_ count: Int, from first: Int) throws {
            for index in first..<(first + count) {
                try sensor.send(
                    "ds1/hq/B/F3/R7/room-\(index)/occupancy", payload: Array(#"{"properties": {"nrOfPeople": "\#(index % 5)"}}"#.utf8))
            }
        }
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(services: daemon.services, logger: logger)
            async let running: Void = group.run()
            #expect(await notify.wait(for: "READY=1"))
            // Idle: pinged.
            let idle = pings()
            try await eventually("three pings while idle", timeout: .seconds(5)) { pings() >= idle + 3 }

            await daemon.pipeline.stallProcessing()
            // The first batch is taken and held; what follows waits in the intake queue.
            try send(10, from: 0)
            // Seen by the pipeline itself: the queue's depth and peak cannot tell it, as the
            // first update may be taken alone before the other nine arrive.
            try await eventually("the first batch taken and held") { await daemon.pipeline.holdsStalledBatch }
            try send(100, from: 10)
            try await eventually("the rest waiting in the intake queue") { await daemon.pipeline.statistics.intake.queueDepth >= 100 }
            // A watchdog period (200 ms) and more for a ping already on its way to land: the
            // watchdog's decision shows only as the pings stopping, so this is a pause.
            try await Task.sleep(for: .milliseconds(600))
            let stalled = pings()
            // The time under test: no ping may come in it.
            try await Task.sleep(for: .seconds(1.5))
            #expect(pings() == stalled, "no ping while the pipeline is stuck with updates waiting")
            #expect(await daemon.pipeline.statistics.intake.queueDepth > 0)

            await daemon.pipeline.resumeProcessing()
            try await eventually("two pings once it moves", timeout: .seconds(5)) { pings() >= stalled + 2 }
            try await eventually("all 110 updates processed") { await daemon.pipeline.statistics.processed >= 110 }
            trigger.triggerGracefulShutdown()
            try await running
        }
        await sensor.disconnect()
    }
}
