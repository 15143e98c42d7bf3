import Hummingbird

/// A floor's page: SVG shapes that take their locations' derived styles live, the legend
/// with a count per state, the floor's summary, a zoom control, layer toggles and a floor
/// picker. Plain HTML, CSS and JavaScript in `Assets/` (`floor.html`, `floor.css`,
/// `floor.js`), compiled into the binary as byte arrays (`.embedInCode` in Package.swift,
/// which generates `PackageResources`): no CDN, no build step, no bundle beside the binary.
enum FloorPage {
    /// The placeholders of `floor.html` (`{{floor}}`): the floor's scope, and the style
    /// fields the script draws (``FloorStyleField``). The script reads them from the body's
    /// `data-` attributes, which are filled from them.
    enum Placeholder: String, CaseIterable, Sendable {
        case dataset, venue, building, floor, styleFields
    }

    /// `floor.html`, split into its text and its placeholders when first asked for.
    // The template is fixed when the binary is built and FloorPageTests parses it, so a
    // mistake in it fails the tests, never a daemon.
    static let template = try! PageTemplate<Placeholder>(PackageResources.floor_html)

    /// `/assets/floor.js`, the bytes of `floor.js`.
    static let script = ByteBuffer(bytes: PackageResources.floor_js)

    /// `/assets/floor.css`, the bytes of `floor.css`: the floor's page and the venue list.
    static let styleSheet = ByteBuffer(bytes: PackageResources.floor_css)

    static func render(dataset: String, venue: String, building: String, floor: String) -> ByteBuffer {
        template.render { placeholder in
            switch placeholder {
            case .dataset: dataset
            case .venue: venue
            case .building: building
            case .floor: floor
            case .styleFields: FloorStyleField.json
            }
        }
    }
}
