import Foundation
import Hummingbird
import HummingbirdTesting
import LiveDataConfiguration
@testable import LiveDataServer
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Testing

/// The HTTP routes in process (HummingbirdTesting's router framework): a pipeline fed
/// messages directly, with a client that never connects.
@Suite("HTTP interface")
struct HTTPInterfaceTests {
    static let yaml = """
        subscriptions:
          - {dataset: ds1, domain: occupancy}
          - {dataset: ds2, domain: occupancy}
        styles:
          main: {visible: true, polygonFillColor: "#E0E0E0"}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545"}
            layer: occupancy
        store: {path: ":memory:"}
        """

    func pipeline(metrics: DaemonMetrics, events: EventHub = EventHub()) async throws -> LivePipeline {
        let config = try LiveDataConfig.parse(yaml: Self.yaml, file: "test.yaml")
        // Port 1 is never listened on: the client is built, not started.
        let intake = try Intake(config: config, logger: Logger(label: "test"))
        let client = try intake.makeClient(
            configuration: MQTTConfiguration(host: "127.0.0.1", port: 1), logger: Logger(label: "test"))
        let pipeline = LivePipeline(
            config: config, client: client, intake: intake, metrics: metrics, logger: Logger(label: "test"), events: events)
        try await pipeline.start()
        for (location, floor, people) in [("room-7", "F3", 3), ("room-9", "F4", 0), ("desk-1", "F3", 1)] {
            await pipeline.handle(
                IntakeMessage(
                    topic: "ds1/hq/B/\(floor)/R/\(location)/occupancy",
                    payload: Array(#"{"timestamp": 1763720000000, "properties": {"nrOfPeople": "\#(people)"}}"#.utf8)))
        }
        return pipeline
    }

    func withRoutes(
        token: String?, extra topics: [String] = [], _ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        let metrics = DaemonMetrics()
        let pipeline = try await pipeline(metrics: metrics)
        for topic in topics {
            await pipeline.handle(
                IntakeMessage(topic: topic, payload: Array(#"{"properties": {"nrOfPeople": "1"}}"#.utf8)))
        }
        let app = Application(router: HTTPInterface.router(token: token, queries: LiveQueries(pipeline), metrics: metrics))
        try await app.test(.router) { client in try await test(RecordingClient(client)) }
    }

    static func text(_ response: TestResponse) -> String { String(buffer: response.body) }

    @Test("health, readiness (not ready without a broker), location, floor, legend and layers")
    func reads() async throws {
        try await withRoutes(token: nil) { client in
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(Self.text(ready).contains("waiting for the MQTT broker"))
            let location = try await client.execute(uri: "/v1/locations/desk-1", method: .get)
            #expect(location.status == .ok)
            #expect(Self.text(location).hasPrefix(#"{"location": "desk-1""#))
            #expect(try await client.execute(uri: "/v1/locations/nowhere", method: .get).status == .notFound)
            let floor = Self.text(try await client.execute(uri: "/v1/floors/ds1/hq/B/F3", method: .get))
            #expect(floor.contains(#""location": "desk-1""#) && floor.contains(#""location": "room-7""#))
            #expect(!floor.contains(#""floor": "F4""#))
            #expect(Self.text(try await client.execute(uri: "/v1/layers", method: .get)) == #"{"layers":[{"hidden":false,"name":"occupancy"}]}"#)
        }
    }

    @Test("a bare id held in two datasets is a conflict that lists both paths; a full path answers one")
    func ambiguousID() async throws {
        try await withRoutes(token: nil, extra: ["ds2/hq/B/F3/R/room-7/occupancy"]) { client in
            let both = try await client.execute(uri: "/v1/locations/room-7", method: .get)
            #expect(both.status == .conflict)
            let body = Self.text(both)
            #expect(body.contains(#""/v1/locations/ds1/hq/B/F3/R/room-7""#) && body.contains(#""/v1/locations/ds2/hq/B/F3/R/room-7""#))
            let one = try await client.execute(uri: "/v1/locations/ds2/hq/B/F3/R/room-7", method: .get)
            #expect(one.status == .ok)
            #expect(Self.text(one).contains(#""dataset": "ds2""#))
            #expect(try await client.execute(uri: "/v1/locations/ds1/hq/B/F9/R/room-7", method: .get).status == .notFound)
        }
    }

    @Test("metrics come from the Prometheus registry: copied counters, gauges and the library's histogram")
    func metrics() async throws {
        try await withRoutes(token: nil) { client in
            let first = Self.text(try await client.execute(uri: "/metrics", method: .get))
            #expect(first.contains("livedata_updates_received_total 3"))
            #expect(first.contains("livedata_updates_applied_total 3"))
            #expect(first.contains(#"livedata_updates_rejected_total{reason="bad_payload"} 0"#))
            #expect(first.contains("livedata_locations_tracked 3"))
            #expect(first.contains("livedata_broker_connected 0"))
            #expect(first.contains("livedata_processing_seconds_count 3"))
            #expect(first.contains(#"livedata_processing_seconds_bucket{le="1.0"} 3"#))
            // A second scrape copies nothing twice.
            let second = Self.text(try await client.execute(uri: "/metrics", method: .get))
            #expect(second.contains("livedata_updates_received_total 3"))
        }
    }

    @Test("the token comparison", arguments: [
        ("Bearer sesame", true), ("Bearer sesamE", false), ("Bearer sesame ", false), ("Bearer sesam", false), ("", false),
        ("Bearer ", false),
    ])
    func tokenComparison(header: String, accepted: Bool) {
        #expect(BearerTokenMiddleware<BasicRequestContext>.sameInConstantTime(header, "Bearer sesame") == accepted)
    }

    @Test("layer writes need the bearer token; without a configured token writing is off")
    func tokenGuard() async throws {
        try await withRoutes(token: "sesame") { client in
            let body = ByteBuffer(string: #"{"hidden": true}"#)
            #expect(try await client.execute(uri: "/v1/layers/occupancy", method: .put, body: body).status == .unauthorized)
            let wrong = try await client.execute(uri: "/v1/layers/occupancy", method: .put, headers: [.authorization: "Bearer nope"], body: body)
            #expect(wrong.status == .unauthorized)
            let right = try await client.execute(uri: "/v1/layers/occupancy", method: .put, headers: [.authorization: "Bearer sesame"], body: body)
            #expect(right.status == .ok)
            // The two occupied locations are in the layer; the empty room matches no rule.
            #expect(Self.text(right) == #"{"changed":2,"hidden":true,"layer":"occupancy"}"#)
            let bad = try await client.execute(
                uri: "/v1/layers/occupancy", method: .put, headers: [.authorization: "Bearer sesame"], body: ByteBuffer(string: "[]"))
            #expect(bad.status == .badRequest)
        }
        try await withRoutes(token: nil) { client in
            let off = try await client.execute(uri: "/v1/layers/occupancy", method: .put, body: ByteBuffer(string: #"{"hidden": true}"#))
            #expect(off.status == .forbidden)
        }
    }
}
