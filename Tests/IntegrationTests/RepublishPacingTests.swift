import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

/// A broker that lost every retained style gets them all again, paced by its in-flight
/// window: the daemon takes each style from its state as the window makes room, so what it
/// holds waiting or unacknowledged stays within a bound far below the number of locations.
@Suite("Republishing to an empty broker", .timeLimit(.minutes(5)))
struct RepublishPacingTests {
    let kit = PartitionedDaemonsTests()
    static let locations = 6_000
    /// The broker's in-flight window for each of the daemon's connections: small, as
    /// mosquitto's default (20) is, so that the republication must wait for acknowledgements.
    static let inFlight = 10

    static func yaml(port: Int, store: String) -> String {
        """
        broker: {host: 127.0.0.1, port: \(port), clientId: republish, keepalive: 5s}
        subscriptions:
          - {dataset: ds1, domain: occupancy}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", label: "{nrOfPeople}"}
        store: {path: \(store)}
        http: {listen: "127.0.0.1:0"}
        """
    }

    /// One occupancy update per location, QoS 1 (a hundred of them in flight) unless `qos`
    /// says otherwise; `shift` moves every location's count (and so its label) to another
    /// value.
    func fill(_ broker: MosquittoBroker, shift: Int = 0, qos: MQTTQoS = .atLeastOnce) async throws {
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: kit.logger)
        try await publisher.connect()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<Self.locations {
                if index >= 100 { try await group.next() }
                group.addTask {
                    try await publisher.publish(
                        "ds1/hq/B/F\(index % 10)/R\(index % 50)/loc-\(index)/occupancy",
                        text: #"{"properties": {"nrOfPeople": "\#(Self.people(index, shift: shift))"}}"#, qos: qos)
                }
            }
            try await group.waitForAll()
        }
        await publisher.disconnect()
    }

    /// The people a fill reports at a location.
    static func people(_ index: Int, shift: Int) -> Int { 1 + (index + shift) % 7 }

    /// A retained style's label.
    struct Retained: Decodable {
        struct Style: Decodable { let label: String? }
        let style: Style
    }

    /// Every location's style is retained at the broker with its own label (that of the fill
    /// of `shift`).
    func everyStyleRetained(_ broker: MosquittoBroker, shift: Int = 0) async throws -> Bool {
        let styles = try await kit.retained(broker, "livedata/style/ds1/#")
        guard styles.count == Self.locations else { return false }
        return try (0..<Self.locations).allSatisfy { index in
            guard let payload = styles["livedata/style/ds1/hq/B/F\(index % 10)/R\(index % 50)/loc-\(index)"] else { return false }
            return try JSONDecoder().decode(Retained.self, from: Data(payload.utf8)).style.label == "\(Self.people(index, shift: shift))"
        }
    }

    /// The daemon's metrics, read once, as a lookup (-1 for one it does not report).
    func metrics(_ daemon: PartitionedDaemonsTests.Daemon) async throws -> (String) -> Double {
        let text = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
        return { CrashRecoveryTests.metric(text, $0) ?? -1 }
    }

    @Test(
        "a broker restarted empty gets every style again through a small in-flight window, with the daemon's waiting and unacknowledged publications within the bound the metrics report"
    )
    func republishToEmptyBroker() async throws {
        let broker = try await MosquittoBroker.start(
            MosquittoBroker.Options(extra: ["max_inflight_messages \(Self.inFlight)"]))
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "republish")
        let daemon = try await kit.start(Self.yaml(port: broker.port, store: directory.appendingPathComponent("state.db").path), in: directory)
        try await fill(broker)
        try await eventually("every location's style at the broker", timeout: .seconds(60)) { try await everyStyleRetained(broker) }
        let finishedBefore = try await kit.metric(daemon, #"livedata_convergences_total{outcome="finished"}"#)

        // Without persistence, the broker comes back with nothing retained and no session.
        try await broker.restart()
        try await eventually("a convergence after the broker's restart, and the output drained", timeout: .seconds(90)) {
            let value = try await metrics(daemon)
            return value(#"livedata_convergences_total{outcome="finished"}"#) > finishedBefore && value("livedata_republish_remaining") == 0
                && value("livedata_output_waiting") == 0 && value("livedata_output_in_flight") == 0
        }
        try await eventually("every style retained again, none lost", timeout: .seconds(30)) { try await everyStyleRetained(broker) }

        let republished = try await kit.metric(daemon, "livedata_republished_total")
        let peak = try await kit.metric(daemon, "livedata_republish_outstanding_peak")
        let bound = try await kit.metric(daemon, "livedata_republish_outstanding_bound")
        print("republication behind a window of \(Self.inFlight): \(Int(republished)) styles published again, at most \(Int(peak)) waiting or in flight (bound \(Int(bound)))")
        #expect(republished >= Double(Self.locations), "styles published again: \(republished)")
        // The window was full at times (so the walk waited for acknowledgements), and what
        // waited or was in flight never passed the bound, itself far below the locations.
        #expect(peak >= Double(Self.inFlight), "outstanding at most \(peak)")
        #expect(peak <= bound, "outstanding at most \(peak), bound \(bound)")
        #expect(bound > 0 && bound <= Double(Self.locations) / 5, "bound \(bound)")
        #expect(daemon.running.standardError.contains("styles the broker did not hold"))

        daemon.running.signal(SIGTERM)
        #expect(try await daemon.running.result(timeout: .seconds(15)).status == 0)
    }

    /// The most outstanding publications the metrics reported, and the bound they reported
    /// with it, sampled until cancelled.
    actor OutstandingSamples {
        private(set) var worst: (peak: Double, bound: Double)?
        private(set) var count = 0

        func sample(_ metrics: String) {
            guard let peak = CrashRecoveryTests.metric(metrics, "livedata_republish_outstanding_peak"),
                let bound = CrashRecoveryTests.metric(metrics, "livedata_republish_outstanding_bound"), bound > 0
            else { return }
            count += 1
            if peak - bound > (worst.map { $0.peak - $0.bound } ?? -.infinity) { worst = (peak, bound) }
        }
    }

    @Test(
        "the one replica of a failover partition, its broker restarted empty, gets every style again on its lease's connection, its republication's outstanding publications within the bound at every moment though live updates fill the line meanwhile"
    )
    func republishToEmptyBrokerAsFailoverReplica() async throws {
        let broker = try await MosquittoBroker.start(
            MosquittoBroker.Options(extra: ["max_inflight_messages \(Self.inFlight)"]))
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "republish-failover")
        var file = DaemonConfigFile(brokerPort: broker.port, clientId: "republish", store: directory.appendingPathComponent("state.db").path)
        file.replica("republish-1", of: "republish")
        file.rules = DaemonConfigFile.occupiedRule(label: "{nrOfPeople}")
        let daemon = try await kit.start(file.yaml, in: directory)
        // From the start on, as an operator's scrape would: the figure is to hold whenever read.
        let samples = OutstandingSamples()
        let sampler = Task {
            while !Task.isCancelled {
                if let metrics = try? await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body {
                    await samples.sample(metrics)
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        defer { sampler.cancel() }

        // The fill comes while the replica claims its lease, as at a start beside a live
        // stream: what came before the claim is published by the claim's convergence.
        try await fill(broker)
        try await eventually("the replica active, every location's style at the broker", timeout: .seconds(90)) {
            let active = try await kit.metric(daemon, #"livedata_failover_active{partition="republish"}"#) == 1
            guard active else { return false }
            return try await everyStyleRetained(broker)
        }
        let finishedBefore = try await kit.metric(daemon, #"livedata_convergences_total{outcome="finished"}"#)
        let republishedBefore = try await kit.metric(daemon, "livedata_republished_total")

        // Without persistence, the broker comes back with nothing retained and no lease: the
        // lease's connection ends with it, the replica claims again and converges.
        try await broker.restart()
        try await eventually("a republication under way after the broker's restart", timeout: .seconds(60)) {
            let value = try await metrics(daemon)
            return value(#"livedata_convergences_total{outcome="finished"}"#) > finishedBefore && value("livedata_republish_remaining") > 0
        }
        // Live updates of every location while the walk runs: they fill the line faster than
        // the window empties it, and the walk waits behind them.
        try await fill(broker, shift: 3)
        try await eventually("the republication over and the output drained", timeout: .seconds(120)) {
            let value = try await metrics(daemon)
            return value("livedata_republish_remaining") == 0 && value("livedata_output_waiting") == 0 && value("livedata_output_in_flight") == 0
                && value("livedata_updates_received_total") >= Double(2 * Self.locations)
        }
        try await eventually("every style retained again with the live updates' labels, none lost", timeout: .seconds(30)) {
            try await everyStyleRetained(broker, shift: 3)
        }
        sampler.cancel()

        let republished = try await kit.metric(daemon, "livedata_republished_total") - republishedBefore
        let peak = try await kit.metric(daemon, "livedata_republish_outstanding_peak")
        let bound = try await kit.metric(daemon, "livedata_republish_outstanding_bound")
        let worst = await samples.worst
        let sampled = await samples.count
        print(
            "failover republication behind a window of \(Self.inFlight): \(Int(republished)) styles published again, at most \(Int(peak)) waiting or in flight (bound \(Int(bound))); worst sample \(worst.map { "\(Int($0.peak)) of \(Int($0.bound))" } ?? "none") in \(sampled)"
        )
        // The walk published what no live update had by the time it got there.
        #expect(republished > 0, "styles published again: \(republished)")
        #expect(peak >= Double(Self.inFlight), "outstanding at most \(peak)")
        #expect(peak <= bound, "outstanding at most \(peak), bound \(bound)")
        // One connection (the lease's): its window and the 1,024 let wait.
        #expect(bound > 0 && bound <= Double(Self.locations) / 5, "bound \(bound)")
        #expect(sampled > 10)
        if let worst { #expect(worst.peak <= worst.bound, "a sample reported \(worst.peak) outstanding, bound \(worst.bound)") }
        #expect(daemon.running.standardError.contains("styles the broker did not hold"))

        daemon.running.signal(SIGTERM)
        #expect(try await daemon.running.result(timeout: .seconds(15)).status == 0)
    }
}
