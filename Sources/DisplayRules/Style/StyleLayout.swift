/// Where ``Style`` keeps each field's value, worked out once from the field table
/// (``StyleField/definition``): a flag is a bit, a number, whole number or color one of the
/// style's words, a text one of its texts, a badge one of each.
enum StyleLayout {
    /// How a field's value is kept.
    enum Storage: UInt8, Sendable {
        case flag, number, integer, color, text, badge

        init(_ kind: StyleField.Kind) {
            switch kind {
            case .flag: self = .flag
            case .number: self = .number
            case .integer: self = .integer
            case .color: self = .color
            case .text, .name, .template: self = .text
            case .badge: self = .badge
            }
        }
    }

    /// A field's slots: its word and its text in a style, -1 where it has none.
    struct Slot: Sendable {
        var storage: Storage
        var word: Int
        var text: Int
    }

    /// By stored id (a stored id no field has is never set, and its slot never read).
    static let slots: [Slot] = layout.slots
    /// The stored-id bits of the fields with a word or a text: every kind but flags.
    static let slotted: UInt64 = layout.slotted
    /// The fields in field order with their stored-id bits and slots, for the JSON writer.
    static let inFieldOrder: [(field: StyleField, bit: UInt64, slot: Slot)] = layout.inFieldOrder
    /// By stored id.
    static let fieldsByStoredID: [StyleField?] = layout.fieldsByStoredID

    /// The words and texts the table takes.
    static var used: (words: Int, texts: Int) { (layout.words, layout.texts) }

    private static let layout = make()

    private static func make() -> (
        slots: [Slot], slotted: UInt64, inFieldOrder: [(field: StyleField, bit: UInt64, slot: Slot)],
        fieldsByStoredID: [StyleField?], words: Int, texts: Int
    ) {
        let ids = StyleField.allCases.map(\.storedID)
        precondition(ids.allSatisfy { (0..<64).contains($0) }, "a style field's stored id is not in 0..<64: \(ids)")
        precondition(Set(ids).count == ids.count, "two style fields have one stored id: \(ids)")
        let count = (ids.max() ?? -1) + 1
        var slots = [Slot](repeating: Slot(storage: .flag, word: -1, text: -1), count: count)
        var fields = [StyleField?](repeating: nil, count: count)
        var slotted: UInt64 = 0
        var words = 0
        var texts = 0
        for field in StyleField.inStoredOrder {
            let id = field.storedID
            let storage = Storage(field.kind)
            var slot = Slot(storage: storage, word: -1, text: -1)
            if [.number, .integer, .color, .badge].contains(storage) {
                slot.word = words
                words += 1
            }
            if [.text, .badge].contains(storage) {
                slot.text = texts
                texts += 1
            }
            if storage != .flag { slotted |= 1 << UInt64(id) }
            slots[id] = slot
            fields[id] = field
        }
        precondition(
            words <= Style.Words.count && texts <= Style.Texts.count,
            "the style fields take \(words) words and \(texts) texts; Style has \(Style.Words.count) and \(Style.Texts.count): add slots to Style.Words or Style.Texts"
        )
        let inFieldOrder = StyleField.allCases.map { field in
            (field: field, bit: field.bit, slot: slots[field.storedID])
        }
        return (slots, slotted, inFieldOrder, fields, words, texts)
    }
}
