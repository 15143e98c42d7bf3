import Foundation
import HTTPTypes
import Hummingbird
import LiveState
import LiveTopics
import ServiceLifecycle

/// The live floor and venue view's routes: the venue list at `/`, a floor's page at
/// `/floors/{dataset}/{venue}/{building}/{floor}`, a venue's at `/venues/{dataset}/{venue}`
/// (``VenuePage``), their scripts and style sheets (shipped in the binary), the shapes
/// (`/v1/geometry`), the floors (`/v1/venues`), a venue's plan (`/v1/venues/{dataset}/{venue}`)
/// and the live feed (`/v1/events`, Server-Sent Events).
enum FloorView {
    /// `/`, the venue list (`Assets/venues.html`), and its script (`venues.js`), which draws
    /// it from `/v1/venues`.
    static let venuePage = ByteBuffer(bytes: PackageResources.venues_html)
    static let venueScript = ByteBuffer(bytes: PackageResources.venues_js)

    /// The shortest time between two writes to one event-stream viewer.
    static let eventWriteInterval = Duration.milliseconds(100)

    static func add(to router: Router<BasicRequestContext>, queries: LiveQueries) {
        router.get("/") { _, _ in html(venuePage) }
        router.get("/assets/venues.js") { _, _ in asset(venueScript, type: "text/javascript; charset=utf-8") }
        addFloorPage(to: router)
        VenuePage.add(to: router, queries: queries)
        router.get("/v1/venues") { _, _ in
            let summaries = await queries.summaries
            let now = LiveTimestamp.now
            var floors = summaries.map { $0.json(updatedAt: now) }
            // Floors only the geometry knows yet: drawn, nothing reported.
            let known = Set(summaries.map(\.key))
            for key in await queries.geometryFloors where !known.contains(key) {
                let empty = SummaryTracker.Summary(key: key, locations: 0, states: [:], people: 0, capacity: 0)
                floors.append(empty.json(updatedAt: now))
            }
            return HTTPInterface.json(.ok, "{\"summaries\": [" + floors.joined(separator: ", ") + "]}")
        }
        router.get("/v1/geometry") { request, _ in
            let query = request.uri.queryParameters
            guard let dataset = query.get("dataset"), let venue = query.get("venue"), let building = query.get("building"),
                let floor = query.get("floor")
            else {
                return HTTPInterface.error(.badRequest, "give dataset, venue, building and floor: /v1/geometry?dataset=…&venue=…&building=…&floor=…")
            }
            return HTTPInterface.json(
                .ok, await queries.geometryJSON(Place(dataset: dataset, venue: venue, building: building, floor: floor)))
        }
        router.get("/v1/events") { request, _ in
            let query = request.uri.queryParameters
            // The seven-part criteria but the domain, each left out matching any; `building`
            // may come more than once; `only=summaries` for the buildings' summaries alone.
            let scope = EventScope(
                dataset: query.get("dataset"), venue: query.get("venue"), buildings: Set(query.getAll("building")),
                floor: query.get("floor"), room: query.get("room"), location: query.get("location"),
                summariesOnly: query.get("only") == "summaries")
            let lastEventID = request.headers[HTTPField.Name("Last-Event-ID")!] ?? query.get("lastEventId")
            let subscription = await queries.openEvents(scope, lastEventID: lastEventID)
            let hub = queries.events
            return Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-cache", .init("X-Accel-Buffering")!: "no"],
                body: ResponseBody { writer in
                    // However the stream ends (the viewer hung up and a write failed, it was
                    // dropped, the server stops), the hub lets the viewer go.
                    defer { hub.end(subscription) }
                    // The server's shutdown ends the stream (it would never end by itself).
                    try await withGracefulShutdownHandler {
                        // Reconnect after 1 s (EventSource's default is 3 s).
                        try await writer.write(ByteBuffer(staticString: "retry: 1000\n\n"))
                        // At most one write per viewer every `eventWriteInterval`: what comes
                        // meanwhile waits in its mailbox and goes out in the next write. A
                        // screen needs no more, and 200 viewers of a busy floor then cost
                        // 2,000 writes a second rather than one per change each.
                        for await frames in subscription.frames {
                            try await writer.write(frames)
                            try await Task.sleep(for: eventWriteInterval)
                        }
                    } onGracefulShutdown: {
                        hub.end(subscription)
                    }
                    try await writer.finish(nil)
                })
        }
    }

    /// A floor's page at `/floors/{dataset}/{venue}/{building}/{floor}`, its script and its
    /// style sheet: what the pipeline does not change.
    static func addFloorPage(to router: Router<BasicRequestContext>) {
        router.get("/floors/:dataset/:venue/:building/:floor") { _, context in
            let parts = HTTPInterface.pathComponents(context, ["dataset", "venue", "building", "floor"])
            return html(FloorPage.render(dataset: parts[0], venue: parts[1], building: parts[2], floor: parts[3]))
        }
        router.get("/assets/floor.js") { _, _ in
            asset(FloorPage.script, type: "text/javascript; charset=utf-8")
        }
        router.get("/assets/floor.css") { _, _ in
            asset(FloorPage.styleSheet, type: "text/css; charset=utf-8")
        }
    }

    static func html(_ text: String) -> Response {
        html(ByteBuffer(string: text))
    }

    static func html(_ page: ByteBuffer) -> Response {
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: page))
    }

    static func asset(_ bytes: ByteBuffer, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "no-cache"], body: .init(byteBuffer: bytes))
    }
}

/// Text for HTML: `&`, `<`, `>` and quotes escaped.
func htmlEscaped(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for character in text {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        default: out.append(character)
        }
    }
    return out
}
