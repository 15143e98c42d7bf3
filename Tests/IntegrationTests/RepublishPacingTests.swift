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

    /// One occupancy update per location, QoS 1 (a hundred of them in flight).
    func fill(_ broker: MosquittoBroker) async throws {
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: kit.logger)
        try await publisher.connect()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<Self.locations {
                if index >= 100 { try await group.next() }
                group.addTask {
                    try await publisher.publish(
                        "ds1/hq/B/F\(index % 10)/R\(index % 50)/loc-\(index)/occupancy",
                        text: #"{"properties": {"nrOfPeople": "\#(1 + index % 7)"}}"#, qos: .atLeastOnce)
                }
            }
            try await group.waitForAll()
        }
        await publisher.disconnect()
    }

    /// A retained style's label.
    struct Retained: Decodable {
        struct Style: Decodable { let label: String? }
        let style: Style
    }

    /// Every location's style is retained at the broker with its own label.
    func everyStyleRetained(_ broker: MosquittoBroker) async throws -> Bool {
        let styles = try await kit.retained(broker, "livedata/style/ds1/#")
        guard styles.count == Self.locations else { return false }
        return try (0..<Self.locations).allSatisfy { index in
            guard let payload = styles["livedata/style/ds1/hq/B/F\(index % 10)/R\(index % 50)/loc-\(index)"] else { return false }
            return try JSONDecoder().decode(Retained.self, from: Data(payload.utf8)).style.label == "\(1 + index % 7)"
        }
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
            let metrics = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body
            func value(_ name: String) -> Double { CrashRecoveryTests.metric(metrics, name) ?? -1 }
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
}
