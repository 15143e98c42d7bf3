import Foundation
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Testing

/// The contract map clients build on (`docs/asyncapi.yaml`, `docs/openapi.yaml`), checked
/// against what real daemons on a real broker send.
@Suite("Contract: the documents hold for real traffic", .serialized, .timeLimit(.minutes(5)))
struct ContractTests {
    let logger = Logger(label: "test")

    /// Two partitions of building A and B; west's is a failover partition of one replica (a
    /// lease, and an epoch in what it publishes); an asset that moves within A and then to B
    /// (a clear, an arrival).
    static func yaml(port: Int, name: String, building: String, failover: Bool, store: String) -> String {
        """
        instance: \(name)-1
        partition:
          name: \(name)
          owns:
            - {dataset: ds1, venue: hq, building: \(building)}
          failover: \(failover)
        broker: {host: 127.0.0.1, port: \(port), clientId: \(name), keepalive: 5s}
        subscriptions:
          - {dataset: ds1, domain: occupancy}
          - {dataset: ds1, domain: position}
          - {dataset: ds1, domain: cleaning}
        styles:
          main: {visible: true, zoomFrom: 16, zoomTo: 22, polygonFillColor: "#E0E0E0", polygonFillOpacity: 0.6, displayRank: 2}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", label: "{nrOfPeople}/{capacity}", badge: {text: "{nrOfPeople}", textColor: "#FFFFFF", backgroundColor: "#D64545"}}
            legend: Occupied
            layer: occupancy
          - name: vacant
            domain: occupancy
            when: nrOfPeople == 0
            style: {polygonFillColor: "#4CAF50", icon: free, iconSize: 24}
            legend: Vacant
            layer: occupancy
        store: {path: \(store)}
        http: {listen: "127.0.0.1:0", token: sesame}
        """
    }

    func start(_ name: String, building: String, failover: Bool, broker: MosquittoBroker) async throws -> DaemonTests.Daemon {
        let directory = try TestDirectory.make(prefix: "contract-\(name)")
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try Self.yaml(
            port: broker.port, name: name, building: building, failover: failover,
            store: directory.appendingPathComponent("state.db").path
        ).write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await CommandRunner().start(["serve", "--config", configPath], environment: ["NOTIFY_SOCKET": notify.path])
        let port = try await DaemonTests.listeningPort(running)
        #expect(await notify.wait(for: "READY=1", timeout: .seconds(60)), "\(running.standardError.suffix(3000))")
        return DaemonTests.Daemon(running: running, notify: notify, directory: directory, httpPort: port)
    }

    /// Every message kind the documents name that these daemons send, and the updates the
    /// test sends, as the checker names them (channel.message).
    static let expected = [
        "liveUpdate.occupancy", "liveUpdate.position", "liveUpdate.other", "liveUpdate.removal", "style.derivedChange", "style.clear",
        "buildingSummary.summary", "floorSummary.summary", "legend.legend", "instanceStatus.status", "lease.lease", "arrival.arrival",
        "syncMarker.syncMarker", "convergenceEnd.end",
    ]

    @Test("every kind of payload two partitioned daemons (one a failover replica) publish validates against docs/asyncapi.yaml")
    func payloads() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        // Everything that crosses the broker, from before the daemons start.
        let recorder = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        let captured = await Inbox.collecting(recorder.messages)
        try await recorder.connect()
        try await recorder.subscribe("#")

        let west = try await start("west", building: "A", failover: true, broker: broker)
        let east = try await start("east", building: "B", failover: false, broker: broker)
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        for (index, building) in ["A", "A", "B", "B"].enumerated() {
            try await publisher.publish(
                "ds1/hq/\(building)/F1/R\(index)/room-\(index)/occupancy",
                text: #"{"id": "room-\#(index)", "timestamp": \#(Int(Date().timeIntervalSince1970 * 1000)), "originSourceId": "booking", "properties": {"nrOfPeople": "\#(index % 2)", "capacity": 8}}"#,
                qos: .atLeastOnce)
        }
        try await publisher.publish("ds1/hq/A/F1/R0/room-0/cleaning", text: #"{"properties": {"state": "due", "since": null}}"#, qos: .atLeastOnce)
        try await publisher.publish("ds1/hq/A/F1/R0/room-0/cleaning", text: "", qos: .atLeastOnce)
        // The asset: on A's first floor, then its second (its old topic cleared), then in B (an arrival).
        for place in ["A/F1/R0", "A/F2/R5", "B/F1/R2"] {
            try await publisher.publish(
                "ds1/hq/\(place)/asset-1/position",
                text: #"{"timestamp": "\#(Date().formatted(.iso8601))", "properties": {"latitude": 55.6761, "longitude": "12.5683", "floorIndex": 1}}"#,
                qos: .atLeastOnce)
            // Longer than the output's coalescing: each place is published, and the one left cleared.
            try await Task.sleep(for: .milliseconds(1500))
        }
        let seenEverything = await captured.wait(timeout: .seconds(30)) { messages in
            let topics = messages.map(\.topic)
            return topics.contains { $0.hasPrefix("livedata/arrival/") } && topics.contains { $0.hasPrefix("livedata/checkpoint/") }
                && topics.contains { $0 == "livedata/style/ds1/hq/B/F1/R2/asset-1" }
                && topics.contains { $0.hasPrefix("livedata/summary/ds1/hq/B/F1") }
                && messages.contains { $0.topic.hasPrefix("livedata/style/") && $0.payload.isEmpty }
        }
        #expect(seenEverything, "the daemons did not publish every kind within 30 s")
        // A clean stop: `offline`, and the lease released.
        for daemon in [west, east] {
            daemon.signal(SIGTERM)
            #expect(try await daemon.running.result(timeout: .seconds(15)).status == 0)
        }
        await captured.wait(timeout: .seconds(5)) { $0.filter { $0.topic.hasPrefix("livedata/status/") && $0.payload == Array("offline".utf8) }.count >= 2 }
        await publisher.disconnect()
        await recorder.disconnect()

        let file = try TestDirectory.make(prefix: "contract-payloads").appendingPathComponent("payloads.jsonl")
        let lines = await captured.items.map { Contract.payloadLine(topic: $0.topic, payload: $0.payload) }
        try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let result = try await Contract.check(["payloads", file.path, "--expect", Self.expected.joined(separator: ",")])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
    }

    @Test("a payload whose shape the document does not have fails, naming its topic and the path of the mismatch")
    func shapeChangeFails() async throws {
        let change =
            ##"{"location": "room-7", "topic": {"dataset": "ds1", "venue": "hq", "building": "B", "floor": "F3", "room": "R7", "location": "room-7"}, "style": {"visible": true, "polygonFillColor": "#D64545"}, "changed": ["polygonFillColor"], "rules": ["occupied"], "live": {}, "version": 4, "updatedAt": "2026-11-21T10:15:03.150Z", "format": 1"##
        let cases: [(topic: String, payload: String, mismatch: String)] = [
            ("livedata/style/ds1/hq/B/F3/R7/room-7", change + "}", ""),
            ("livedata/style/ds1/hq/B/F3/R7/room-7", change + #", "occupiedSince": "2026-11-21T10:00:00.000Z"}"#, "occupiedSince"),
            ("livedata/style/ds1/hq/B/F3/R7/room-7", change.replacingOccurrences(of: "#D64545", with: "red") + "}", "$.style.polygonFillColor"),
            ("livedata/summary/ds1/hq/B", #"{"dataset": "ds1", "venue": "hq", "building": "B", "locations": 2, "states": {}, "people": 1, "capacity": 8, "updatedAt": "2026-11-21T10:15:03.150Z"}"#, "format"),
            ("livedata/status", "maybe", "$"),
        ]
        let directory = try TestDirectory.make(prefix: "contract-shapes")
        for (index, item) in cases.enumerated() {
            let file = directory.appendingPathComponent("case-\(index).jsonl")
            try Contract.payloadLine(topic: item.topic, payload: Array(item.payload.utf8)).write(to: file, atomically: true, encoding: .utf8)
            let result = try await Contract.check(["payloads", file.path])
            if item.mismatch.isEmpty {
                #expect(result.status == 0, "\(result.standardOutput)")
            } else {
                #expect(result.status == 1, "case \(index) passed: \(result.standardOutput)")
                let line = result.outputLines.first { $0.hasPrefix("MISMATCH") } ?? ""
                #expect(line.contains(item.topic) && line.contains(item.mismatch), "case \(index): \(result.standardOutput)")
            }
        }
    }

    @Test("both documents validate against the AsyncAPI 3.0 and OpenAPI 3.1 specifications, and so does every example in them")
    func documents() async throws {
        let result = try await Contract.check(["documents"])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.contains("documents: 0 problems"))
        // The documents are the contract of this release and of this wire format.
        let version = try await CommandRunner().run(["--version"]).standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        for document in ["docs/asyncapi.yaml", "docs/openapi.yaml"] {
            let text = try String(contentsOf: Repository.url(document), encoding: .utf8)
            #expect(text.contains("\n  version: \(version)\n"), "\(document) is not the contract of \(version)")
            #expect(text.contains("\n  x-wire-format: \(WireFormat.version)\n"), "\(document) does not name wire format \(WireFormat.version)")
        }
    }

    /// A daemon with a few locations, a failover partition (so `/readyz` names its role) and
    /// a token, for the HTTP checks.
    func servedDaemon(_ broker: MosquittoBroker) async throws -> DaemonTests.Daemon {
        let daemon = try await start("west", building: "A", failover: true, broker: broker)
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        for index in 0..<4 {
            try await publisher.publish(
                "ds1/hq/A/F1/R\(index)/room-\(index)/occupancy", text: #"{"properties": {"nrOfPeople": "\#(index % 2)", "capacity": "8"}}"#,
                qos: .atLeastOnce)
        }
        // The same id in another dataset's topic: refused (only ds1 is subscribed) — the 409 comes from the route tests.
        await publisher.disconnect()
        try await eventually("four locations", timeout: .seconds(20)) {
            try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/v1/floors/ds1/hq/A/F1").body.components(separatedBy: "\"version\"").count == 5
        }
        return daemon
    }

    @Test("every endpoint's responses, errors included, validate against docs/openapi.yaml")
    func httpResponses() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let daemon = try await servedDaemon(broker)
        defer { daemon.signal(SIGKILL) }
        let token = ["Authorization": "Bearer sesame"]
        let requests: [(method: String, path: String, headers: [String: String], body: String, status: Int)] = [
            ("GET", "/healthz", [:], "", 200), ("GET", "/readyz", [:], "", 200), ("GET", "/metrics", [:], "", 200),
            ("GET", "/v1/locations/room-1", [:], "", 200), ("GET", "/v1/locations/nowhere", [:], "", 404),
            ("GET", "/v1/locations/ds1/hq/A/F1/R1/room-1", [:], "", 200), ("GET", "/v1/locations/ds1/hq/A/F9/R1/room-1", [:], "", 404),
            ("GET", "/v1/floors/ds1/hq/A/F1", [:], "", 200), ("GET", "/v1/floors/ds1/hq/A/F9", [:], "", 200),
            ("GET", "/v1/legend", [:], "", 200), ("GET", "/v1/legend?dataset=ds1", [:], "", 200), ("GET", "/v1/layers", [:], "", 200),
            ("PUT", "/v1/layers/occupancy", [:], #"{"hidden": true}"#, 401), ("PUT", "/v1/layers/occupancy", token, #"{"hide": 1}"#, 400),
            ("PUT", "/v1/layers/occupancy", token, #"{"hidden": true}"#, 200), ("PUT", "/v1/layers/occupancy", token, #"{"visible": true}"#, 200),
            ("GET", "/v1/state", [:], "", 401), ("GET", "/v1/state", token, "", 200), ("GET", "/v1/venues", [:], "", 200),
            ("GET", "/v1/geometry?dataset=ds1", [:], "", 400), ("GET", "/v1/geometry?dataset=ds1&venue=hq&building=A&floor=F1", [:], "", 200),
            ("GET", "/", [:], "", 200), ("GET", "/floors/ds1/hq/A/F1", [:], "", 200), ("GET", "/assets/floor.js", [:], "", 200),
            ("GET", "/assets/floor.css", [:], "", 200), ("GET", "/assets/venues.js", [:], "", 200),
        ]
        var lines: [String] = []
        for request in requests {
            let response = try await LoopbackHTTP.request(
                request.method, port: daemon.httpPort, path: request.path, headers: request.headers, body: request.body)
            #expect(response.status == request.status, "\(request.method) \(request.path): \(response.status) \(response.body.prefix(300))")
            lines.append(
                Contract.httpLine(
                    method: request.method, path: request.path, status: response.status, contentType: response.headers["content-type"],
                    body: response.body))
        }
        // The event stream: its snapshot and a change (and a summary, when one comes).
        let viewer = try await EventStreamViewer.open(port: daemon.httpPort, path: "/v1/events?dataset=ds1&venue=hq&building=A&floor=F1")
        #expect(await viewer.wait { events, _ in events.first?.name == "snapshot" })
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        try await publisher.publish("ds1/hq/A/F1/R0/room-0/occupancy", text: #"{"properties": {"nrOfPeople": "5", "capacity": "8"}}"#, qos: .atLeastOnce)
        await publisher.disconnect()
        #expect(
            await viewer.wait { events, _ in events.contains { $0.name == "change" } },
            "\(viewer.events.map(\.name)) \(daemon.running.standardError.suffix(1500))")
        let events = viewer.events.map { "event: \($0.name)\ndata: \($0.data)\n\n" }.joined()
        await viewer.close()
        lines.append(Contract.httpLine(method: "GET", path: "/v1/events", status: 200, contentType: "text/event-stream", body: events))

        let file = try TestDirectory.make(prefix: "contract-http").appendingPathComponent("http.jsonl")
        try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let result = try await Contract.check(["http", file.path])
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")

        // A floor of 1,000 locations three times: whole the first time, then on a sample of
        // its items, which still finds a broken one among the first hundred or between.
        let floor = try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/v1/floors/ds1/hq/A/F1")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(floor.body.utf8)) as? [String: Any])
        let location = try #require((object["locations"] as? [Any])?.first)
        func floorLine(breaking index: Int?) throws -> String {
            var locations = Array(repeating: location, count: 1_000)
            if let index { locations[index] = ["location": 12345] }
            object["locations"] = locations
            let body = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
            return Contract.httpLine(method: "GET", path: "/v1/floors/ds1/hq/A/F1", status: 200, contentType: "application/json", body: body)
        }
        try [floorLine(breaking: nil), floorLine(breaking: 1), floorLine(breaking: 500)].joined(separator: "\n")
            .write(to: file, atomically: true, encoding: .utf8)
        let sampled = try await Contract.check(["http", file.path])
        #expect(sampled.status == 1)
        #expect(sampled.standardOutput.contains("$.locations[1]"), "\(sampled.standardOutput)")
        #expect(sampled.standardOutput.contains("$.locations[500]"), "\(sampled.standardOutput)")
        #expect(sampled.standardOutput.contains("2 responses with an array of more than 300 items"), "\(sampled.standardOutput)")
    }

    /// Examples schemathesis generates for each operation in the bounded run (`scripts/fuzz-http`
    /// runs the long form).
    static let fuzzExamples = ProcessInfo.processInfo.environment["LIVEDATA_FUZZ_HTTP_EXAMPLES"].flatMap { Int($0) } ?? 25

    @Test("schemathesis, driven by docs/openapi.yaml against a live daemon: no 5xx, no hang, every response conforms")
    func fuzzedFromTheDocument() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let daemon = try await servedDaemon(broker)
        defer { daemon.signal(SIGKILL) }
        let result = try await ChildProcess.start(
            Repository.url("scripts/fuzz-http").path,
            ["--url", "http://127.0.0.1:\(daemon.httpPort)", "--examples", "\(Self.fuzzExamples)", "--token", "sesame"],
            in: Repository.root
        ).result(timeout: .seconds(240))
        #expect(result.status == 0, "\(result.standardOutput.suffix(6000))\(result.standardError.suffix(2000))")
        #expect(daemon.running.isRunning, "the daemon died under the fuzzer: \(daemon.running.standardError.suffix(2000))")
    }
}
