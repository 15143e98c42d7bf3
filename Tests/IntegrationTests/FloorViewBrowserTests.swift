import DisplayRules
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

/// The floor view in a real headless chromium, driven over WebDriver (chromedriver), against
/// `livedata serve` on a real broker.
@Suite("Floor view in a browser", .timeLimit(.minutes(3)))
struct FloorViewBrowserTests {
    let logger = Logger(label: "test")

    /// A WebDriver session of a headless chromium.
    final class Browser: Sendable {
        let driver: ChildProcess
        let port: Int
        let session: String

        static func start() async throws -> Browser {
            guard let chromedriver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            }), FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
                throw MosquittoBroker.Failure.toolFailed(
                    "chromium and chromedriver are needed for the browser test: apt-get install -y chromium chromium-driver (scripts/install-dependencies does it)")
            }
            let port = try freeLoopbackPort()
            let driver = try await ChildProcess.start(chromedriver, ["--port=\(port)", "--allowed-ips=127.0.0.1"])
            try await eventually("chromedriver to answer on port \(port)", every: .milliseconds(100)) {
                (try? await Self.request("GET", port: port, path: "/status")) != nil
            }
            let capabilities = #"{"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}}}}"#
            let response: String
            do {
                response = try await Self.request("POST", port: port, path: "/session", body: capabilities)
            } catch {
                driver.signal(SIGKILL)
                throw error
            }
            guard let value = try Self.value(response) as? [String: Any], let session = value["sessionId"] as? String else {
                driver.signal(SIGKILL)
                throw MosquittoBroker.Failure.toolFailed("chromedriver did not start a session: \(response)")
            }
            return Browser(driver: driver, port: port, session: session)
        }

        init(driver: ChildProcess, port: Int, session: String) {
            self.driver = driver
            self.port = port
            self.session = session
        }

        static func value(_ body: String) throws -> Any? {
            if body.isEmpty { return nil }
            return (try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["value"]
        }

        @discardableResult
        func command(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> Any? {
            let text = try body.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) } ?? ""
            return try Self.value(try await Self.request(method, port: port, path: "/session/\(session)\(path)", body: text))
        }

        /// One HTTP/1.1 exchange over a loopback socket, returning the body. chromedriver
        /// writes headers without a space after the colon, which URLSession refuses.
        static func request(_ method: String, port: Int, path: String, body: String = "") async throws -> String {
            try await Task.detached {
                let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                guard socket >= 0 else { throw MosquittoBroker.Failure.toolFailed("socket: errno \(errno)") }
                defer { Glibc.close(socket) }
                guard withLoopbackAddress(port: port, { connect(socket, $0, $1) }) == 0 else { throw MosquittoBroker.Failure.toolFailed("connect to 127.0.0.1:\(port): errno \(errno)") }
                let bytes = Array(body.utf8)
                let head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\n"
                    + "Content-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
                let request = Array(head.utf8) + bytes
                var sent = 0
                while sent < request.count {
                    let written = request[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
                    guard written > 0 else { throw MosquittoBroker.Failure.toolFailed("send: errno \(errno)") }
                    sent += written
                }
                var timeout = timeval(tv_sec: 60, tv_usec: 0)
                setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                // Read the head, then as many body bytes as Content-Length says (the driver
                // may keep the connection open).
                var response: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                var expected: Int?
                var bodyStart = 0
                while expected.map({ response.count < bodyStart + $0 }) ?? true {
                    let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
                    if count <= 0 { break }
                    response += buffer[0..<count]
                    if expected == nil, let end = response.firstRange(of: Array("\r\n\r\n".utf8)) {
                        bodyStart = end.upperBound
                        let head = String(decoding: response[..<end.lowerBound], as: UTF8.self).lowercased()
                        let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        expected = length.flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                    }
                }
                guard expected != nil else {
                    throw MosquittoBroker.Failure.toolFailed("no HTTP response: \(String(decoding: response, as: UTF8.self))")
                }
                return String(decoding: response[bodyStart...], as: UTF8.self)
            }.value
        }

        func open(_ url: String) async throws { try await command("POST", "/url", ["url": url]) }

        /// Runs JavaScript in the page (its `return` value comes back).
        @discardableResult
        func run(_ script: String, _ arguments: [Any] = []) async throws -> Any? {
            try await command("POST", "/execute/sync", ["script": script, "args": arguments])
        }

        /// Runs asynchronous JavaScript: the last argument is the callback to call with the result.
        func runAsync(_ script: String) async throws -> Any? {
            try await command("POST", "/execute/async", ["script": script, "args": []])
        }

        /// Polls `script` until it returns true, for at most `timeout`.
        func wait(_ script: String, timeout: Duration = .seconds(2), sourceLocation: SourceLocation = #_sourceLocation) async throws {
            try await eventually("the page to answer true to `\(script)`", timeout: timeout, every: .milliseconds(50), sourceLocation: sourceLocation) {
                try await run(script) as? Bool == true
            }
        }

        func screenshot() async throws -> Data? {
            (try await command("GET", "/screenshot") as? String).flatMap { Data(base64Encoded: $0) }
        }

        func close() async {
            _ = try? await command("DELETE", "")
            driver.signal(SIGKILL)
            _ = try? await driver.wait(timeout: .seconds(5))
        }
    }

    static func config(broker: Int, http: Int, store: String, geometry: String) -> String {
        """
        broker: {host: 127.0.0.1, port: \(broker), clientId: floor-view-test, keepalive: 5s}
        subscriptions:
          - {dataset: ds1}
        geometry: \(geometry)
        styles:
          main: {visible: true, zoomFrom: 16, zoomTo: 22, polygonFillColor: "#E0E0E0"}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", polygonFillOpacity: 1, label: "{nrOfPeople}/{capacity}"}
            legend: Occupied
            layer: occupancy
          - name: vacant
            domain: occupancy
            when: nrOfPeople == 0
            style: {polygonFillColor: "#2E9E4F", polygonFillOpacity: 1}
            legend: Vacant
            layer: occupancy
        store: {path: \(store), snapshotInterval: 1s}
        http: {listen: "127.0.0.1:\(http)", token: sesame}
        """
    }

    static let geometry = """
        {"type": "FeatureCollection", "features": [
          {"type": "Feature", "properties": {"id": "room-1", "dataset": "ds1", "venue": "hq", "building": "B", "floor": "F1"},
           "geometry": {"type": "Polygon", "coordinates": [[[0, 10], [10, 10], [10, 20], [0, 20], [0, 10]]]}},
          {"type": "Feature", "properties": {"id": "room-2", "dataset": "ds1", "venue": "hq", "building": "B", "floor": "F1"},
           "geometry": {"type": "Polygon", "coordinates": [[[10, 10], [20, 10], [20, 20], [10, 20], [10, 10]]]}},
          {"type": "Feature", "properties": {"id": "desk-1", "dataset": "ds1", "venue": "hq", "building": "B", "floor": "F1"},
           "geometry": {"type": "Polygon", "coordinates": [[[2, 2], [6, 2], [6, 5], [2, 5], [2, 2]]]}}
        ]}
        """

    func publish(_ client: MQTTClient, _ room: String, people: Int) async throws {
        try await client.publish(
            "ds1/hq/B/F1/R1/\(room)/occupancy",
            text: #"{"timestamp": \#(Int64(Date().timeIntervalSince1970 * 1000)), "properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#,
            qos: .atLeastOnce)
    }

    func fill(_ id: String) -> String {
        #"(document.querySelector('[data-location="\#(id)"] .shape')?.getAttribute('fill') ?? null)"#
    }

    @Test("a published update colors its room within 2 s without a reload; the banner shows while the daemon is down and the page resumes after; the screenshot's pixels are the rule's color")
    func liveFloor() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try TestDirectory.make(prefix: "floor-view")
        let geometryPath = directory.appendingPathComponent("venue.geojson").path
        try Self.geometry.write(toFile: geometryPath, atomically: true, encoding: .utf8)
        let httpPort = try freeLoopbackPort()
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try Self.config(broker: broker.port, http: httpPort, store: directory.appendingPathComponent("state.db").path, geometry: geometryPath)
            .write(toFile: configPath, atomically: true, encoding: .utf8)
        func startDaemon() async throws -> ChildProcess {
            let daemon = try await CommandRunner().start(["serve", "--config", configPath])
            let ready = try await eventually("the daemon to be ready:\n\(daemon.standardError)", every: .milliseconds(50)) {
                (try? await LoopbackHTTP.request("GET", port: httpPort, path: "/readyz"))?.status == 200
            }
            guard ready else { throw MosquittoBroker.Failure.toolFailed("the daemon did not become ready") }
            return daemon
        }
        var daemon = try await startDaemon()
        let sensor = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await sensor.connect()
        try await publish(sensor, "room-2", people: 0)

        let browser = try await Browser.start()
        do {
            try await browser.open("http://127.0.0.1:\(httpPort)/floors/ds1/hq/B/F1")
            try await browser.wait("return document.body.dataset.ready === 'true';", timeout: .seconds(10))
            #expect(try await browser.run("return document.querySelectorAll('[data-location]').length;") as? Int == 3)
            try await browser.wait(#"return \#(fill("room-2")) === '#2E9E4F';"#)

            // An update: the room takes the rule's color within 2 s, with no reload.
            try await browser.run("window.sameDocument = true;")
            try await publish(sensor, "room-1", people: 3)
            try await browser.wait(#"return \#(fill("room-1")) === '#D64545';"#, timeout: .seconds(2))
            #expect(try await browser.run("return window.sameDocument === true;") as? Bool == true)
            // The state is named, not only colored; the legend counts it.
            let title = try await browser.run(#"return document.querySelector('[data-location="room-1"] title').textContent;"#) as? String
            #expect(title?.contains("Occupied") == true, "title: \(title ?? "")")
            try await browser.wait(#"return document.querySelector('#legend [data-state="Occupied"] .count').textContent === '1';"#)

            // The script draws every field from the table the page carries: the label, the
            // zoom range (the location hides below zoomFrom), a field no layer sets as unset.
            #expect(
                try await browser.run("return JSON.parse(document.body.dataset.styleFields).map((field) => field.name);") as? [String]
                    == StyleField.allCases.map(\.rawValue))
            #expect(try await browser.run(#"return document.querySelector('[data-location="room-1"] > text').textContent;"#) as? String == "3/8")
            #expect(
                try await browser.run(#"return document.querySelector('[data-location="room-1"] .shape').getAttribute('stroke');"#) as? String
                    == "#8a93a3")
            try await browser.run("for (let i = 0; i < 4; i++) document.getElementById('zoom-out').click();")
            #expect(
                try await browser.run(#"return document.querySelector('[data-location="room-1"]').classList.contains('hidden-zoom');"#) as? Bool
                    == true, "zoom 15 is below the main style's zoomFrom 16")
            try await browser.run("for (let i = 0; i < 4; i++) document.getElementById('zoom-in').click();")
            #expect(
                try await browser.run(#"return document.querySelector('[data-location="room-1"]').classList.contains('hidden-zoom');"#) as? Bool
                    == false)

            // The venue list: the floor, its summary, and a link that opens its page.
            try await browser.open("http://127.0.0.1:\(httpPort)/")
            try await browser.wait("return document.body.dataset.ready === 'true';", timeout: .seconds(10))
            #expect(try await browser.run("return document.querySelector('a[href=\"/floors/ds1/hq/B/F1\"]').textContent;") as? String == "Floor F1")
            let summary = try await browser.run("return document.querySelector('.floors .summary').textContent;") as? String
            #expect(summary?.contains(" locations: ") == true && summary?.contains("Occupied 1") == true, "summary: \(summary ?? "")")
            try await browser.run("document.querySelector('a[href=\"/floors/ds1/hq/B/F1\"]').click();")
            try await browser.wait("return document.body.dataset.ready === 'true' && location.pathname === '/floors/ds1/hq/B/F1';", timeout: .seconds(10))
            try await browser.wait(#"return \#(fill("room-1")) === '#D64545';"#)
            try await browser.run("window.sameDocument = true;")

            // The screenshot: the pixels inside room-1 are the rule's color.
            let center = try await browser.run(
                #"const r = document.querySelector('[data-location="room-1"] .shape').getBoundingClientRect(); return [r.left + r.width / 4, r.top + r.height / 4];"#)
                as? [Double]
            let png = try #require(try await browser.screenshot())
            try png.write(to: directory.appendingPathComponent("floor.png"))
            // The README's picture is this one: `LIVEDATA_SCREENSHOT=docs/floor-view.png`.
            if let keep = ProcessInfo.processInfo.environment["LIVEDATA_SCREENSHOT"] {
                try png.write(to: URL(fileURLWithPath: keep))
            }
            let pixel = try await browser.runAsync(
                """
                const done = arguments[arguments.length - 1];
                const image = new Image();
                image.onload = () => {
                  const canvas = document.createElement('canvas');
                  canvas.width = image.width; canvas.height = image.height;
                  const context = canvas.getContext('2d');
                  context.drawImage(image, 0, 0);
                  const scale = image.width / window.innerWidth;
                  done(Array.from(context.getImageData(\(center?[0] ?? 0) * scale, \(center?[1] ?? 0) * scale, 1, 1).data));
                };
                image.src = 'data:image/png;base64,\(png.base64EncodedString())';
                """) as? [Int]
            #expect(pixel.map { Array($0.prefix(3)) } == [0xD6, 0x45, 0x45], "pixel \(pixel ?? [])")

            // The daemon goes away: the banner says so; the broker keeps what is published
            // meanwhile; the restarted daemon takes it and the page shows it.
            daemon.signal(SIGKILL)
            _ = try await daemon.wait(timeout: .seconds(10))
            try await browser.wait("return !document.getElementById('banner').hidden;", timeout: .seconds(5))
            try await publish(sensor, "room-2", people: 5)
            daemon = try await startDaemon()
            try await browser.wait("return document.getElementById('banner').hidden;", timeout: .seconds(10))
            try await browser.wait(#"return \#(fill("room-2")) === '#D64545';"#, timeout: .seconds(5))
            #expect(try await browser.run("return window.sameDocument === true;") as? Bool == true)
        } catch {
            await browser.close()
            throw error
        }
        await browser.close()
        daemon.signal(SIGTERM)
        _ = try await daemon.wait(timeout: .seconds(10))
        await sensor.disconnect()
        try? FileManager.default.removeItem(at: directory)
    }
}
