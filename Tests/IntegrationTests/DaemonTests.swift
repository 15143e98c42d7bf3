import Foundation
import LiveDataTestSupport
import LiveState
import LiveStatePersistence
import LiveTopics
import Logging
import Mosquitto
import Testing

/// `livedata serve` as a real subprocess against a real broker.
@Suite("Daemon", .timeLimit(.minutes(3)))
struct DaemonTests {
    let logger = Logger(label: "test")

    static func config(
        port: Int, store: String, httpPort: Int = 0, vacantColor: String = "#4CAF50", snapshotInterval: String = "5s"
    ) -> String {
        """
        broker: {host: 127.0.0.1, port: \(port), clientId: daemon-test, keepalive: 5s}
        subscriptions:
          - {dataset: ds1, domain: occupancy}
        styles:
          main: {visible: true, polygonFillColor: "#E0E0E0"}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", label: "{nrOfPeople}/{capacity}"}
            layer: occupancy
          - name: vacant
            domain: occupancy
            when: nrOfPeople == 0
            style: {polygonFillColor: "\(vacantColor)"}
            layer: occupancy
        store: {path: \(store), snapshotInterval: \(snapshotInterval)}
        http: {listen: "127.0.0.1:\(httpPort)", token: sesame}
        log: {level: debug}
        """
    }

    struct Daemon {
        let running: ChildProcess
        let notify: NotifySocket
        let directory: URL
        let httpPort: Int
        var configPath: String { directory.appendingPathComponent("livedata.yaml").path }
        var storePath: String { directory.appendingPathComponent("state.db").path }

        func signal(_ signal: Int32) { running.signal(signal) }
    }

    /// Starts `livedata serve` with ``config(port:store:httpPort:vacantColor:)``, or with
    /// `yaml` and the broker, store and HTTP lines added.
    func startDaemon(
        port: Int, directory: URL? = nil, yaml: String? = nil, snapshotInterval: String = "5s", brokerOptions: String = ""
    ) async throws -> Daemon {
        let directory = try directory ?? TestDirectory.make(prefix: "daemon")
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        // Port 0: the daemon binds a free port and logs it (no race with other tests for it).
        let httpPort = 0
        let store = directory.appendingPathComponent("state.db").path
        let text =
            yaml.map {
                $0 + """

                    broker: {host: 127.0.0.1, port: \(port), clientId: daemon-test, keepalive: 5s\(brokerOptions)}
                    store: {path: \(store)}
                    http: {listen: "127.0.0.1:\(httpPort)"}
                    """
            } ?? Self.config(port: port, store: store, httpPort: httpPort, snapshotInterval: snapshotInterval)
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await CommandRunner().start(
            ["serve", "--config", configPath], environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "400000"])
        return Daemon(running: running, notify: notify, directory: directory, httpPort: try await Self.listeningPort(running))
    }

    /// The HTTP port the daemon logs once its server is bound.
    static func listeningPort(_ running: ChildProcess) async throws -> Int {
        func logged() -> Int? {
            for line in running.standardError.split(separator: "\n") where line.contains("HTTP interface listening") {
                if let field = line.split(separator: " ").first(where: { $0.hasPrefix("http.listen=") }),
                    let port = field.split(separator: ":").last.flatMap({ Int($0) })
                {
                    return port
                }
            }
            return nil
        }
        let port = try await eventually(
            "the daemon to say where it listens:\n\(running.standardError)", timeout: .seconds(30), observing: logged,
            until: { $0 != nil })
        guard let port else { throw MosquittoBroker.Failure.toolFailed("the daemon did not say where it listens") }
        return port
    }

    func client(_ broker: MosquittoBroker, _ configure: (inout MQTTConfiguration) -> Void = { _ in }) async throws -> MQTTClient {
        var configuration = MQTTConfiguration.test(port: broker.port)
        configure(&configuration)
        let client = try MQTTClient(configuration: configuration, logger: logger)
        try await client.connect()
        return client
    }

    /// A client subscribed to `filter` (the daemon's styles by default), and what it receives.
    func watcher(
        _ broker: MosquittoBroker, filter: String = "livedata/style/#", _ configure: (inout MQTTConfiguration) -> Void = { _ in }
    ) async throws -> (MQTTClient, Inbox<MQTTMessage>) {
        let watcher = try await client(broker, configure)
        let inbox = await Inbox.collecting(watcher.messages)
        try await watcher.subscribe(filter)
        return (watcher, inbox)
    }

    /// SIGTERM to the daemon (it must exit 0), then the clients disconnect.
    func stop(_ daemon: Daemon, _ clients: MQTTClient...) async throws {
        daemon.signal(SIGTERM)
        let ended = try await daemon.running.result(timeout: .seconds(10))
        #expect(ended.status == 0, "stderr: \(ended.standardError.suffix(3000))")
        for client in clients { await client.disconnect() }
    }

    /// Waits until the daemon logs `text`, for 5 s at most.
    func waitForLog(
        _ daemon: Daemon, _ text: String, _ why: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await eventually(
            "\(why): \"\(text)\" in the daemon's log", timeout: .seconds(5), every: .milliseconds(100), sourceLocation: sourceLocation
        ) { daemon.running.standardError.contains(text) }
    }

    /// A counter of the daemon's metrics once it reaches `least`, or its value after 10 s.
    func waitForMetric(
        _ daemon: Daemon, _ name: String, atLeast least: Double, timeout: Duration = .seconds(10),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Double {
        try await eventually(
            "\(name) to reach \(least)", timeout: timeout, every: .milliseconds(100), sourceLocation: sourceLocation,
            observing: { CrashRecoveryTests.metric(try await LoopbackHTTP.request("GET", port: daemon.httpPort, path: "/metrics").body, name) ?? 0 },
            until: { $0 >= least })
    }

    func publish(_ client: MQTTClient, _ location: String, people: Int) async throws {
        try await client.publish(
            "ds1/hq/B/F3/R7/\(location)/occupancy",
            text: #"{"timestamp": \#(Int64(Date().timeIntervalSince1970 * 1000)), "properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#,
            qos: .atLeastOnce)
    }

    @Test("READY=1 arrives, updates become retained derived changes, SIGHUP reloads, SIGTERM exits 0 and flushes")
    func lifecycle() async throws {
        let broker = try await MosquittoBroker.start()
        let daemon = try await startDaemon(port: broker.port)
        #expect(await daemon.notify.wait(for: "READY=1"), "notify: \(daemon.notify.messages)\nstderr: \(daemon.running.standardError)")
        #expect(await daemon.notify.wait(for: "WATCHDOG=1", timeout: .seconds(3)), "pings at half of WATCHDOG_USEC")
        // The executable links mimalloc, whose malloc then serves the whole process.
        #expect(daemon.running.standardError.contains("heap=mimalloc "), "stderr: \(daemon.running.standardError)")
        // Read to the end: /proc reports no size, and the file is longer than a first read.
        let maps = String(
            decoding: (try? FileHandle(forReadingAtPath: "/proc/\(daemon.running.processIdentifier)/maps")?.readToEnd()) ?? Data(), as: UTF8.self)
        #expect(maps.contains("/libmimalloc.so"), "the daemon has no libmimalloc mapped")
        let sensor = try await client(broker)
        let (watcher, inbox) = try await self.watcher(broker, filter: "livedata/#")

        try await publish(sensor, "room-7", people: 0)
        #expect(await inbox.wait { $0.contains { $0.topic == "livedata/style/ds1/hq/B/F3/R7/room-7" } })
        #expect(await inbox.items.contains { $0.topic == "livedata/status" && $0.payloadString == "online" })

        // The HTTP interface answers.
        let port = daemon.httpPort
        #expect(try await LoopbackHTTP.request("GET", port: port, path: "/healthz").status == 200)
        #expect(try await LoopbackHTTP.request("GET", port: port, path: "/readyz").body == #"{"status":"ready"}"#)
        let location = try await LoopbackHTTP.request("GET", port: port, path: "/v1/locations/room-7")
        #expect(location.status == 200)
        #expect(location.body.hasPrefix(#"{"location": "room-7", "topic": {"dataset": "ds1""#))
        let missing = try await LoopbackHTTP.request("GET", port: port, path: "/v1/locations/nowhere")
        #expect(missing.status == 404 && missing.body == #"{"error":"no location \"nowhere\" is tracked"}"#)
        #expect(try await LoopbackHTTP.request("GET", port: port, path: "/v1/floors/ds1/hq/B/F3").body.contains("room-7"))
        #expect(try await LoopbackHTTP.request("GET", port: port, path: "/v1/legend").body.hasPrefix(#"{"entries": ["#))
        #expect(try await LoopbackHTTP.request("GET", port: port, path: "/v1/layers").body == #"{"layers":[{"hidden":false,"name":"occupancy"}]}"#)
        let metrics = try await LoopbackHTTP.request("GET", port: port, path: "/metrics")
        #expect(metrics.body.contains("livedata_updates_applied_total 1"))
        #expect(metrics.body.contains("livedata_locations_tracked 1"))
        #expect(metrics.body.contains("livedata_broker_connected 1"))
        // Buffered socket calls are opt-in: with the defaults, neither connection.
        #expect(metrics.body.contains("livedata_socket_buffered_connections 0"))
        #expect(metrics.body.contains("livedata_processing_seconds_count 1"))
        // Writing needs the token; with it, hiding the layer re-publishes the location as not visible.
        #expect(try await LoopbackHTTP.request("PUT", port: port, path: "/v1/layers/occupancy", body: #"{"hidden": true}"#).status == 401)
        let hidden = try await LoopbackHTTP.request(
            "PUT", port: port, path: "/v1/layers/occupancy", headers: ["Authorization": "Bearer sesame"], body: #"{"hidden": true}"#)
        #expect(hidden.body == #"{"changed":1,"hidden":true,"layer":"occupancy"}"#)
        #expect(await inbox.wait { $0.contains { $0.payloadString.contains(#""visible": false"#) } })
        _ = try await LoopbackHTTP.request(
            "PUT", port: port, path: "/v1/layers/occupancy", headers: ["Authorization": "Bearer sesame"], body: #"{"visible": true}"#)

        // A changed rule: SIGHUP re-publishes the location with the new color.
        try Self.config(port: broker.port, store: daemon.storePath, httpPort: daemon.httpPort, vacantColor: "#00FFFF")
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        #expect(await daemon.notify.wait(for: "RELOADING=1"))
        #expect(await inbox.wait { $0.contains { $0.payloadString.contains("#00FFFF") } })

        // A broken config (an expression, and a duration that once trapped): logged, and the
        // old one keeps running.
        try "rules: [{name: x, when: \"nrOfPeople >\"}]\ndomains: {occupancy: {staleAfter: inf}}\n"
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        #expect(await daemon.notify.wait(for: "STATUS=reload failed; running the previous config"))
        #expect(daemon.running.isRunning)
        try await publish(sensor, "room-8", people: 2)
        #expect(await inbox.wait { $0.contains { $0.topic == "livedata/style/ds1/hq/B/F3/R7/room-8" } })

        daemon.signal(SIGTERM)
        let result = try await daemon.running.result(timeout: .seconds(10))
        #expect(result.status == 0, "stderr: \(result.standardError)")
        #expect(daemon.notify.messages.contains { $0.contains("STOPPING=1") })
        #expect(await inbox.wait { $0.last { $0.topic == "livedata/status" }?.payloadString == "offline" })
        #expect(result.standardError.contains("the new config is not valid; still running the old one"))
        // The store was written on the way out (read through SQLite: what is committed may
        // still be in the write-ahead log rather than the main file).
        let stored = try StateDatabase(path: daemon.storePath).readAll().records
        #expect(stored.contains { $0.address.location == "room-8" && $0.values.first?.properties["nrOfPeople"] == "2" })
        await sensor.disconnect()
        await watcher.disconnect()
    }

    @Test("a restart restores the state without re-publishing, and applies what the broker queued meanwhile")
    func restart() async throws {
        let broker = try await MosquittoBroker.start()
        let first = try await startDaemon(port: broker.port)
        #expect(await first.notify.wait(for: "READY=1"))
        let sensor = try await client(broker)
        let (watcher, inbox) = try await self.watcher(broker)
        try await publish(sensor, "room-1", people: 1)
        try await publish(sensor, "room-2", people: 2)
        #expect(await inbox.wait { $0.count >= 2 })
        first.signal(SIGTERM)
        let ended = try await first.running.result(timeout: .seconds(10))
        #expect(ended.status == 0, "stderr: \(ended.standardError.suffix(3000))")

        // While it is down: the persistent session keeps this update for it.
        try await publish(sensor, "room-3", people: 3)
        let before = await inbox.items.count
        let second = try await startDaemon(port: broker.port, directory: first.directory)
        #expect(await second.notify.wait(for: "READY=1"))
        #expect(await inbox.wait { $0.contains { $0.topic.hasSuffix("/room-3") } }, "the queued update was applied")
        // What the start re-published went out before READY=1, on whichever output connection:
        // the daemon's own count says it all, whatever has reached the watcher yet.
        #expect(try await waitForMetric(second, "livedata_derived_changes_published_total", atLeast: 1) == 1, "only the new location is published")
        let republished = await inbox.items.dropFirst(before).map(\.topic)
        #expect(republished == ["livedata/style/ds1/hq/B/F3/R7/room-3"], "only the new location is published")
        second.signal(SIGTERM)
        #expect(try await second.running.result(timeout: .seconds(10)).status == 0)
        await sensor.disconnect()
        await watcher.disconnect()
    }

    @Test("an asset that changes floor is one location: its old style is cleared, the summary counts it once, a restart keeps it")
    func movingAsset() async throws {
        let yaml = """
            subscriptions:
              - {dataset: ds1}
            styles:
              main: {visible: true, icon: asset.svg}
            output: {summaryInterval: 100ms}
            """
        let broker = try await MosquittoBroker.start()
        let first = try await startDaemon(port: broker.port, yaml: yaml)
        #expect(await first.notify.wait(for: "READY=1"), "stderr: \(first.running.standardError)")
        let sensor = try await client(broker)
        let (watcher, inbox) = try await self.watcher(broker)
        func position(_ floor: String, _ room: String, index: Int, at offset: Int64) async throws {
            let timestamp = LiveTimestamp.now.millisecondsSince1970 + offset
            try await sensor.publish(
                "ds1/v/B/\(floor)/\(room)/asset-1/position",
                text: #"{"timestamp": \#(timestamp), "properties": {"latitude": "55.1", "longitude": "12.1", "floorIndex": "\#(index)"}}"#,
                qos: .atLeastOnce)
        }
        let f1 = "livedata/style/ds1/v/B/F1/R1/asset-1"
        let f2 = "livedata/style/ds1/v/B/F2/R9/asset-1"
        try await position("F1", "R1", index: 1, at: 0)
        #expect(await inbox.wait { $0.contains { $0.topic == f1 && !$0.payload.isEmpty } })
        try await position("F2", "R9", index: 2, at: 1)
        #expect(await inbox.wait { $0.contains { $0.topic == f2 } })
        // The old topic got MQTT's "gone" before the new style.
        let seen = await inbox.items.map { ($0.topic, $0.payload.isEmpty) }
        #expect(seen.firstIndex { $0.0 == f1 && $0.1 } ?? .max < seen.firstIndex { $0.0 == f2 } ?? -1)

        // One location, on F2.
        let port = first.httpPort
        #expect(try await LoopbackHTTP.request("GET", port: port, path: "/v1/floors/ds1/v/B/F1").body == #"{"locations": []}"#)
        let floor2 = try await LoopbackHTTP.request("GET", port: port, path: "/v1/floors/ds1/v/B/F2").body
        #expect(floor2.contains(#""location": "asset-1""#) && floor2.contains(#""floorIndex": 2"#))
        // A fresh subscriber sees the style at F2 alone, and a building summary counting one location.
        let fresh = try await client(broker)
        let retained = await Inbox.collecting(fresh.messages)
        try await fresh.subscribe("livedata/#")
        // The retained messages come before anything published after the subscription: once
        // a marker sent now is back, they are all in.
        try await fresh.subscribe("test/marker")
        try await fresh.publish("test/marker", text: "end", qos: .atLeastOnce)
        #expect(await retained.wait { $0.contains { $0.topic == "test/marker" } })
        #expect(await retained.items.contains { $0.topic == f2 })
        #expect(await !retained.items.contains { $0.topic == f1 })
        let summary = await retained.items.last { $0.topic == "livedata/summary/ds1/v/B" }
        #expect(summary?.payloadString.contains(#""locations": 1"#) == true, "\(summary?.payloadString ?? "no summary")")

        // A restart keeps it on F2.
        first.signal(SIGTERM)
        let ended = try await first.running.result(timeout: .seconds(10))
        #expect(ended.status == 0, "stderr: \(ended.standardError.suffix(3000))")
        let second = try await startDaemon(port: broker.port, directory: first.directory, yaml: yaml)
        #expect(await second.notify.wait(for: "READY=1"))
        let location = try await LoopbackHTTP.request("GET", port: second.httpPort, path: "/v1/locations/asset-1").body
        #expect(location.contains(#""floor": "F2""#), "\(location)")
        #expect(try await LoopbackHTTP.request("GET", port: second.httpPort, path: "/v1/floors/ds1/v/B/F1").body == #"{"locations": []}"#)
        second.signal(SIGTERM)
        #expect(try await second.running.result(timeout: .seconds(10)).status == 0)
        for client in [sensor, watcher, fresh] { await client.disconnect() }
    }

    @Test("a broker that starts after the daemon is picked up; until then the daemon waits and is not ready")
    func brokerLater() async throws {
        let broker = try await MosquittoBroker.start()
        await broker.stop()
        let daemon = try await startDaemon(port: broker.port)
        #expect(await daemon.notify.wait(for: "STATUS=waiting for the MQTT broker at 127.0.0.1:\(broker.port)"))
        try await eventually("three watchdog ticks extending the start") {
            daemon.notify.messages.filter { $0.hasPrefix("EXTEND_TIMEOUT_USEC=") }.count >= 3
        }
        #expect(daemon.running.isRunning)
        #expect(!daemon.notify.messages.contains { $0.contains("READY=1") })
        // systemd is told the start goes on, on every watchdog tick.
        #expect(daemon.notify.messages.first == "STATUS=restoring the state")
        #expect(daemon.notify.messages.filter { $0.hasPrefix("EXTEND_TIMEOUT_USEC=") }.count >= 3)
        try await broker.restart()
        #expect(await daemon.notify.wait(for: "READY=1", timeout: .seconds(30)))
        daemon.signal(SIGTERM)
        let ended = try await daemon.running.result(timeout: .seconds(10))
        #expect(ended.status == 0, "stderr: \(ended.standardError.suffix(3000))")
    }

    @Test("an oversize payload (a 3.1.1 session, where the broker cannot be asked for a maximum) is refused unread and counted; the next update applies; with buffered socket calls opted in, on both connections")
    func oversizePayload() async throws {
        let broker = try await MosquittoBroker.start()
        let yaml = """
            subscriptions:
              - {dataset: ds1, domain: occupancy}
            styles:
              main: {visible: true}
            rules:
              - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545"}}
            limits: {payloadSize: 4096}
            """
        // Buffered, the 100 kB payload is more than the socket layer's 64 KiB input buffer.
        let daemon = try await startDaemon(port: broker.port, yaml: yaml, brokerOptions: ", protocol: mqtt311, bufferedSocket: true")
        #expect(await daemon.notify.wait(for: "READY=1"))
        // The receiving connection and the output's four.
        #expect(try await waitForMetric(daemon, "livedata_socket_buffered_connections", atLeast: 5) == 5)
        let sensor = try await client(broker)
        let (watcher, inbox) = try await self.watcher(broker)
        let big = String(repeating: "x", count: 100_000)
        try await sensor.publish(
            "ds1/hq/B/F3/R7/room-1/occupancy", text: #"{"properties": {"nrOfPeople": "1", "note": "\#(big)"}}"#, qos: .atLeastOnce)
        try await publish(sensor, "room-2", people: 2)
        #expect(await inbox.wait { $0.contains { $0.topic.hasSuffix("/room-2") } }, "the update after it applied")
        #expect(try await waitForMetric(daemon, #"livedata_updates_rejected_total{reason="oversize"}"#, atLeast: 1) == 1)
        try await waitForLog(daemon, "payload is 100", "the refusal logged")
        #expect(!(await inbox.items.contains { $0.topic.hasSuffix("/room-1") }))
        try await stop(daemon, sensor, watcher)
    }

    @Test("publications the broker refuses are counted and not sent again; the rest go on")
    func refusedPublications() async throws {
        // The daemon may not write the styles of dataset ds2.
        let acl = """
            user daemon-test
            topic read +/+/+/+/+/+/+
            topic deny livedata/style/ds2/#
            topic readwrite livedata/#

            user watcher
            topic read #
            topic write +/+/+/+/+/+/+
            """
        let broker = try await MosquittoBroker.start(.init(users: ["daemon-test": "d", "watcher": "w"], acl: acl))
        let directory = try TestDirectory.make(prefix: "daemon")
        let passwordFile = directory.appendingPathComponent("password").path
        try "d".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let yaml = """
            subscriptions:
              - {domain: occupancy}
            styles:
              main: {visible: true}
            rules:
              - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545"}}
            """
        let daemon = try await startDaemon(
            port: broker.port, directory: directory, yaml: yaml, brokerOptions: ", username: daemon-test, passwordFile: \(passwordFile)")
        #expect(await daemon.notify.wait(for: "READY=1"))
        let (watcher, inbox) = try await self.watcher(broker) { $0.credentials = MQTTCredentials(username: "watcher", password: MQTTSecret("w")) }
        for dataset in ["ds2", "ds1"] {
            try await watcher.publish(
                "\(dataset)/hq/B/F3/R7/room-1/occupancy", text: #"{"properties": {"nrOfPeople": "1"}}"#, qos: .atLeastOnce)
        }
        #expect(await inbox.wait { $0.contains { $0.topic == "livedata/style/ds1/hq/B/F3/R7/room-1" } })
        #expect(try await waitForMetric(daemon, #"livedata_publishes_refused_total{by="broker"}"#, atLeast: 1) >= 1)
        try await waitForLog(daemon, "not sent again", "the refusal logged")
        #expect(await !inbox.items.contains { $0.topic.contains("/ds2/") })
        try await stop(daemon, watcher)
    }

    @Test("a publication the MQTT library refuses (larger than the broker's maximum packet) is dropped and counted, and the next one goes out")
    func droppedPublications() async throws {
        let broker = try await MosquittoBroker.start(.init(extra: ["max_packet_size 1000"]))
        let yaml = """
            subscriptions:
              - {domain: occupancy}
            styles:
              main: {visible: true}
            rules:
              - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {label: "{note}"}}
            """
        let daemon = try await startDaemon(port: broker.port, yaml: yaml)
        #expect(await daemon.notify.wait(for: "READY=1"))
        let sensor = try await client(broker)
        let (watcher, inbox) = try await self.watcher(broker)
        let note = String(repeating: "n", count: 900)
        try await sensor.publish("ds1/hq/B/F3/R7/room-1/occupancy", text: #"{"properties": {"nrOfPeople": "1", "note": "\#(note)"}}"#, qos: .atLeastOnce)
        try await sensor.publish("ds1/hq/B/F3/R7/room-2/occupancy", text: #"{"properties": {"nrOfPeople": "1", "note": "short"}}"#, qos: .atLeastOnce)
        #expect(await inbox.wait { $0.contains { $0.topic.hasSuffix("/room-2") } })
        #expect(try await waitForMetric(daemon, #"livedata_publishes_refused_total{by="library"}"#, atLeast: 1) == 1)
        try await waitForLog(daemon, "publications the MQTT library refused (too large for the broker", "the drop logged")
        #expect(await !inbox.items.contains { $0.topic.hasSuffix("/room-1") })
        try await stop(daemon, sensor, watcher)
    }

    @Test("a state file that is not a database is moved aside with one loud line, and the daemon starts empty")
    func stateFileNotADatabase() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try TestDirectory.make(prefix: "notadb")
        let store = directory.appendingPathComponent("state.db")
        try Data(repeating: 0x5A, count: 8192).write(to: store)
        let daemon = try await startDaemon(port: broker.port, directory: directory)
        #expect(await daemon.notify.wait(for: "READY=1"), "stderr: \(daemon.running.standardError)")
        let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("state.db.corrupt-") }
        #expect(aside.count == 1)
        #expect(daemon.running.standardError.split(separator: "\n").filter { $0.hasPrefix("critical") && $0.contains("moved it to") }.count == 1)
        // The new file is a working one: an update is stored and flushed at shutdown.
        let sensor = try await client(broker)
        try await publish(sensor, "room-1", people: 1)
        _ = try await waitForMetric(daemon, "livedata_updates_applied_total", atLeast: 1)
        daemon.signal(SIGTERM)
        let ended = try await daemon.running.result(timeout: .seconds(10))
        #expect(ended.status == 0, "stderr: \(ended.standardError.suffix(3000))")
        #expect(try StateDatabase(path: store.path).readAll().records.map(\.address.location) == ["room-1"])
        await sensor.disconnect()
    }

    @Test("an empty $LIVEDATA_HTTP_TOKEN is refused at start (exit 78), not taken as a token anyone can send")
    func emptyToken() async throws {
        let directory = try TestDirectory.make(prefix: "token")
        let path = directory.appendingPathComponent("livedata.yaml").path
        try "rules: []\nstore: {path: \":memory:\"}\n".write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await CommandRunner().start(["serve", "--config", path], environment: ["LIVEDATA_HTTP_TOKEN": ""])
            .result(timeout: .seconds(20))
        #expect(result.status == 78)
        #expect(result.errorLines.first?.contains("$LIVEDATA_HTTP_TOKEN is set but empty") == true, "\(result.standardError)")
    }

    @Test("a config with errors exits 78 and names file, line and column", arguments: [
        ("broker: {port: nope}\n", #"1:16: broker.port must be a whole number, found "nope""#),
        ("domains: {occupancy: {staleAfter: 99999999999999999999s}}\n", #"1:35: domains.occupancy.staleAfter must be at most 3650d (ten years), found "99999999999999999999s""#),
    ])
    func badConfig(yaml: String, message: String) async throws {
        let directory = try TestDirectory.make(prefix: "badconfig")
        let path = directory.appendingPathComponent("livedata.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        for command in [["serve", "--config", path], ["rules", "check", path]] {
            let result = try await CommandRunner().run(command)
            #expect(result.status == 78, "\(command)")
            #expect(result.errorLines.first == "error: \(path):\(message)", "\(command)")
        }
    }
}
