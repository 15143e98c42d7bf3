import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Synchronization
import Testing

/// The broker killed under the daemon, with its persistence: restarted from a save taken
/// every second, and restored again and again from a save that lacks its last seconds. With
/// ``CrashRecoveryTests``' stream and checks, as a suite of its own, so that it runs beside
/// the daemon's crashes rather than after them.
@Suite("Crash recovery: the broker killed", .timeLimit(.minutes(5)), .serialized)
struct BrokerCrashRecoveryTests {
    let logger = Logger(label: "test")
    let recovery = CrashRecoveryTests()

    @Test("the broker SIGKILLed and restarted with its persistence mid-stream: the daemon catches up and the broker converges")
    func brokerKilled() async throws {
        let updates = 30_000
        let locations = CrashRecoveryTests.floors * CrashRecoveryTests.perFloor
        // Saved every second: a SIGKILL loses at most the last second of the broker's state.
        let broker = try await MosquittoBroker.start(
            MosquittoBroker.Options(extra: ["persistence true", "autosave_interval 1", "autosave_on_changes false"]))
        let (watcher, seen) = try await recovery.watcher(broker)
        let daemon = try await DaemonTests().startDaemon(port: broker.port, snapshotInterval: "300ms")
        #expect(await daemon.notify.wait(for: "READY=1"))
        let seed = SplitMix64.testSeed("the broker's kill times and the stream")
        var random = SplitMix64(seed: seed)
        let stream = CrashRecoveryTests.Stream(seed: seed &+ 1)
        let publishing = Task { try await recovery.publish(stream, count: updates, locations: locations, broker: broker) }
        for _ in 0..<2 {
            try await eventually("a third of the stream published", timeout: .seconds(60), every: .milliseconds(20)) {
                stream.published.load(ordering: .relaxed) >= updates / 3
            }
            // The kill's random moment: the fault under test, not a wait for anything.
            try await Task.sleep(for: .milliseconds(Int.random(in: 100...600, using: &random)))
            try await broker.restart(after: .milliseconds(300))
        }
        try await publishing.value
        let records = try await recovery.waitForLastValues(stream, locations: locations, port: daemon.httpPort)
        #expect(records.count == locations)
        try await recovery.waitForConvergence(daemon)
        try await recovery.waitForOutput(port: daemon.httpPort)
        try await recovery.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        await watcher.disconnect()
    }

    @Test("the broker restored again and again from a save that lacks its last seconds, under a stream: no retained style stays stale")
    func brokerRestoredFromSave() async throws {
        let locations = CrashRecoveryTests.floors * CrashRecoveryTests.perFloor
        // No autosave: the broker saves when the test says (SIGUSR1), and a kill loses what
        // it acknowledged since, styles and sync markers alike.
        let broker = try await MosquittoBroker.start(MosquittoBroker.Options(extra: ["persistence true", "autosave_interval 0"]))
        let (watcher, seen) = try await recovery.watcher(broker)
        let daemon = try await DaemonTests().startDaemon(port: broker.port)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let stream = CrashRecoveryTests.Stream()
        try await recovery.publish(stream, count: locations, locations: locations, broker: broker)
        try await recovery.waitForOutput(port: daemon.httpPort)
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "crash-streamer"
        let publisher = try MQTTClient(configuration: configuration, logger: logger)
        try await publisher.connect()
        // About 150 updates a second through every save, kill and restart, over one floor's
        // locations at a time: the floor of a cycle gets no update after its kill, so that
        // none of its styles is published again but by what the daemon does after the restart.
        let floor = Atomic<Int>(0)
        let streaming = Task {
            var index = locations
            while !Task.isCancelled {
                let location = floor.load(ordering: .relaxed) + CrashRecoveryTests.floors * (index % CrashRecoveryTests.perFloor)
                let payload = stream.payload(index, location: location)
                while !CrashRecoveryTests.send(publisher, CrashRecoveryTests.topic(location), payload) { try await Task.sleep(for: .milliseconds(50)) }
                index += 1
                try await Task.sleep(for: .milliseconds(5))  // the stream's pace
            }
        }
        for cycle in 0..<CrashRecoveryTests.floors - 1 {
            // The stream's time before the save, then after it: the seconds the kill takes
            // away, across which the daemon's markers keep being acknowledged.
            try await Task.sleep(for: .seconds(1))
            #expect(try await broker.save(), "mosquitto did not save on SIGUSR1:\n\(broker.log.suffix(2000))")
            try await Task.sleep(for: .milliseconds(2500))
            floor.store(cycle + 1, ordering: .relaxed)
            let checked = recovery.checks(daemon)
            try await broker.restart(after: .seconds(5))
            try await eventually("the daemon to find its session at the restored broker", timeout: .seconds(60)) {
                recovery.checks(daemon) > checked
            }
            try await recovery.waitForConvergence(daemon)
        }
        streaming.cancel()
        _ = await streaming.result
        await publisher.disconnect()
        try await recovery.waitForConvergence(daemon)
        try await recovery.waitForOutput(port: daemon.httpPort)
        let reconnections = daemon.running.standardError.split(separator: "\n").filter { $0.contains(CrashRecoveryTests.sessionResumed) }
        print("broker restored from its save: \(reconnections.map { $0.contains("holds the last marker") ? "marker held" : "full read" })")
        // What the broker lost of the stream before the daemon got it is the broker's loss;
        // what the daemon holds, the broker must hold.
        try await recovery.checkConvergence(port: daemon.httpPort, broker: broker, seen: seen)
        daemon.signal(SIGTERM)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        await watcher.disconnect()
    }
}
