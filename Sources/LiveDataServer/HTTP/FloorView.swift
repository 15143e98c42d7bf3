import Foundation
import HTTPTypes
import Hummingbird
import LiveState
import LiveTopics
import ServiceLifecycle

/// The live floor view's routes: the venue list at `/`, a floor's page at
/// `/floors/{dataset}/{venue}/{building}/{floor}`, its script and style sheet (shipped in
/// the binary), the shapes (`/v1/geometry`), the floors (`/v1/venues`) and the live feed
/// (`/v1/events`, Server-Sent Events).
enum FloorView {
    /// The shortest time between two writes to one event-stream viewer.
    static let eventWriteInterval = Duration.milliseconds(100)

    static func add(to router: Router<BasicRequestContext>, queries: LiveQueries) {
        router.get("/") { _, _ in
            html(VenuePage.render(summaries: await queries.summaries, geometryFloors: await queries.geometryFloors))
        }
        addFloorPage(to: router)
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
            let scope = PlaceScope(
                dataset: query.get("dataset"), venue: query.get("venue"), building: query.get("building"), floor: query.get("floor"))
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

/// A page of the floor view built in Swift (the venue list): the head `Assets/floor.html`
/// has too (character set, phone viewport, the style sheet), `head` added to it, and `body`
/// (already HTML) in a body with `bodyAttributes`.
func htmlDocument(title: String, head: String = "", bodyAttributes: String, body: String) -> String {
    """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    \(head)<title>\(htmlEscaped(title))</title>
    <link rel="stylesheet" href="/assets/floor.css">
    </head>
    <body \(bodyAttributes)>
    \(body)</body>
    </html>

    """
}

/// A path component in a URL.
func urlComponent(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
}

/// `/`: datasets, venues, buildings and floors, each floor with its summary and a link to
/// its page. Plain HTML that refreshes itself every 10 s.
enum VenuePage {
    static func render(summaries: [SummaryTracker.Summary], geometryFloors: [Place]) -> String {
        var floors: [Place: SummaryTracker.Summary?] = [:]
        for summary in summaries where summary.key.floor != nil { floors[summary.key] = summary }
        for key in geometryFloors where floors[key] == nil { floors[key] = .some(nil) }
        let buildings = Dictionary(grouping: floors.keys) { Place(dataset: $0.dataset, venue: $0.venue, building: $0.building) }
        var body = ""
        if buildings.isEmpty {
            body += "<p class=\"empty\">No location has reported yet. Floors appear here as live updates arrive.</p>\n"
        }
        var lastDataset: String?
        for building in buildings.keys.sorted() {
            if building.dataset != lastDataset {
                body += "<h2>Dataset \(htmlEscaped(building.dataset))</h2>\n"
                lastDataset = building.dataset
            }
            body += "<section class=\"building\"><h3>\(htmlEscaped(building.venue)) · building \(htmlEscaped(building.building))</h3>\n<ul class=\"floors\">\n"
            for key in buildings[building, default: []].sorted() {
                let link = "/floors/" + [key.dataset, key.venue, key.building, key.floor ?? ""].map(urlComponent).joined(separator: "/")
                body += "<li><a href=\"\(link)\">Floor \(htmlEscaped(key.floor ?? ""))</a> "
                if let summary = floors[key] ?? nil {
                    let states = summary.states.sorted { $0.key < $1.key }
                        .map { "<span class=\"state\">\(htmlEscaped($0.key)) \($0.value)</span>" }.joined(separator: " ")
                    let people = summary.capacity > 0 ? " · \(summary.people) of \(summary.capacity) people" : " · \(summary.people) people"
                    body += "<span class=\"summary\">\(summary.locations) locations: \(states)\(people)</span>"
                } else {
                    body += "<span class=\"summary\">no reports yet</span>"
                }
                body += "</li>\n"
            }
            body += "</ul></section>\n"
        }
        return htmlDocument(
            title: "livedata: venues", head: "<meta http-equiv=\"refresh\" content=\"10\">\n", bodyAttributes: "class=\"venues\"",
            body: """
                <header><h1>livedata</h1><p>Live state of every floor. Choose a floor to see it change.</p></header>
                <main>
                \(body)</main>

                """)
    }
}
