import LiveTopics

/// How a location is drawn (MapsIndoors-style display rule fields). Every field is
/// optional: `nil` inherits from the layer below (main → type → location → live rules).
public struct Style: Hashable, Sendable {
    public var visible: Bool?
    public var zoomFrom: Double?
    public var zoomTo: Double?
    public var icon: String?
    public var iconVisible: Bool?
    public var iconSize: Double?
    /// Rendered text in a derived style; a template (`"{nrOfPeople}/{capacity}"`) in a configured one.
    public var label: String?
    public var labelVisible: Bool?
    public var polygonVisible: Bool?
    public var polygonFillColor: Color?
    public var polygonFillOpacity: Double?
    public var polygonStrokeColor: Color?
    public var polygonStrokeWidth: Double?
    public var polygonStrokeOpacity: Double?
    public var badge: Badge?
    public var displayRank: Int?
    public var layer: String?

    public init(
        visible: Bool? = nil, zoomFrom: Double? = nil, zoomTo: Double? = nil, icon: String? = nil,
        iconVisible: Bool? = nil, iconSize: Double? = nil, label: String? = nil, labelVisible: Bool? = nil,
        polygonVisible: Bool? = nil, polygonFillColor: Color? = nil, polygonFillOpacity: Double? = nil,
        polygonStrokeColor: Color? = nil, polygonStrokeWidth: Double? = nil, polygonStrokeOpacity: Double? = nil,
        badge: Badge? = nil, displayRank: Int? = nil, layer: String? = nil
    ) {
        self.visible = visible
        self.zoomFrom = zoomFrom
        self.zoomTo = zoomTo
        self.icon = icon
        self.iconVisible = iconVisible
        self.iconSize = iconSize
        self.label = label
        self.labelVisible = labelVisible
        self.polygonVisible = polygonVisible
        self.polygonFillColor = polygonFillColor
        self.polygonFillOpacity = polygonFillOpacity
        self.polygonStrokeColor = polygonStrokeColor
        self.polygonStrokeWidth = polygonStrokeWidth
        self.polygonStrokeOpacity = polygonStrokeOpacity
        self.badge = badge
        self.displayRank = displayRank
        self.layer = layer
    }

    /// This style with every field that `other` sets taken from `other` (badge fields one by one).
    public func overridden(by other: Style) -> Style {
        var result = self
        result.override(with: other)
        return result
    }

    /// Takes every field that `other` sets.
    public mutating func override(with other: Style) {
        if let value = other.visible { visible = value }
        if let value = other.zoomFrom { zoomFrom = value }
        if let value = other.zoomTo { zoomTo = value }
        if let value = other.icon { icon = value }
        if let value = other.iconVisible { iconVisible = value }
        if let value = other.iconSize { iconSize = value }
        if let value = other.label { label = value }
        if let value = other.labelVisible { labelVisible = value }
        if let value = other.polygonVisible { polygonVisible = value }
        if let value = other.polygonFillColor { polygonFillColor = value }
        if let value = other.polygonFillOpacity { polygonFillOpacity = value }
        if let value = other.polygonStrokeColor { polygonStrokeColor = value }
        if let value = other.polygonStrokeWidth { polygonStrokeWidth = value }
        if let value = other.polygonStrokeOpacity { polygonStrokeOpacity = value }
        if let value = other.badge { badge = (badge ?? Badge()).overridden(by: value) }
        if let value = other.displayRank { displayRank = value }
        if let value = other.layer { layer = value }
    }

    /// Whether the location shows at zoom level `zoom`: `visible`, and `zoomFrom <= zoom <= zoomTo`
    /// (a missing bound does not limit).
    public func isVisible(atZoom zoom: Double) -> Bool {
        guard visible ?? true else { return false }
        if let zoomFrom, zoom < zoomFrom { return false }
        if let zoomTo, zoom > zoomTo { return false }
        return true
    }

    /// The fields that differ between two styles, in field order.
    public func changedFields(from old: Style) -> [StyleField] {
        Array(changedFieldSet(from: old))
    }

    /// The fields that differ between two styles, as a set of bits.
    public func changedFieldSet(from old: Style) -> StyleFieldSet {
        var set = StyleFieldSet()
        func check(_ field: StyleField, _ equal: Bool) { if !equal { set.insert(field) } }
        check(.visible, visible == old.visible)
        check(.zoomFrom, zoomFrom == old.zoomFrom)
        check(.zoomTo, zoomTo == old.zoomTo)
        check(.icon, icon == old.icon)
        check(.iconVisible, iconVisible == old.iconVisible)
        check(.iconSize, iconSize == old.iconSize)
        check(.label, label == old.label)
        check(.labelVisible, labelVisible == old.labelVisible)
        check(.polygonVisible, polygonVisible == old.polygonVisible)
        check(.polygonFillColor, polygonFillColor == old.polygonFillColor)
        check(.polygonFillOpacity, polygonFillOpacity == old.polygonFillOpacity)
        check(.polygonStrokeColor, polygonStrokeColor == old.polygonStrokeColor)
        check(.polygonStrokeWidth, polygonStrokeWidth == old.polygonStrokeWidth)
        check(.polygonStrokeOpacity, polygonStrokeOpacity == old.polygonStrokeOpacity)
        check(.badge, badge == old.badge)
        check(.displayRank, displayRank == old.displayRank)
        check(.layer, layer == old.layer)
        return set
    }

    /// Whether no field is set.
    public var isEmpty: Bool { self == Style() }
}

/// A badge on the location's icon.
public struct Badge: Hashable, Sendable {
    /// Rendered text in a derived style; a template in a configured one.
    public var text: String?
    public var textColor: Color?
    public var backgroundColor: Color?

    public init(text: String? = nil, textColor: Color? = nil, backgroundColor: Color? = nil) {
        self.text = text
        self.textColor = textColor
        self.backgroundColor = backgroundColor
    }

    public func overridden(by other: Badge) -> Badge {
        Badge(
            text: other.text ?? text, textColor: other.textColor ?? textColor,
            backgroundColor: other.backgroundColor ?? backgroundColor)
    }
}

/// The fields of a style, by their names in the config and the JSON output.
public enum StyleField: String, CaseIterable, Sendable {
    case visible, zoomFrom, zoomTo, icon, iconVisible, iconSize, label, labelVisible, polygonVisible
    case polygonFillColor, polygonFillOpacity, polygonStrokeColor, polygonStrokeWidth, polygonStrokeOpacity
    case badge, displayRank, layer

    /// The field's position in field order (its bit in a ``StyleFieldSet``).
    public var ordinal: Int {
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

    var bit: UInt32 { 1 << UInt32(ordinal) }
}

/// A set of style fields, one bit each, in field order: what changed between two styles,
/// kept without allocating.
public struct StyleFieldSet: Hashable, Sendable, Sequence {
    public private(set) var bits: UInt32 = 0

    public init() {}

    public init(bits: UInt32) {
        self.bits = bits
    }

    public var isEmpty: Bool { bits == 0 }

    public mutating func insert(_ field: StyleField) { bits |= field.bit }

    public func contains(_ field: StyleField) -> Bool { bits & field.bit != 0 }

    public func makeIterator() -> some IteratorProtocol<StyleField> {
        StyleField.allCases.lazy.filter { contains($0) }.makeIterator()
    }
}

extension Style {
    /// The style as a JSON object with the set fields only, in field order.
    public var json: String {
        var object = JSONObjectWriter()
        if let visible { object.add("visible", visible) }
        if let zoomFrom { object.add("zoomFrom", zoomFrom) }
        if let zoomTo { object.add("zoomTo", zoomTo) }
        if let icon { object.add("icon", icon) }
        if let iconVisible { object.add("iconVisible", iconVisible) }
        if let iconSize { object.add("iconSize", iconSize) }
        if let label { object.add("label", label) }
        if let labelVisible { object.add("labelVisible", labelVisible) }
        if let polygonVisible { object.add("polygonVisible", polygonVisible) }
        if let polygonFillColor { object.add("polygonFillColor", polygonFillColor.description) }
        if let polygonFillOpacity { object.add("polygonFillOpacity", polygonFillOpacity) }
        if let polygonStrokeColor { object.add("polygonStrokeColor", polygonStrokeColor.description) }
        if let polygonStrokeWidth { object.add("polygonStrokeWidth", polygonStrokeWidth) }
        if let polygonStrokeOpacity { object.add("polygonStrokeOpacity", polygonStrokeOpacity) }
        if let badge {
            var badgeObject = JSONObjectWriter()
            if let text = badge.text { badgeObject.add("text", text) }
            if let color = badge.textColor { badgeObject.add("textColor", color.description) }
            if let color = badge.backgroundColor { badgeObject.add("backgroundColor", color.description) }
            object.add("badge", json: badgeObject.json)
        }
        if let displayRank { object.add("displayRank", displayRank) }
        if let layer { object.add("layer", layer) }
        return object.json
    }
}
