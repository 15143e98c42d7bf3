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

    /// Takes every field that `other` sets (a badge's fields one by one).
    public mutating func override(with other: Style) {
        for field in StyleField.allCases {
            guard let value = other[field] else { continue }
            if case .badge(let badge) = value, let mine = self.badge {
                self.badge = mine.overridden(by: badge)
            } else {
                self[field] = value
            }
        }
    }

    /// One field's value, `nil` when it is not set. Setting a value of another kind than
    /// the field's (see ``StyleField/definition``) clears the field.
    public subscript(field: StyleField) -> StyleValue? {
        get {
            switch field {
            case .visible: visible.map(StyleValue.flag)
            case .zoomFrom: zoomFrom.map(StyleValue.number)
            case .zoomTo: zoomTo.map(StyleValue.number)
            case .icon: icon.map(StyleValue.text)
            case .iconVisible: iconVisible.map(StyleValue.flag)
            case .iconSize: iconSize.map(StyleValue.number)
            case .label: label.map(StyleValue.text)
            case .labelVisible: labelVisible.map(StyleValue.flag)
            case .polygonVisible: polygonVisible.map(StyleValue.flag)
            case .polygonFillColor: polygonFillColor.map(StyleValue.color)
            case .polygonFillOpacity: polygonFillOpacity.map(StyleValue.number)
            case .polygonStrokeColor: polygonStrokeColor.map(StyleValue.color)
            case .polygonStrokeWidth: polygonStrokeWidth.map(StyleValue.number)
            case .polygonStrokeOpacity: polygonStrokeOpacity.map(StyleValue.number)
            case .badge: badge.map(StyleValue.badge)
            case .displayRank: displayRank.map(StyleValue.integer)
            case .layer: layer.map(StyleValue.text)
            }
        }
        set {
            switch field {
            case .visible: visible = newValue?.flag
            case .zoomFrom: zoomFrom = newValue?.number
            case .zoomTo: zoomTo = newValue?.number
            case .icon: icon = newValue?.text
            case .iconVisible: iconVisible = newValue?.flag
            case .iconSize: iconSize = newValue?.number
            case .label: label = newValue?.text
            case .labelVisible: labelVisible = newValue?.flag
            case .polygonVisible: polygonVisible = newValue?.flag
            case .polygonFillColor: polygonFillColor = newValue?.color
            case .polygonFillOpacity: polygonFillOpacity = newValue?.number
            case .polygonStrokeColor: polygonStrokeColor = newValue?.color
            case .polygonStrokeWidth: polygonStrokeWidth = newValue?.number
            case .polygonStrokeOpacity: polygonStrokeOpacity = newValue?.number
            case .badge: badge = newValue?.badge
            case .displayRank: displayRank = newValue?.integer
            case .layer: layer = newValue?.text
            }
        }
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
        for field in StyleField.allCases where self[field] != old[field] { set.insert(field) }
        return set
    }

    /// The fields that are set.
    public var setFields: StyleFieldSet {
        var set = StyleFieldSet()
        for field in StyleField.allCases where self[field] != nil { set.insert(field) }
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

extension Style {
    /// The style as a JSON object with the set fields only, in field order.
    public var json: String {
        var stream = JSONStream(capacity: 128)
        write(to: &stream)
        return stream.text
    }

    /// Writes the style as a JSON object with the set fields only, in field order.
    public func write(to stream: inout JSONStream) {
        stream.beginObject()
        for field in StyleField.allCases {
            switch self[field] {
            case nil: break
            case .flag(let value): stream.add(field.rawValue, value)
            case .number(let value): stream.add(field.rawValue, value)
            case .integer(let value): stream.add(field.rawValue, value)
            case .text(let value): stream.add(field.rawValue, value)
            case .color(let value):
                stream.key(field.rawValue)
                value.write(to: &stream)
            case .badge(let badge):
                stream.key(field.rawValue)
                stream.beginObject()
                if let text = badge.text { stream.add("text", text) }
                if let color = badge.textColor {
                    stream.key("textColor")
                    color.write(to: &stream)
                }
                if let color = badge.backgroundColor {
                    stream.key("backgroundColor")
                    color.write(to: &stream)
                }
                stream.endObject()
            }
        }
        stream.endObject()
    }
}
