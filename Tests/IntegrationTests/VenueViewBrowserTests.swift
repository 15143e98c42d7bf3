import Foundation
#if canImport(Glibc)
import Glibc
#endif
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

/// The venue page in a real headless chromium, driven over WebDriver as a person would use
/// it (a drag, the wheel, a click, the keyboard), against `livedata serve` on a real broker.
@Suite("Venue view in a browser", .timeLimit(.minutes(3)))
struct VenueViewBrowserTests {
    typealias Browser = FloorViewBrowserTests.Browser
    let logger = Logger(label: "test")

    /// Metres east and north of the venue's corner, as longitude and latitude.
    static func lonLat(_ x: Double, _ y: Double) -> [Double] {
        [12.5 + x / (111_320 * cos(55.6 * .pi / 180)), 55.6 + y / 110_540]
    }

    static func rectangle(_ x: Double, _ y: Double, _ width: Double, _ height: Double) -> String {
        let corners = [(x, y), (x + width, y), (x + width, y + height), (x, y + height), (x, y)]
        return "[[" + corners.map { "[\(lonLat($0.0, $0.1).map { String($0) }.joined(separator: ", "))]" }.joined(separator: ", ") + "]]"
    }

    /// Building A (x 0–60 m) has a footprint feature and floors A1 at 0 m and A2 at 4 m; B
    /// (x 200–260 m) has none (its outline comes from its rooms) and floors B1–B3 whose
    /// elevations the config gives (-4, 0, 4 m): A2 lines up with B3.
    static var geometry: String {
        var features = [
            #"{"type": "Feature", "properties": {"id": "bldg-a", "kind": "building", "name": "Atrium", "dataset": "ds1", "venue": "hq", "building": "A"}, "geometry": {"type": "Polygon", "coordinates": \#(rectangle(0, 0, 60, 30))}}"#
        ]
        for (building, floor, x, elevation) in [
            ("A", "A1", 0.0, "0"), ("A", "A2", 0.0, "4"), ("B", "B1", 200.0, nil), ("B", "B2", 200.0, nil), ("B", "B3", 200.0, nil),
        ] as [(String, String, Double, String?)] {
            let id = floor.lowercased() + "-room"
            let elevationProperty = elevation.map { #", "elevation": \#($0)"# } ?? ""
            features.append(
                #"{"type": "Feature", "properties": {"id": "\#(id)", "dataset": "ds1", "venue": "hq", "building": "\#(building)", "floor": "\#(floor)"\#(elevationProperty)}, "geometry": {"type": "Polygon", "coordinates": \#(rectangle(x + 5, 5, 20, 20))}}"#
            )
            features.append(
                #"{"type": "Feature", "properties": {"id": "\#(id)-2", "dataset": "ds1", "venue": "hq", "building": "\#(building)", "floor": "\#(floor)"}, "geometry": {"type": "Polygon", "coordinates": \#(rectangle(x + 35, 5, 20, 20))}}"#
            )
        }
        return #"{"type": "FeatureCollection", "features": [\#(features.joined(separator: ",\n"))]}"#
    }

    static func config(broker: Int, http: Int, geometry: String) -> String {
        """
        broker: {host: 127.0.0.1, port: \(broker), clientId: venue-view-test, keepalive: 5s}
        subscriptions:
          - {dataset: ds1}
        geometry: \(geometry)
        styles:
          main: {visible: true, polygonFillColor: "#E0E0E0"}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", polygonFillOpacity: 1, label: "{nrOfPeople}/{capacity}"}
            legend: Occupied
          - name: vacant
            domain: occupancy
            when: nrOfPeople == 0
            style: {polygonFillColor: "#2E9E4F", polygonFillOpacity: 1}
            legend: Vacant
        output: {summaryInterval: 200ms}
        store: {path: ":memory:"}
        http: {listen: "127.0.0.1:\(http)"}
        venueView:
          indoorZoom: 18.5
          outdoorZoom: 17.5
          buildings:
            B: {elevations: {B1: -4, B2: 0, B3: 4}}
        """
    }

    func occupancy(_ client: MQTTClient, _ building: String, _ floor: String, _ room: String, people: Int) async throws {
        try await client.publish(
            "ds1/hq/\(building)/\(floor)/R/\(room)/occupancy",
            text: #"{"timestamp": \#(Int64(Date().timeIntervalSince1970 * 1000)), "properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#,
            qos: .atLeastOnce)
    }

    func position(_ client: MQTTClient, _ building: String, _ floor: String, x: Double, y: Double) async throws {
        let at = Self.lonLat(x, y)
        try await client.publish(
            "ds1/hq/\(building)/\(floor)/R/cart/position",
            text: #"{"timestamp": \#(Int64(Date().timeIntervalSince1970 * 1000)), "properties": {"latitude": "\#(at[1])", "longitude": "\#(at[0])", "floorIndex": "0"}}"#,
            qos: .atLeastOnce)
    }

    func fill(_ id: String) -> String {
        #"(document.querySelector('[data-location="\#(id)"] .shape')?.getAttribute('fill') ?? null)"#
    }

    /// The colour the map's canvas shows inside a location (a fifth of the way in from its
    /// top-left corner, off its label), as `#RRGGBB`: what a person sees there.
    func painted(_ id: String) -> String {
        #"""
        (() => { const s = document.querySelector('[data-location="\#(id)"] .shape'); if (!s) return null;
          const r = s.getBoundingClientRect(), c = document.getElementById('paint'), b = c.getBoundingClientRect(), k = c.width / b.width;
          const d = c.getContext('2d').getImageData(Math.round((r.left + r.width * 0.2 - b.left) * k), Math.round((r.top + r.height * 0.2 - b.top) * k), 1, 1).data;
          return '#' + [d[0], d[1], d[2]].map((v) => v.toString(16).padStart(2, '0')).join('').toUpperCase(); })()
        """#
    }

    /// The map's rectangle on screen: left, top, width, height.
    func mapRect(_ browser: Browser) async throws -> [Double] {
        try #require(
            try await browser.run("const r = document.getElementById('map').getBoundingClientRect(); return [r.left, r.top, r.width, r.height];")
                as? [Double])
    }

    /// A person's drag on the map, from its centre by (dx, dy) pixels.
    func drag(_ browser: Browser, dx: Double, dy: Double = 0) async throws {
        let r = try await mapRect(browser)
        let x = Int(r[0] + r[2] / 2), y = Int(r[1] + r[3] / 2)
        try await browser.command(
            "POST", "/actions",
            [
                "actions": [
                    [
                        "type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"],
                        "actions": [
                            ["type": "pointerMove", "duration": 0, "x": x, "y": y, "origin": "viewport"],
                            ["type": "pointerDown", "button": 0],
                            ["type": "pointerMove", "duration": 300, "x": x + Int(dx), "y": y + Int(dy), "origin": "viewport"],
                            ["type": "pointerUp", "button": 0],
                        ],
                    ] as [String: Any]
                ]
            ])
        try await browser.command("DELETE", "/actions")
    }

    /// A person's click at a point of the page.
    func click(_ browser: Browser, x: Double, y: Double) async throws {
        try await browser.command(
            "POST", "/actions",
            [
                "actions": [
                    [
                        "type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"],
                        "actions": [
                            ["type": "pointerMove", "duration": 0, "x": Int(x), "y": Int(y), "origin": "viewport"],
                            ["type": "pointerDown", "button": 0], ["type": "pointerUp", "button": 0],
                        ],
                    ] as [String: Any]
                ]
            ])
        try await browser.command("DELETE", "/actions")
    }

    /// Two fingers on the map, `from` pixels either side of its centre, moving to `to`.
    func pinch(_ browser: Browser, from: Int, to: Int) async throws {
        let r = try await mapRect(browser)
        let x = Int(r[0] + r[2] / 2), y = Int(r[1] + r[3] / 2)
        func finger(_ id: String, _ sign: Int) -> [String: Any] {
            [
                "type": "pointer", "id": id, "parameters": ["pointerType": "touch"],
                "actions": [
                    ["type": "pointerMove", "duration": 0, "x": x + sign * from, "y": y, "origin": "viewport"],
                    ["type": "pointerDown", "button": 0],
                    ["type": "pointerMove", "duration": 300, "x": x + sign * to, "y": y, "origin": "viewport"],
                    ["type": "pointerUp", "button": 0],
                ],
            ]
        }
        try await browser.command("POST", "/actions", ["actions": [finger("finger1", -1), finger("finger2", 1)]])
        try await browser.command("DELETE", "/actions")
    }

    /// The mouse wheel over the map's centre: positive `deltaY` zooms out.
    func wheel(_ browser: Browser, deltaY: Int) async throws {
        let r = try await mapRect(browser)
        try await browser.command(
            "POST", "/actions",
            [
                "actions": [
                    [
                        "type": "wheel", "id": "wheel",
                        "actions": [
                            [
                                "type": "scroll", "x": Int(r[0] + r[2] / 2), "y": Int(r[1] + r[3] / 2), "deltaX": 0, "deltaY": deltaY,
                                "duration": 0, "origin": "viewport",
                            ]
                        ],
                    ] as [String: Any]
                ]
            ])
    }

    /// Keys typed into the map (WebDriver key codes: `\u{E012}` is ArrowLeft).
    func keys(_ browser: Browser, _ values: [String]) async throws {
        try await browser.run("document.getElementById('map').focus();")
        let actions = values.flatMap { [["type": "keyDown", "value": $0], ["type": "keyUp", "value": $0]] }
        try await browser.command("POST", "/actions", ["actions": [["type": "key", "id": "keyboard", "actions": actions] as [String: Any]]])
    }

    func screenshot(_ browser: Browser, _ name: String) async throws {
        guard let directory = ProcessInfo.processInfo.environment["LIVEDATA_SCREENSHOT_DIR"] else { return }
        let png = try #require(try await browser.screenshot())
        try png.write(to: URL(fileURLWithPath: directory).appendingPathComponent(name))
    }

    @Test("pan from A to B at indoor zoom: B opens on the floor at A2's elevation and goes live; zoom out: facades with live summaries; follow an asset across a floor and a building; the URL reopens the view; without auto focus a click opens a building")
    func venue() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try TestDirectory.make(prefix: "venue-view")
        defer { try? FileManager.default.removeItem(at: directory) }
        let geometryPath = directory.appendingPathComponent("venue.geojson").path
        try Self.geometry.write(toFile: geometryPath, atomically: true, encoding: .utf8)
        let httpPort = try freeLoopbackPort()
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        try Self.config(broker: broker.port, http: httpPort, geometry: geometryPath).write(toFile: configPath, atomically: true, encoding: .utf8)
        let daemon = try await CommandRunner().start(["serve", "--config", configPath])
        defer { daemon.signal(SIGKILL) }
        try await eventually("the daemon to be ready:\n\(daemon.standardError)", every: .milliseconds(50)) {
            (try? await LoopbackHTTP.request("GET", port: httpPort, path: "/readyz"))?.status == 200
        }
        let sensor = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await sensor.connect()
        try await occupancy(sensor, "A", "A2", "a2-room", people: 3)
        try await occupancy(sensor, "A", "A1", "a1-room", people: 0)
        try await occupancy(sensor, "B", "B3", "b3-room", people: 0)
        try await position(sensor, "A", "A2", x: 30, y: 15)
        try await eventually("the daemon to hold the updates") {
            (try? await LoopbackHTTP.request("GET", port: httpPort, path: "/v1/locations/cart"))?.status == 200
        }

        let browser = try await Browser.start()
        do {
            // The overview: both buildings as facades, each with its live summary.
            try await browser.open("http://127.0.0.1:\(httpPort)/venues/ds1/hq")
            try await browser.wait("return document.body.dataset.ready === 'true';", timeout: .seconds(10))
            #expect(try await browser.run("return document.body.dataset.viewport;") as? String == "overview")
            #expect(try await browser.run("return document.querySelectorAll('.building').length;") as? Int == 2)
            try await browser.wait(
                #"return (document.querySelector('.building[data-building="A"]').dataset.summary || '').includes('Occupied 1');"#, timeout: .seconds(5))
            #expect(try await browser.run("return document.body.dataset.focus || '';") as? String == "")
            try await browser.run("window.sameDocument = true;")

            // A pinch (two touches moving apart by a fifth) zooms in by log2(1.2).
            let before = try #require(try await browser.run("return parseFloat(document.getElementById('map').dataset.zoom);") as? Double)
            try await pinch(browser, from: 50, to: 60)
            try await browser.wait(
                "return Math.abs(parseFloat(document.getElementById('map').dataset.zoom) - \(before) - Math.log2(1.2)) < 0.06;")

            // Zoom in over A (the wheel): A opens on its default floor, the one at 0 m.
            let zoom = try #require(try await browser.run("return parseFloat(document.getElementById('map').dataset.zoom);") as? Double)
            let r = try await mapRect(browser)
            let a = try #require(
                try await browser.run(#"const b = document.querySelector('.building[data-building="A"] .facade').getBoundingClientRect(); return [b.left + b.width / 2, b.top + b.height / 2];"#)
                    as? [Double])
            // Bring A under the centre, then zoom to 19.
            try await drag(browser, dx: r[0] + r[2] / 2 - a[0], dy: r[1] + r[3] / 2 - a[1])
            try await wheel(browser, deltaY: -Int(((19 - zoom) / 0.0025).rounded()))
            try await browser.wait("return document.body.dataset.focus === 'A/A1' && document.body.dataset.live === 'A/A1';", timeout: .seconds(5))
            try await browser.wait(#"return \#(fill("a1-room")) === '#2E9E4F';"#)
            try await browser.wait(#"return \#(painted("a1-room")) === '#2E9E4F';"#)
            // The person chooses A2.
            try await browser.run(#"document.querySelector('#floors button[data-floor="A2"]').click();"#)
            try await browser.wait("return document.body.dataset.live === 'A/A2';", timeout: .seconds(5))
            try await browser.wait(#"return \#(fill("a2-room")) === '#D64545';"#)
            try await screenshot(browser, "venue-view-floor.png")

            // Pan to B (200 m east) at indoor zoom: B opens on B3, the floor at A2's 4 m.
            let pixelsPerMetre = try #require(
                try await browser.run("const z = parseFloat(document.getElementById('map').dataset.zoom); return Math.pow(2, z) / (156543.03 * Math.cos(55.6 * Math.PI / 180));")
                    as? Double)
            for _ in 0..<4 { try await drag(browser, dx: -50 * pixelsPerMetre) }
            try await browser.wait("return document.body.dataset.focus === 'B/B3' && document.body.dataset.live === 'B/B3';", timeout: .seconds(5))
            try await browser.wait(#"return \#(fill("b3-room")) === '#2E9E4F';"#)
            try await occupancy(sensor, "B", "B3", "b3-room", people: 2)
            try await browser.wait(#"return \#(fill("b3-room")) === '#D64545';"#, timeout: .seconds(2))
            try await browser.wait(#"return \#(painted("b3-room")) === '#D64545';"#, timeout: .seconds(2))
            #expect(try await browser.run(#"return document.querySelector('.building[data-building="B"]').classList.contains('open');"#) as? Bool == true)
            #expect(try await browser.run(#"return document.querySelector('.building[data-building="A"]').classList.contains('open');"#) as? Bool == false)

            // Zoom out below the outdoor threshold: facades only, their summaries live.
            try await wheel(browser, deltaY: 800)
            try await browser.wait("return (document.body.dataset.focus || '') === '' && !document.querySelector('.building.open');", timeout: .seconds(5))
            #expect(try await browser.run("return document.querySelectorAll('[data-location]').length;") as? Int == 0)
            try await browser.wait(
                #"return (document.querySelector('.building[data-building="B"]').dataset.summary || '').includes('Occupied 1');"#, timeout: .seconds(5))
            try await occupancy(sensor, "B", "B1", "b1-room", people: 4)
            try await browser.wait(
                #"return (document.querySelector('.building[data-building="B"]').dataset.summary || '').includes('Occupied 2');"#, timeout: .seconds(3))
            try await screenshot(browser, "venue-view.png")

            // The keyboard: + zooms in over the centre (B): B opens again on B3, the floor at
            // the elevation of the floor shown last.
            try await keys(browser, ["+", "+", "+", "+"])
            try await browser.wait("return document.body.dataset.focus === 'B/B3';", timeout: .seconds(5))
            // B2 (0 m) chosen, then back west to A: A opens on A2, the floor last chosen
            // there, not A1 at B2's elevation.
            try await browser.run(#"document.querySelector('#floors button[data-floor="B2"]').click();"#)
            try await browser.wait("return document.body.dataset.live === 'B/B2';", timeout: .seconds(5))
            for _ in 0..<4 { try await drag(browser, dx: 50 * pixelsPerMetre) }
            try await browser.wait("return document.body.dataset.focus === 'A/A2' && document.body.dataset.live === 'A/A2';", timeout: .seconds(5))

            // Follow the cart: a click on it in A2 (the link takes the view back to A2).
            try await browser.run(
                "location.href = '/venues/ds1/hq?building=A&floor=A2&center=' + \(Self.lonLat(30, 15)[0]) + ',' + \(Self.lonLat(30, 15)[1]) + '&zoom=19';")
            try await browser.wait("return document.body.dataset.ready === 'true' && document.body.dataset.live === 'A/A2';", timeout: .seconds(10))
            #expect(try await browser.run("return document.body.dataset.viewport;") as? String == "idle")
            try await browser.wait(#"return !!document.querySelector('#floor [data-asset="cart"]');"#)
            let cart = try #require(
                try await browser.run(#"const b = document.querySelector('#floor [data-asset="cart"]').getBoundingClientRect(); return [b.left + b.width / 2, b.top + b.height / 2];"#)
                    as? [Double])
            try await click(browser, x: cart[0], y: cart[1])
            try await browser.wait("return document.body.dataset.following === 'cart' && document.body.dataset.viewport === 'following';", timeout: .seconds(3))
            // It takes the lift to A1: the view follows it onto A1.
            try await position(sensor, "A", "A1", x: 45, y: 10)
            try await browser.wait("return document.body.dataset.live === 'A/A1' && document.body.dataset.viewport === 'following';", timeout: .seconds(3))
            // It crosses to B, onto B2: the view flies there (transitioning), follows it
            // there, and keeps it centred.
            try await browser.run(
                "window.viewportStates = []; new MutationObserver(() => window.viewportStates.push(document.body.dataset.viewport)).observe(document.body, {attributes: true, attributeFilter: ['data-viewport']});")
            try await position(sensor, "B", "B2", x: 230, y: 20)
            try await browser.wait("return document.body.dataset.live === 'B/B2' && document.body.dataset.viewport === 'following';", timeout: .seconds(3))
            let measured = try await browser.run(
                "const m = document.getElementById('map').getBoundingClientRect(), c = document.querySelector('#assets circle').getBoundingClientRect(); return Math.hypot(c.left + c.width / 2 - m.left - m.width / 2, c.top + c.height / 2 - m.top - m.height / 2);"
            )
            let offset = try #require(measured as? Double, "the offset read: \(String(describing: measured))")
            #expect(offset < 3, "the followed cart is \(offset) px from the centre")
            let states = try await browser.run("return window.viewportStates;") as? [String] ?? []
            #expect(states.suffix(2) == ["transitioning", "following"], "\(states)")
            // Escape leaves follow: idle.
            try await keys(browser, ["\u{E00C}"])
            try await browser.wait("return document.body.dataset.viewport === 'idle' && !document.body.dataset.following;")

            // The URL holds the view: opened again, it shows the same building, floor and zoom.
            try await Task.sleep(for: .milliseconds(400))
            let url = try #require(try await browser.run("return location.href;") as? String)
            #expect(url.contains("building=B") && url.contains("floor=B2") && url.contains("zoom="), "\(url)")
            try await browser.open(url)
            try await browser.wait("return document.body.dataset.ready === 'true' && document.body.dataset.live === 'B/B2';", timeout: .seconds(10))

            // Auto focus off: zooming in opens nothing; a click on a facade opens it.
            try await browser.open("http://127.0.0.1:\(httpPort)/venues/ds1/hq?autoFocus=false&center=\(Self.lonLat(30, 15)[0]),\(Self.lonLat(30, 15)[1])&zoom=19")
            try await browser.wait("return document.body.dataset.ready === 'true';", timeout: .seconds(10))
            try await Task.sleep(for: .milliseconds(400))
            #expect(try await browser.run("return document.body.dataset.focus || '';") as? String == "")
            let facade = try #require(
                try await browser.run(#"const b = document.querySelector('.building[data-building="A"] .facade').getBoundingClientRect(); return [b.left + 20, b.top + 20];"#)
                    as? [Double])
            try await click(browser, x: facade[0], y: facade[1])
            try await browser.wait("return document.body.dataset.live === 'A/A1';", timeout: .seconds(5))
        } catch {
            await browser.close()
            throw error
        }
        await browser.close()
        await sensor.disconnect()
        daemon.signal(SIGTERM)
        _ = try await daemon.wait(timeout: .seconds(10))
    }
}
