import Hummingbird

/// A venue's page (`/venues/{dataset}/{venue}`): every building as a facade with its live
/// summary, pan and zoom, and the floor of the building in focus drawn live (`venue.html`,
/// `venue.css`, `venue.js` in `Assets/`, compiled into the binary as `floor.js` is).
enum VenuePage {
    /// The placeholders of `venue.html`: the venue, and the style fields the script draws
    /// (``FloorStyleField``), read by the script from the body's `data-` attributes.
    enum Placeholder: String, CaseIterable, Sendable {
        case dataset, venue, styleFields
    }

    // Fixed when the binary is built and parsed by VenuePageTests: a mistake in it fails
    // the tests, never a daemon.
    static let template = try! PageTemplate<Placeholder>(PackageResources.venue_html)

    static let script = ByteBuffer(bytes: PackageResources.venue_js)
    static let styleSheet = ByteBuffer(bytes: PackageResources.venue_css)

    static func render(dataset: String, venue: String) -> ByteBuffer {
        template.render { placeholder in
            switch placeholder {
            case .dataset: dataset
            case .venue: venue
            case .styleFields: FloorStyleField.json
            }
        }
    }

    static func add(to router: Router<BasicRequestContext>, queries: LiveQueries) {
        router.get("/venues/:dataset/:venue") { _, context in
            let parts = HTTPInterface.pathComponents(context, ["dataset", "venue"])
            return FloorView.html(render(dataset: parts[0], venue: parts[1]))
        }
        router.get("/assets/venue.js") { _, _ in FloorView.asset(script, type: "text/javascript; charset=utf-8") }
        router.get("/assets/venue.css") { _, _ in FloorView.asset(styleSheet, type: "text/css; charset=utf-8") }
        router.get("/v1/venues/:dataset/:venue") { _, context in
            let parts = HTTPInterface.pathComponents(context, ["dataset", "venue"])
            return HTTPInterface.encoded(.ok, await queries.venueLayout(dataset: parts[0], venue: parts[1]))
        }
    }
}
