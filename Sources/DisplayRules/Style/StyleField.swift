/// The fields of a style, in field order (the order of the JSON output and of `changed`),
/// by their names in the config and the JSON output.
///
/// This enum and ``definition`` are the one table of style fields: override, diff, JSON,
/// config parsing and the state file's record codec all go through it (and through
/// ``Style/subscript(_:)``), so a new field is a case here, a row in ``definition`` and a
/// property of ``Style``.
public enum StyleField: String, CaseIterable, Sendable {
    case visible, zoomFrom, zoomTo, icon, iconVisible, iconSize, label, labelVisible, polygonVisible
    case polygonFillColor, polygonFillOpacity, polygonStrokeColor, polygonStrokeWidth, polygonStrokeOpacity
    case badge, displayRank, layer

    /// What a field holds, and so how the config reads it, JSON writes it and the state
    /// file stores it.
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
        case template
        /// `#RRGGBB`.
        case color
        /// A badge: text (a template) and two colors.
        case badge
    }

    /// A field's kind and its stored id.
    public struct Definition: Sendable, Equatable {
        public var kind: Kind
        /// The field's number in the state file (its bit in a stored style). Never reused
        /// and never renumbered: a state file written before a field was added must still
        /// read. A new field takes the next free id, wherever it stands in field order.
        public var storedID: Int

        init(_ kind: Kind, storedID: Int) {
            self.kind = kind
            self.storedID = storedID
        }
    }

    /// The table. Stored ids in use: 0–16; the next free one is 17.
    public var definition: Definition {
        switch self {
        case .visible: Definition(.flag, storedID: 0)
        case .zoomFrom: Definition(.number(0...30), storedID: 1)
        case .zoomTo: Definition(.number(0...30), storedID: 2)
        case .icon: Definition(.text, storedID: 3)
        case .iconVisible: Definition(.flag, storedID: 4)
        case .iconSize: Definition(.number(0...1024), storedID: 5)
        case .label: Definition(.template, storedID: 6)
        case .labelVisible: Definition(.flag, storedID: 7)
        case .polygonVisible: Definition(.flag, storedID: 8)
        case .polygonFillColor: Definition(.color, storedID: 9)
        case .polygonFillOpacity: Definition(.number(0...1), storedID: 10)
        case .polygonStrokeColor: Definition(.color, storedID: 11)
        case .polygonStrokeWidth: Definition(.number(0...100), storedID: 12)
        case .polygonStrokeOpacity: Definition(.number(0...1), storedID: 13)
        case .badge: Definition(.badge, storedID: 14)
        case .displayRank: Definition(.integer, storedID: 15)
        case .layer: Definition(.name, storedID: 16)
        }
    }

    /// The fields in the order of their stored ids (the order a stored style lists them).
    public static let inStoredOrder: [StyleField] = allCases.sorted { $0.definition.storedID < $1.definition.storedID }

    /// The field with this stored id, if any.
    public static func withStoredID(_ id: Int) -> StyleField? {
        inStoredOrder.first { $0.definition.storedID == id }
    }

    var bit: UInt64 { 1 << UInt64(definition.storedID) }
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
