import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

/// The active's link to the broker cut in a network namespace and healed, with
/// ``FailoverTests``' replicas, recorder and feed: a suite of its own, so that its 30 s cut
/// runs beside the crashes of ``FailoverTests`` rather than after them.
@Suite("Failover: the active's link cut", .serialized, .timeLimit(.minutes(5)))
struct FailoverCutTests {
    let logger = Logger(label: "test")
    let failover = FailoverTests()

    @Test("the active's link cut for 30 s, then healed: the standby takes over, exactly one active from then on, no flapping, nothing lost")
    func cutLink() async throws {
        let namespace = try NetworkNamespace.create()
        defer { namespace.remove() }
        let outside = try freeLoopbackPort()
        let broker = try await MosquittoBroker.start(MosquittoBroker.Options(extra: ["listener \(outside) \(namespace.hostAddress)"]))
        defer { Task { await broker.stop() } }
        // The first replica in the namespace, reaching the broker over the veth pair; it
        // starts first and takes the lease.
        let directory = try TestDirectory.make(prefix: "replica-east-1")
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try FailoverTests.yaml(
            port: outside, instance: "east-1", store: directory.appendingPathComponent("state.db").path,
            brokerHost: namespace.hostAddress, httpHost: namespace.innerAddress
        ).write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await ChildProcess.start(
            NetworkNamespace.ip, ["netns", "exec", namespace.name, try CommandRunner().executable.path, "serve", "--config", configPath],
            environment: ["NOTIFY_SOCKET": notify.path])
        defer { running.signal(SIGKILL) }
        let cutOff = FailoverTests.Replica(name: "east-1", running: running, httpPort: try await DaemonTests.listeningPort(running), httpHost: namespace.innerAddress)
        #expect(await notify.wait(for: "READY=1", timeout: .seconds(60)), "\(running.standardError.suffix(3000))")
        let (first, epoch) = try await failover.active(among: [cutOff])
        #expect(first === cutOff)
        let other = try await failover.start("east-2", broker: broker)
        #expect(await failover.role(other)?.role == "standby")

        let recorder = try await FailoverTests.Recorder(port: broker.port, logger: logger)
        let feed = try await FailoverTests.Feed(port: broker.port, logger: logger)
        try await feed.send(400)
        let cutAt = ContinuousClock.now
        try namespace.cut()
        try await feed.send(400, from: 400)
        let (_, newEpoch) = try await failover.active(among: [other])
        #expect(newEpoch > epoch)
        let settledAt = ContinuousClock.now
        let takeover = recorder.styles(after: cutAt).first { $0.epoch == newEpoch }
        #expect(takeover != nil, "the standby published")
        if let takeover {
            #expect(takeover.at - cutAt <= FailoverTests.takeoverBound, "took over in \(takeover.at - cutAt)")
            print("failover: link cut to the first style under the new epoch: \(takeover.at - cutAt)")
        }
        // 30 s of cut, watching the one that took over stay active.
        var flaps = 0
        var sent = 800
        while ContinuousClock.now - cutAt < .seconds(30) {
            if await failover.role(other)?.role != "active" { flaps += 1 }
            try await feed.send(20, from: sent)
            sent += 20
        }
        try namespace.heal()
        let healedAt = ContinuousClock.now
        // After the heal: the cut-off replica reconnects, sees the higher epoch, and stays standby.
        var doubleActive = 0
        while ContinuousClock.now - healedAt < .seconds(12) {
            let roles = [await failover.role(cutOff)?.role, await failover.role(other)?.role]
            if roles.filter({ $0 == "active" }).count != 1 { doubleActive += 1 }
            try await feed.send(20, from: sent)
            sent += 20
        }
        #expect(flaps == 0, "the replica that took over stopped being active \(flaps) times during the cut")
        #expect(doubleActive == 0, "\(doubleActive) samples after the heal without exactly one active")
        let rejoined = try await eventually(
            "the healed replica to answer as a standby", timeout: .seconds(20), every: .milliseconds(250),
            observing: { await failover.role(cutOff)?.role }, until: { $0 == "standby" })
        if rejoined != "standby" { Issue.record("the healed replica: \(running.standardError.suffix(3000))") }
        let claims = recorder.all.filter { $0.topic.hasPrefix("livedata/owner/") && $0.at > settledAt }
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }
            .filter { $0["released"] == nil && ($0["epoch"] as? Int ?? 0) != newEpoch }
        #expect(claims.isEmpty, "claims after the takeover settled: \(claims)")
        let late = recorder.styles(after: settledAt).filter { $0.epoch == epoch }
        #expect(late.isEmpty, "the cut-off replica published \(late.count) styles under its old epoch")
        try await failover.expectConverged(broker, feed, active: other)
        #expect(recorder.backwards().isEmpty, "versions went backwards at \(recorder.backwards().prefix(5))")
        // Nothing lost on the standby either: its session kept what came during the cut.
        let expected = feed.expected.withLock { $0 }.count
        let tracked = try await eventually(
            "the healed replica to hold every location", timeout: .seconds(20),
            observing: {
                CrashRecoveryTests.metric(
                    (try? await LoopbackHTTP.request("GET", port: cutOff.httpPort, path: "/metrics", host: cutOff.httpHost, timeout: 2).body)
                        ?? "", "livedata_locations_tracked") ?? 0
            }, until: { $0 == Double(expected) })
        #expect(tracked == Double(expected))
        for replica in [cutOff, other] { replica.running.signal(SIGTERM) }
        for replica in [cutOff, other] { #expect(try await replica.running.result(timeout: .seconds(15)).status == 0) }
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }
}
