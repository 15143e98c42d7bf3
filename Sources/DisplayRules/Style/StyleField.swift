/// The fields of a style, in field order (the order of the JSON output and of `changed`),
/// by their names in the config and the JSON output.
///
/// This enum and ``definition`` are the one table of style fields. Everything else reads
/// it: where ``Style`` keeps each value, overriding, the diff, the JSON writer, the config
/// reader, the state file's record codec, the config keys, and the floor page, which draws
/// each field as its row says. A new field of an existing kind is a case here and its row
/// in ``definition`` (the compiler asks for the row), and nothing else in code.
public enum StyleField: String, CaseIterable, Sendable {
    case visible, zoomFrom, zoomTo, icon, iconVisible, iconSize, label, labelVisible, polygonVisible
    case polygonFillColor, polygonFillOpacity, polygonStrokeColor, polygonStrokeWidth, polygonStrokeOpacity
    case badge, displayRank, layer

    /// What a field holds, and so how the config reads it, ``Style`` keeps it, JSON writes
    /// it, the state file stores it and the diff compares it.
    public enum Kind: Sendable, Equatable {
        /// `true` or `false`.
        case flag
        /// A number within a range.
        case number(ClosedRange<Double>)
        /// A whole number.
        case integer
        /// Text.
        case text
        /// A name that may not be empty.
        case name
        /// Text; a label template (`"{nrOfPeople}/{capacity}"`) in a configured style.
        /// Rendered per update, which the rule engine does for `label` and the badge's text
        /// by name: a new field of this kind needs the engine too.
        case template
        /// `#RRGGBB`.
        case color
        /// A badge: text (a template) and two colors.
        case badge

        /// The kind's name where the table is shown to a reader or a script (the floor page).
        public var name: String {
            switch self {
            case .flag: "flag"
            case .number: "number"
            case .integer: "integer"
            case .text: "text"
            case .name: "name"
            case .template: "template"
            case .color: "color"
            case .badge: "badge"
            }
        }
    }

    /// A part of a location as a map draws it.
    public enum Part: String, CaseIterable, Sendable {
        /// The whole location: its shape, label, icon and badge.
        case location
        /// Its polygon (or point).
        case shape
        /// The text at its centre.
        case label
        /// Its icon (the floor page names it in the location's title).
        case icon
        /// The badge beside the label.
        case badge
    }

    /// How a map draws a field: the floor page (`floor.js`) draws every field from this,
    /// and knows the parts, never the fields' names.
    public enum Drawing: Sendable, Equatable {
        /// Not drawn by the floor page (the field orders or groups what is drawn).
        case none
        /// A flag: `false` hides the part.
        case shows(Part)
        /// The part's content: the label's text, the badge, the icon's name.
        case content(Part)
        /// An SVG attribute of the part (`fill` of the shape), drawn as `unset` when no
        /// style layer sets the field.
        case attribute(Part, String, unset: String)
    }

    /// A field's row in the table: its kind, its stored id, how it is drawn.
    public struct Definition: Sendable, Equatable {
        public var kind: Kind
        /// The field's number in the state file (its bit in a stored style). Never reused
        /// and never renumbered: a state file written before a field was added must still
        /// read. A new field takes the next free id, wherever it stands in field order.
        public var storedID: Int
        public var drawing: Drawing

        init(_ kind: Kind, storedID: Int, drawn drawing: Drawing) {
            self.kind = kind
            self.storedID = storedID
            self.drawing = drawing
        }
    }

    /// The table: a field's kind, stored id and drawing, each its own switch of constants,
    /// so that a caller on a hot path (a style's slot, a stored style's field) reads the
    /// column it wants without making the row (whose drawing holds strings to release).
    /// Stored ids in use: 0–16; the next free one is 17.
    public var definition: Definition {
        Definition(kind, storedID: storedID, drawn: drawing)
    }

    /// The kind of value the field takes.
    @inline(__always)
    public var kind: Kind {
        switch self {
        case .visible: .flag
        case .zoomFrom: .number(0...30)
        case .zoomTo: .number(0...30)
        case .icon: .text
        case .iconVisible: .flag
        case .iconSize: .number(0...1024)
        case .label: .template
        case .labelVisible: .flag
        case .polygonVisible: .flag
        case .polygonFillColor: .color
        case .polygonFillOpacity: .number(0...1)
        case .polygonStrokeColor: .color
        case .polygonStrokeWidth: .number(0...100)
        case .polygonStrokeOpacity: .number(0...1)
        case .badge: .badge
        case .displayRank: .integer
        case .layer: .name
        }
    }

    /// The field's number in the state file (see ``Definition/storedID``).
    @inline(__always)
    public var storedID: Int {
        switch self {
        case .visible: 0
        case .zoomFrom: 1
        case .zoomTo: 2
        case .icon: 3
        case .iconVisible: 4
        case .iconSize: 5
        case .label: 6
        case .labelVisible: 7
        case .polygonVisible: 8
        case .polygonFillColor: 9
        case .polygonFillOpacity: 10
        case .polygonStrokeColor: 11
        case .polygonStrokeWidth: 12
        case .polygonStrokeOpacity: 13
        case .badge: 14
        case .displayRank: 15
        case .layer: 16
        }
    }

    /// How a map draws the field.
    public var drawing: Drawing {
        switch self {
        case .visible: .shows(.location)
        case .zoomFrom: .attribute(.location, "data-zoom-from", unset: "")
        case .zoomTo: .attribute(.location, "data-zoom-to", unset: "")
        case .icon: .content(.icon)
        case .iconVisible: .shows(.icon)
        case .iconSize: .none
        case .label: .content(.label)
        case .labelVisible: .shows(.label)
        case .polygonVisible: .shows(.shape)
        case .polygonFillColor: .attribute(.shape, "fill", unset: "#E0E0E0")
        case .polygonFillOpacity: .attribute(.shape, "fill-opacity", unset: "1")
        case .polygonStrokeColor: .attribute(.shape, "stroke", unset: "#8a93a3")
        case .polygonStrokeWidth: .attribute(.shape, "stroke-width", unset: "1")
        case .polygonStrokeOpacity: .attribute(.shape, "stroke-opacity", unset: "1")
        case .badge: .content(.badge)
        case .displayRank: .none
        case .layer: .none
        }
    }

    /// The fields in the order of their stored ids (the order a stored style lists them).
    public static let inStoredOrder: [StyleField] = allCases.sorted { $0.storedID < $1.storedID }

    /// The field with this stored id, if any.
    public static func withStoredID(_ id: Int) -> StyleField? {
        guard id >= 0, id < StyleLayout.fieldsByStoredID.count else { return nil }
        return StyleLayout.fieldsByStoredID[id]
    }

    /// The field's bit in a ``StyleFieldSet``: `1 << storedID`.
    @inline(__always)
    var bit: UInt64 { 1 << UInt64(storedID) }
}

/// One style field's value.
public enum StyleValue: Hashable, Sendable {
    case flag(Bool)
    case number(Double)
    case integer(Int)
    /// The value of a `.text`, `.name` or `.template` field.
    case text(String)
    case color(Color)
    case badge(Badge)

    var flag: Bool? { if case .flag(let value) = self { value } else { nil } }
    var number: Double? { if case .number(let value) = self { value } else { nil } }
    var integer: Int? { if case .integer(let value) = self { value } else { nil } }
    var text: String? { if case .text(let value) = self { value } else { nil } }
    var color: Color? { if case .color(let value) = self { value } else { nil } }
    var badge: Badge? { if case .badge(let value) = self { value } else { nil } }
}

/// A set of style fields, one bit each (by stored id): what changed between two styles,
/// kept without allocating. It iterates in field order.
public struct StyleFieldSet: Hashable, Sendable, Sequence {
    /// Bit `n`: the field with stored id `n`.
    public private(set) var bits: UInt64 = 0

    public init() {}

    public init(bits: UInt64) {
        self.bits = bits
    }

    public var isEmpty: Bool { bits == 0 }

    public mutating func insert(_ field: StyleField) { bits |= field.bit }

    public func contains(_ field: StyleField) -> Bool { bits & field.bit != 0 }

    public func makeIterator() -> some IteratorProtocol<StyleField> {
        StyleField.allCases.lazy.filter { contains($0) }.makeIterator()
    }
}
