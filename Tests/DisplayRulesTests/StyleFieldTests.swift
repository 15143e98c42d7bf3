import DisplayRules
import Testing

@Suite("Style fields")
struct StyleFieldTests {
    /// The stored ids as they are in state files already written. An entry here may be
    /// added, never changed or removed.
    static let storedIDs: [StyleField: Int] = [
        .visible: 0, .zoomFrom: 1, .zoomTo: 2, .icon: 3, .iconVisible: 4, .iconSize: 5, .label: 6, .labelVisible: 7,
        .polygonVisible: 8, .polygonFillColor: 9, .polygonFillOpacity: 10, .polygonStrokeColor: 11, .polygonStrokeWidth: 12,
        .polygonStrokeOpacity: 13, .badge: 14, .displayRank: 15, .layer: 16,
    ]

    @Test("stored ids are distinct and those of existing fields never change")
    func storedIDs() {
        let ids = StyleField.allCases.map(\.definition.storedID)
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { (0..<64).contains($0) })
        for (field, id) in Self.storedIDs { #expect(field.definition.storedID == id, "\(field)") }
        for field in StyleField.allCases { #expect(StyleField.withStoredID(field.definition.storedID) == field) }
    }

    /// A value of the field's kind.
    static func sample(_ field: StyleField) -> StyleValue {
        switch field.definition.kind {
        case .flag: .flag(false)
        case .number(let range): .number(range.upperBound)
        case .integer: .integer(-7)
        case .text, .name, .template: .text("\(field.rawValue)-text")
        case .color: .color(Color(rgb: 0x12_3456))
        case .badge: .badge(Badge(text: "b", backgroundColor: Color(rgb: 1)))
        }
    }

    @Test("each field is read and written through the table alone", arguments: StyleField.allCases)
    func subscriptRoundTrip(field: StyleField) {
        var style = Style()
        style[field] = Self.sample(field)
        #expect(style[field] == Self.sample(field))
        #expect(Array(style.setFields) == [field])
        #expect(Array(style.changedFieldSet(from: Style())) == [field])
        #expect(style.json.hasPrefix("{\"\(field.rawValue)\": "))
        style[field] = nil
        #expect(style.isEmpty)
    }

    @Test("overriding takes each set field, and a badge field by field")
    func override() {
        var base = Style(visible: true, label: "a", badge: Badge(text: "x", textColor: Color(rgb: 1)))
        base.override(with: Style(label: "b", polygonFillColor: Color(rgb: 2), badge: Badge(backgroundColor: Color(rgb: 3))))
        #expect(base == Style(
            visible: true, label: "b", polygonFillColor: Color(rgb: 2),
            badge: Badge(text: "x", textColor: Color(rgb: 1), backgroundColor: Color(rgb: 3))))
    }

    @Test("JSON lists the set fields in field order")
    func jsonOrder() {
        let style = Style(zoomTo: 20, icon: "i.svg", polygonFillColor: Color(rgb: 0xD64545), displayRank: 2, layer: "l")
        #expect(style.json == ##"{"zoomTo": 20, "icon": "i.svg", "polygonFillColor": "#D64545", "displayRank": 2, "layer": "l"}"##)
    }
}
