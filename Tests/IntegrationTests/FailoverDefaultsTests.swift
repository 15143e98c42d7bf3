import Foundation
import LiveDataTestSupport
import Logging
import Testing

/// Replicas whose config sets no `broker.keepalive` (failover's default, 5 s): a standby takes
/// over within about 10 s of the active's death, killed (SIGKILL) or paused (SIGSTOP: no will
/// tells the broker, the lease has to expire).
@Suite("Failover with the default timing", .serialized, .timeLimit(.minutes(5)))
struct FailoverDefaultsTests {
    let logger = Logger(label: "test")
    /// The README's promise for the defaults.
    static let takeoverBound = Duration.seconds(10)

    static func yaml(port: Int, instance: String, store: String) -> String {
        var file = DaemonConfigFile(brokerPort: port, clientId: instance, store: store)
        file.keepalive = nil
        file.replica(instance, of: "east")
        file.rules = DaemonConfigFile.occupiedRule(label: "{nrOfPeople}/{capacity}")
        return file.yaml
    }

    func start(_ name: String, broker: MosquittoBroker) async throws -> FailoverTests.Replica {
        let directory = try TestDirectory.make(prefix: "defaults-\(name)")
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try Self.yaml(port: broker.port, instance: name, store: directory.appendingPathComponent("state.db").path)
            .write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await CommandRunner().start(["serve", "--config", configPath], environment: ["NOTIFY_SOCKET": notify.path])
        let port = try await DaemonTests.listeningPort(running)
        #expect(await notify.wait(for: "READY=1", timeout: .seconds(60)), "\(name): \(running.standardError.suffix(3000))")
        return FailoverTests.Replica(name: name, running: running, httpPort: port, notify: notify)
    }

    @Test("no keepalive set: the active killed (SIGKILL) or paused (SIGSTOP), a standby publishes within 10 s", arguments: [SIGKILL, SIGSTOP])
    func takeover(signal: Int32) async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let failover = FailoverTests()
        let (active, standby, epoch, recorder, feed) = try await failover.pair(broker) { try await start($0, broker: broker) }
        try await feed.send(200)
        let diedAt = ContinuousClock.now
        active.running.signal(signal)
        // Updates keep coming: the first style under the next epoch is the takeover's end.
        try await feed.send(1_000, from: 200, pause: .milliseconds(20))
        let (taker, newEpoch) = try await failover.active(among: [standby], timeout: .seconds(30))
        #expect(taker === standby)
        #expect(newEpoch > epoch)
        let published = recorder.styles(after: diedAt).first { $0.epoch == newEpoch }
        #expect(published != nil, "the new active published")
        if let published {
            let took = published.at - diedAt
            #expect(took <= Self.takeoverBound, "took over in \(took)")
            print("failover defaults: signal \(signal) to the first style under the new epoch: \(took)")
        }
        if signal == SIGSTOP { active.running.signal(SIGKILL) }
        standby.running.signal(SIGTERM)
        #expect(try await standby.running.result(timeout: .seconds(15)).status == 0)
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }
}
