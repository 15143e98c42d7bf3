import Foundation
import LiveDataTestSupport
import Mosquitto
import Testing

/// A read that returns fewer retained styles than the broker's marker counted is not taken
/// at its word: the broker is asked for a sample of the missing ones by their own topics.
@Suite("Convergence evidence", .timeLimit(.minutes(3)))
struct ConvergenceEvidenceTests {
    let kit = PartitionedDaemonsTests()

    @Test(
        "styles cleared at the broker behind the daemon's back while it was down, with its marker or without: the sample shows them missing, they are published again, and it is no short read",
        arguments: [false, true])
    func missingStylesAreRepublished(withoutMarker: Bool) async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "evidence")
        let yaml = PartitionedDaemonsTests.yaml(
            port: broker.port, name: "east", owns: "A", store: directory.appendingPathComponent("state.db").path)
        var daemon = try await kit.start(yaml, in: directory)
        try await kit.fill(broker, building: "A", people: 2)
        try await kit.styles(broker, building: "A", showing: "#D64545")
        let count = PartitionedDaemonsTests.perBuilding
        try await eventually("a marker counting every location, at either of the markers' topics", timeout: .seconds(15)) {
            try await kit.retained(broker, "livedata/checkpoint/#").values.contains { $0.contains(#""locations": \#(count)"#) }
        }
        daemon.running.signal(SIGKILL)
        _ = try await daemon.running.wait(timeout: .seconds(10))
        // Ten styles cleared by someone else while the daemon is down.
        let client = try MQTTClient(configuration: .test(port: broker.port), logger: kit.logger)
        try await client.connect()
        for index in 0..<10 {
            try await client.publish("livedata/style/ds1/hq/A/F1/R\(index)/a-\(index)", payload: [], qos: .atLeastOnce, retain: true)
        }
        if withoutMarker {
            for topic in ["livedata/checkpoint/east", "livedata/checkpoint/east/alternate"] {
                try await client.publish(topic, payload: [], qos: .atLeastOnce, retain: true)
            }
        }
        await client.disconnect()
        #expect(try await kit.retained(broker, "livedata/style/ds1/hq/A/#").count == count - 10)
        daemon = try await kit.start(yaml, in: directory)
        try await kit.styles(broker, building: "A", showing: "#D64545")
        #expect(try await kit.metric(daemon, "livedata_convergence_short_reads_total") == 0)
        #expect(daemon.running.standardError.contains("a sample of the missing ones is missing: publishing them again"))
        daemon.running.signal(SIGTERM)
        #expect(try await daemon.running.result(timeout: .seconds(15)).status == 0)
    }
}
