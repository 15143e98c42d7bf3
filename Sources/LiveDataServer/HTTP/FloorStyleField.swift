import DisplayRules
import Foundation

/// The style-field table (``StyleField``) as the floor page reads it: one entry per field,
/// in field order, saying how the page draws it. `floor.js` draws every field from this and
/// names none itself, so a new field is drawn without a change to the script.
///
/// `{"name": "polygonFillColor", "kind": "color", "drawing": "attribute", "part": "shape",
/// "attribute": "fill", "unset": "#E0E0E0"}`; `drawing` is `none`, `shows` (a flag whose
/// `false` hides `part`), `content` (the part's content: the label's text, the badge, the
/// icon's name) or `attribute` (an SVG attribute of `part`, `unset` when no layer sets it).
struct FloorStyleField: Codable, Equatable, Sendable {
    var name: String
    var kind: String
    var drawing: String
    var part: String?
    var attribute: String?
    var unset: String?

    init(_ field: StyleField) {
        name = field.rawValue
        kind = field.kind.name
        switch field.drawing {
        case .none:
            drawing = "none"
        case .shows(let part):
            drawing = "shows"
            self.part = part.rawValue
        case .content(let part):
            drawing = "content"
            self.part = part.rawValue
        case .attribute(let part, let attribute, let unset):
            drawing = "attribute"
            self.part = part.rawValue
            self.attribute = attribute
            self.unset = unset
        }
    }

    /// Every field, in field order.
    static let all = StyleField.allCases.map(FloorStyleField.init)

    /// ``all`` as JSON, made once: the floor page carries it in its body's
    /// `data-style-fields` attribute.
    static let json: String = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and optional strings only: encoding cannot fail.
        return String(decoding: try! encoder.encode(all), as: UTF8.self)
    }()
}
