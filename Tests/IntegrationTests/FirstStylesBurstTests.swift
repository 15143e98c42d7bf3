import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

/// A burst of new locations faster than the broker's window lets their styles out: their
/// first styles wait as the locations, each made from the state as the window makes room,
/// rather than as a change each in the output's line.
@Suite("New locations' first styles in a burst", .timeLimit(.minutes(5)))
struct FirstStylesBurstTests {
    let pacing = RepublishPacingTests()
    /// The broker's in-flight window for each of the daemon's connections: two, so that the
    /// burst outruns the styles however loaded the machine is.
    static let window = 2

    @Test(
        "new locations published faster than a small window lets their styles out, each twice: their first styles wait as locations, and every location ends with its last style, those that changed while waiting too"
    )
    func burstOfNewLocations() async throws {
        let broker = try await MosquittoBroker.start(
            MosquittoBroker.Options(extra: ["max_inflight_messages \(Self.window)", "max_queued_messages 100000"]))
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "first-styles")
        let yaml = RepublishPacingTests.yaml(port: broker.port, store: directory.appendingPathComponent("state.db").path)
        let daemon = try await pacing.kit.start(yaml, in: directory)
        // Converged first: from then on every change goes through the output's line, none
        // is left to a convergence.
        try await eventually("/readyz to answer 200", timeout: .seconds(30)) {
            try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/readyz").status == 200
        }

        // Every location twice, at QoS 0: the broker hands them over without waiting for the
        // daemon's acknowledgements, far faster than its window of two lets the styles out.
        try await pacing.fill(broker, qos: .atMostOnce)
        try await pacing.fill(broker, shift: 3, qos: .atMostOnce)
        try await eventually("the burst taken and the output drained", timeout: .seconds(120)) {
            let value = try await pacing.metrics(daemon)
            return value("livedata_updates_received_total") >= Double(2 * RepublishPacingTests.locations)
                && value("livedata_output_waiting") == 0 && value("livedata_output_in_flight") == 0
        }
        try await eventually("every style retained with its last label, none lost", timeout: .seconds(30)) {
            try await pacing.everyStyleRetained(broker, shift: 3)
        }
        let waited = try await pacing.kit.metric(daemon, "livedata_output_first_styles_waited_total")
        print("first styles behind a window of \(Self.window): \(Int(waited)) of \(RepublishPacingTests.locations) waited as their locations")
        #expect(waited > 0, "no first style waited as its location")
        #expect(try await pacing.kit.metric(daemon, "livedata_output_first_styles_waiting") == 0)

        daemon.running.signal(SIGTERM)
        #expect(try await daemon.running.result(timeout: .seconds(15)).status == 0)
    }
}
