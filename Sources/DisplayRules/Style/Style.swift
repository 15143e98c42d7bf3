import LiveTopics

/// How a location is drawn (MapsIndoors-style display rule fields, listed in ``StyleField``).
/// Every field is optional: an unset field inherits from the layer below (main → type →
/// location → live rules).
///
/// The values are kept in fixed slots that ``StyleLayout`` assigns from the field table, so
/// that no field is written out here: a style is a bit per set field, the flags' values, 16
/// eight-byte words (numbers, whole numbers, colors) and 5 texts, and overriding, the diff
/// and equality touch only the slots of set fields. A slot of an unset field is always 0 or
/// `nil`, so two equal styles are equal slot for slot.
public struct Style: Hashable, Sendable {
    /// The set fields: bit `n` is the field with stored id `n` (as in ``StyleFieldSet``).
    private var present: UInt64 = 0
    /// The values of the set flag fields, by stored id; 0 for every other bit.
    private var flags: UInt64 = 0
    /// Numbers (their bits), whole numbers, colors and badges' colors, at their fields' slots.
    private var words = Words()
    /// Texts, names, templates and badges' texts, at their fields' slots.
    private var texts = Texts()

    /// A style with no field set.
    public init() {}

    /// A style with these fields set (a value of another kind than its field's is left out).
    public init(_ values: KeyValuePairs<StyleField, StyleValue>) {
        for (field, value) in values { self[field] = value }
    }

    /// This style with every field that `other` sets taken from `other` (badge fields one by one).
    public func overridden(by other: Style) -> Style {
        var result = self
        result.override(with: other)
        return result
    }

    /// Takes every field that `other` sets (a badge's fields one by one).
    public mutating func override(with other: borrowing Style) {
        let taken = other.present
        guard taken != 0 else { return }
        flags = flags & ~taken | other.flags
        var slotted = taken & StyleLayout.slotted
        while slotted != 0 {
            let id = slotted.trailingZeroBitCount
            slotted &= slotted &- 1
            let slot = StyleLayout.slots[id]
            if slot.storage == .badge, present & 1 << UInt64(id) != 0 {
                let theirs = other.words[slot.word]
                var parts: UInt64 = 0
                if theirs & BadgeColors.textColorSet != 0 { parts |= BadgeColors.textColor }
                if theirs & BadgeColors.backgroundColorSet != 0 { parts |= BadgeColors.backgroundColor }
                words[slot.word] = words[slot.word] & ~parts | theirs & parts
                if let text = other.texts[slot.text] { texts[slot.text] = text }
                continue
            }
            if slot.word >= 0 { words[slot.word] = other.words[slot.word] }
            if slot.text >= 0 { texts[slot.text] = other.texts[slot.text] }
        }
        present |= taken
    }

    /// One field's value, `nil` when it is not set. Setting a value of another kind than
    /// the field's (see ``StyleField/definition``) clears the field.
    public subscript(field: StyleField) -> StyleValue? {
        get {
            let id = field.storedID
            guard present & 1 << UInt64(id) != 0 else { return nil }
            let slot = StyleLayout.slots[id]
            switch slot.storage {
            case .flag: return .flag(flags & 1 << UInt64(id) != 0)
            case .number: return .number(Double(bitPattern: words[slot.word]))
            case .integer: return .integer(Int(truncatingIfNeeded: Int64(bitPattern: words[slot.word])))
            case .color: return .color(Color(rgb: UInt32(truncatingIfNeeded: words[slot.word])))
            case .text: return texts[slot.text].map(StyleValue.text)
            case .badge: return .badge(BadgeColors.badge(text: texts[slot.text], colors: words[slot.word]))
            }
        }
        set {
            let id = field.storedID
            let bit: UInt64 = 1 << UInt64(id)
            let slot = StyleLayout.slots[id]
            present &= ~bit
            flags &= ~bit
            if slot.word >= 0 { words[slot.word] = 0 }
            if slot.text >= 0 { texts[slot.text] = nil }
            switch (slot.storage, newValue) {
            case (_, nil): return
            case (.flag, .flag(let value)): if value { flags |= bit }
            // -0 is kept as 0: equal numbers are equal bits.
            case (.number, .number(let value)): words[slot.word] = (value == 0 ? 0 : value).bitPattern
            case (.integer, .integer(let value)): words[slot.word] = UInt64(bitPattern: Int64(value))
            case (.color, .color(let value)): words[slot.word] = UInt64(value.rgb)
            case (.text, .text(let value)): texts[slot.text] = value
            case (.badge, .badge(let value)):
                words[slot.word] = BadgeColors.colors(of: value)
                texts[slot.text] = value.text
            default: return
            }
            present |= bit
        }
    }

    /// A flag field's value (`nil` when it is not set, or the field holds something else).
    public subscript(flag field: StyleField) -> Bool? {
        get { self[field]?.flag }
        set { self[field] = newValue.map(StyleValue.flag) }
    }

    /// A number field's value.
    public subscript(number field: StyleField) -> Double? {
        get { self[field]?.number }
        set { self[field] = newValue.map(StyleValue.number) }
    }

    /// A whole-number field's value.
    public subscript(integer field: StyleField) -> Int? {
        get { self[field]?.integer }
        set { self[field] = newValue.map(StyleValue.integer) }
    }

    /// A text, name or template field's value.
    public subscript(text field: StyleField) -> String? {
        get { self[field]?.text }
        set { self[field] = newValue.map(StyleValue.text) }
    }

    /// A color field's value.
    public subscript(color field: StyleField) -> Color? {
        get { self[field]?.color }
        set { self[field] = newValue.map(StyleValue.color) }
    }

    /// A badge field's value.
    public subscript(badge field: StyleField) -> Badge? {
        get { self[field]?.badge }
        set { self[field] = newValue.map(StyleValue.badge) }
    }

    /// Whether the location shows at zoom level `zoom`: `visible`, and `zoomFrom <= zoom <= zoomTo`
    /// (a missing bound does not limit).
    public func isVisible(atZoom zoom: Double) -> Bool {
        guard self[flag: .visible] ?? true else { return false }
        if let zoomFrom = self[number: .zoomFrom], zoom < zoomFrom { return false }
        if let zoomTo = self[number: .zoomTo], zoom > zoomTo { return false }
        return true
    }

    /// The fields that differ between two styles, in field order.
    public func changedFields(from old: Style) -> [StyleField] {
        Array(changedFieldSet(from: old))
    }

    /// The fields that differ between two styles, as a set of bits.
    public func changedFieldSet(from old: Style) -> StyleFieldSet {
        let both = present & old.present
        var changed = present ^ old.present | (flags ^ old.flags) & both
        var slotted = both & StyleLayout.slotted
        while slotted != 0 {
            let id = slotted.trailingZeroBitCount
            slotted &= slotted &- 1
            let slot = StyleLayout.slots[id]
            if slot.word >= 0 && words[slot.word] != old.words[slot.word]
                || slot.text >= 0 && texts[slot.text] != old.texts[slot.text]
            {
                changed |= 1 << UInt64(id)
            }
        }
        return StyleFieldSet(bits: changed)
    }

    /// The fields that are set.
    public var setFields: StyleFieldSet { StyleFieldSet(bits: present) }

    /// Whether no field is set.
    public var isEmpty: Bool { present == 0 }
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

/// A badge's two colors in one of a style's words: each its 24 bits and a bit saying it is set.
private enum BadgeColors {
    static let textColorSet: UInt64 = 1 << 24
    static let backgroundColorSet: UInt64 = 1 << 56
    /// The text color's bits, with the bit saying it is set.
    static let textColor: UInt64 = 0x1FF_FFFF
    static let backgroundColor: UInt64 = 0x1FF_FFFF << 32

    static func colors(of badge: Badge) -> UInt64 {
        var word: UInt64 = 0
        if let color = badge.textColor { word |= UInt64(color.rgb) | textColorSet }
        if let color = badge.backgroundColor { word |= (UInt64(color.rgb) << 32) | backgroundColorSet }
        return word
    }

    static func badge(text: String?, colors word: UInt64) -> Badge {
        Badge(
            text: text,
            textColor: word & textColorSet != 0 ? Color(rgb: UInt32(truncatingIfNeeded: word)) : nil,
            backgroundColor: word & backgroundColorSet != 0 ? Color(rgb: UInt32(truncatingIfNeeded: word >> 32)) : nil)
    }
}

extension Style {
    /// The style as a JSON object with the set fields only, in field order.
    public var json: String {
        var stream = JSONStream(capacity: 128)
        write(to: &stream)
        return stream.text
    }

    /// Writes the style as a JSON object with the set fields only, in field order: each
    /// under its name, written as its kind is.
    public func write(to stream: inout JSONStream) {
        stream.beginObject()
        if present != 0 {
            for entry in StyleLayout.inFieldOrder where present & entry.bit != 0 {
                let key = entry.field.rawValue
                let slot = entry.slot
                switch slot.storage {
                case .flag: stream.add(text: key, flags & entry.bit != 0)
                case .number: stream.add(text: key, Double(bitPattern: words[slot.word]))
                case .integer: stream.add(text: key, Int(truncatingIfNeeded: Int64(bitPattern: words[slot.word])))
                case .color:
                    stream.key(text: key)
                    Color(rgb: UInt32(truncatingIfNeeded: words[slot.word])).write(to: &stream)
                case .text: stream.add(text: key, texts[slot.text] ?? "")
                case .badge:
                    let badge = BadgeColors.badge(text: texts[slot.text], colors: words[slot.word])
                    stream.key(text: key)
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
        }
        stream.endObject()
    }
}

extension Style {
    /// 16 eight-byte slots: the values of the fields that take a word.
    struct Words: Hashable, Sendable {
        static let count = 16
        private var word0: UInt64 = 0, word1: UInt64 = 0, word2: UInt64 = 0, word3: UInt64 = 0
        private var word4: UInt64 = 0, word5: UInt64 = 0, word6: UInt64 = 0, word7: UInt64 = 0
        private var word8: UInt64 = 0, word9: UInt64 = 0, word10: UInt64 = 0, word11: UInt64 = 0
        private var word12: UInt64 = 0, word13: UInt64 = 0, word14: UInt64 = 0, word15: UInt64 = 0

        subscript(index: Int) -> UInt64 {
            get {
                switch index {
                case 0: word0
                case 1: word1
                case 2: word2
                case 3: word3
                case 4: word4
                case 5: word5
                case 6: word6
                case 7: word7
                case 8: word8
                case 9: word9
                case 10: word10
                case 11: word11
                case 12: word12
                case 13: word13
                case 14: word14
                case 15: word15
                default: preconditionFailure("no word slot \(index)")
                }
            }
            set {
                switch index {
                case 0: word0 = newValue
                case 1: word1 = newValue
                case 2: word2 = newValue
                case 3: word3 = newValue
                case 4: word4 = newValue
                case 5: word5 = newValue
                case 6: word6 = newValue
                case 7: word7 = newValue
                case 8: word8 = newValue
                case 9: word9 = newValue
                case 10: word10 = newValue
                case 11: word11 = newValue
                case 12: word12 = newValue
                case 13: word13 = newValue
                case 14: word14 = newValue
                case 15: word15 = newValue
                default: preconditionFailure("no word slot \(index)")
                }
            }
        }
    }

    /// 5 text slots: the values of the fields that take a text.
    struct Texts: Hashable, Sendable {
        static let count = 5
        private var slot0, slot1, slot2, slot3, slot4: String?

        subscript(index: Int) -> String? {
            get {
                switch index {
                case 0: slot0
                case 1: slot1
                case 2: slot2
                case 3: slot3
                case 4: slot4
                default: preconditionFailure("no text slot \(index)")
                }
            }
            set {
                switch index {
                case 0: slot0 = newValue
                case 1: slot1 = newValue
                case 2: slot2 = newValue
                case 3: slot3 = newValue
                case 4: slot4 = newValue
                default: preconditionFailure("no text slot \(index)")
                }
            }
        }
    }
}
