import Foundation
import Hummingbird
import HummingbirdTesting
import LiveDataConfiguration
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Testing

@testable import LiveDataServer

/// The venue page's routes in process: the page and its assets, the venue's plan (footprints,
/// floors in elevation order, default floors, thresholds) and the snapshots of the scopes it
/// asks for (a floor, the buildings' summaries, one location).
@Suite("Venue view routes")
struct VenueViewHTTPTests {
    static let yaml = """
        subscriptions:
          - {dataset: ds1}
        rules:
          - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545"}, legend: Occupied}
        store: {path: ":memory:"}
        venueView:
          autoFocus: false
          indoorZoom: 19
          outdoorZoom: 17
          buildings:
            B: {defaultFloor: L2, elevations: {L1: -3.5, L2: 0.5}}
        """

    static func square(_ x: Double) -> VenueGeometry.Shape { .polygon([[[x, 0], [x + 1, 0], [x + 1, 1], [x, 1], [x, 0]]]) }

    static func pipeline() async throws -> LivePipeline {
        var config = try LiveDataConfig.parse(yaml: Self.yaml, file: "test.yaml")
        var features: [VenueGeometry.Feature] = []
        for (building, floor, x, elevation) in [("A", "F2", 0.0, 4.0), ("A", "F1", 0.0, 0.0), ("B", "L1", 5.0, nil), ("B", "L3", 5.0, nil)] {
            var feature = VenueGeometry.Feature(
                id: "\(building)-\(floor)", dataset: "ds1", venue: "hq", building: building, floor: floor, shape: Self.square(x))
            feature.elevation = elevation
            features.append(feature)
        }
        config.geometry = VenueGeometry(features: features)
        let intake = try Intake(config: config, logger: Logger(label: "test"))
        let client = try intake.makeClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: 1), logger: Logger(label: "test"))
        let pipeline = LivePipeline(
            config: config, client: client, intake: intake, metrics: DaemonMetrics(), logger: Logger(label: "test"), events: EventHub())
        try await pipeline.start()
        for (topic, properties) in [
            ("ds1/hq/A/F1/R/room-1/occupancy", #"{"nrOfPeople": "2"}"#), ("ds1/hq/B/L2/R/room-2/occupancy", #"{"nrOfPeople": "0"}"#),
            ("ds1/hq/B/L1/R/cart/position", #"{"latitude": "55.6", "longitude": "12.5", "floorIndex": "0"}"#),
        ] {
            await pipeline.handle(IntakeMessage(topic: topic, payload: Array(#"{"timestamp": 1763720000000, "properties": \#(properties)}"#.utf8)))
        }
        return pipeline
    }

    func withRoutes(_ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let pipeline = try await Self.pipeline()
        let app = Application(router: HTTPInterface.router(token: nil, queries: LiveQueries(pipeline), metrics: DaemonMetrics()))
        try await app.test(.router, test)
    }

    @Test("the venue's plan: each building's footprint and floors, lowest first, elevations from the geometry or the config, the default floor, the thresholds")
    func layout() async throws {
        try await withRoutes { client in
            let response = try await client.execute(uri: "/v1/venues/ds1/hq", method: .get)
            #expect(response.status == .ok)
            let layout = try JSONDecoder().decode(VenueLayout.self, from: Data(buffer: response.body))
            #expect(layout.view == .init(autoFocus: false, indoorZoom: 19, outdoorZoom: 17))
            #expect(layout.buildings.map(\.building) == ["A", "B"])
            let a = layout.buildings[0]
            #expect(a.floors == [.init(floor: "F1", elevation: 0), .init(floor: "F2", elevation: 4)])
            #expect(a.defaultFloor == "F1")
            #expect(a.footprint == [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]])
            let b = layout.buildings[1]
            // L2 has no shape but reports: a floor of B all the same; L3 has no elevation: last.
            #expect(b.floors == [.init(floor: "L1", elevation: -3.5), .init(floor: "L2", elevation: 0.5), .init(floor: "L3", elevation: nil)])
            #expect(b.defaultFloor == "L2")
            let other = try await client.execute(uri: "/v1/venues/ds1/elsewhere", method: .get)
            #expect(String(buffer: other.body).contains(#""buildings":[]"#))
        }
    }

    @Test("the page is venue.html with its placeholders filled; its script and style sheet are their files")
    func page() async throws {
        try await withRoutes { client in
            let page = try await client.execute(uri: "/venues/ds1/main%20site", method: .get)
            #expect(page.status == .ok && page.headers[.contentType] == "text/html; charset=utf-8")
            let text = String(buffer: page.body)
            #expect(text.contains(#"data-dataset="ds1" data-venue="main site""#) && !text.contains("{{"))
            for (path, file) in [("/assets/venue.js", "venue.js"), ("/assets/venue.css", "venue.css")] {
                let asset = try await client.execute(uri: path, method: .get)
                #expect(Array(buffer: asset.body) == Array(try Data(contentsOf: FloorPageTests.assets.appendingPathComponent(file))))
            }
        }
    }
}

/// The snapshots of the venue view's scopes, read over HTTP as a browser's EventSource would.
@Suite("Venue view snapshots")
struct VenueViewSnapshotTests {
    @Test("a summaries-only scope starts from its buildings' summaries alone; a location's from that location wherever it is; a floor's from its locations and summaries")
    func snapshots() async throws {
        let pipeline = try await VenueViewHTTPTests.pipeline()
        let app = Application(
            router: HTTPInterface.router(token: nil, queries: LiveQueries(pipeline), metrics: DaemonMetrics()),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let port = try #require(client.port)
            func snapshot(_ query: String) async throws -> String {
                let viewer = try await EventStreamViewer.open(port: port, path: "/v1/events?" + query)
                #expect(await viewer.wait { events, _ in events.first?.name == "snapshot" })
                await viewer.close()
                // Compared without spaces: the records and summaries are written by different writers.
                return (viewer.events.first?.data ?? "").replacingOccurrences(of: " ", with: "")
            }
            let summaries = try await snapshot("dataset=ds1&venue=hq&only=summaries&building=A&building=B")
            #expect(summaries.contains(#""locations":[]"#))
            #expect(summaries.contains(#""building":"A""#) && summaries.contains(#""building":"B""#), "\(summaries)")
            #expect(!summaries.contains(#""floor":"#), "floor summaries are left out: \(summaries)")
            let one = try await snapshot("dataset=ds1&venue=hq&only=summaries&building=B")
            #expect(!one.contains(#""building":"A""#), "\(one)")
            let cart = try await snapshot("dataset=ds1&venue=hq&location=cart")
            #expect(cart.contains(#""location":"cart""#) && !cart.contains("room-"), "\(cart)")
            #expect(cart.contains(#""summaries":[]"#), "\(cart)")
            let floor = try await snapshot("dataset=ds1&venue=hq&building=A&floor=F1")
            #expect(floor.contains(#""location":"room-1""#) && !floor.contains("cart") && floor.contains(#""floor":"F1""#), "\(floor)")
        }
    }
}
