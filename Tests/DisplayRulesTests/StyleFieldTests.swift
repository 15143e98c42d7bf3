import LiveDataTestSupport
import Testing

@testable import DisplayRules

@Suite("Style fields")
struct StyleFieldTests {
    /// The stored ids as they are in state files already written. An entry here may be
    /// added, never changed or removed.
    static let storedIDs: [StyleField: Int] = [
        .visible: 0, .zoomFrom: 1, .zoomTo: 2, .icon: 3, .iconVisible: 4, .iconSize: 5, .label: 6, .labelVisible: 7,
        .polygonVisible: 8, .polygonFillColor: 9, .polygonFillOpacity: 10, .polygonStrokeColor: 11,
        .polygonStrokeWidth: 12, .polygonStrokeOpacity: 13, .badge: 14, .displayRank: 15, .layer: 16,
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
        var base = Style([
            .visible: .flag(true), .label: .text("a"), .badge: .badge(Badge(text: "x", textColor: Color(rgb: 1))),
        ])
        base.override(
            with: Style([
                .label: .text("b"), .polygonFillColor: .color(Color(rgb: 2)),
                .badge: .badge(Badge(backgroundColor: Color(rgb: 3))),
            ]))
        #expect(
            base
                == Style([
                    .visible: .flag(true), .label: .text("b"), .polygonFillColor: .color(Color(rgb: 2)),
                    .badge: .badge(Badge(text: "x", textColor: Color(rgb: 1), backgroundColor: Color(rgb: 3))),
                ]))
    }

    @Test("JSON lists the set fields in field order")
    func jsonOrder() {
        let style = Style([
            .zoomTo: .number(20), .icon: .text("i.svg"), .polygonFillColor: .color(Color(rgb: 0xD64545)),
            .displayRank: .integer(2), .layer: .text("l"),
        ])
        #expect(
            style.json
                == ##"{"zoomTo": 20, "icon": "i.svg", "polygonFillColor": "#D64545", "displayRank": 2, "layer": "l"}"##)
    }

    @Test("the table fits the style's fixed slots")
    func fitsTheSlots() {
        let used = StyleLayout.used
        #expect(used.words <= Style.Words.count && used.texts <= Style.Texts.count, "\(used)")
    }

    @Test("a value of another kind than the field's is not kept; a typed read of another kind is nil")
    func kinds() {
        var style = Style([.visible: .flag(true)])
        style[.visible] = .text("yes")
        #expect(style.isEmpty)
        style[text: .label] = "a"
        #expect(style[flag: .label] == nil && style[number: .label] == nil && style[text: .label] == "a")
        style[number: .zoomFrom] = -0.0
        #expect(style == Style([.label: .text("a"), .zoomFrom: .number(0)]), "-0 and 0 are one number")
    }

    /// A random style: each field unset or one of a few values of its kind.
    static func randomStyle(_ random: inout SplitMix64) -> Style {
        var style = Style()
        for field in StyleField.allCases where random.next() % 3 != 0 {
            let pick = Int(random.next() % 3)
            style[field] =
                switch field.definition.kind {
                case .flag: .flag(pick == 0)
                case .number(let range): .number([range.lowerBound, range.upperBound, 0.5][pick])
                case .integer: .integer([0, -1, 7][pick])
                case .text, .name, .template: .text(["a", "b", "{x}"][pick])
                case .color: .color(Color(rgb: [0, 0xFFFFFF, 0x123456][pick]))
                case .badge:
                    .badge(
                        Badge(
                            text: random.next() % 2 == 0 ? nil : ["x", "y", ""][pick],
                            textColor: random.next() % 2 == 0 ? nil : Color(rgb: UInt32(pick)),
                            backgroundColor: random.next() % 2 == 0 ? nil : Color(rgb: UInt32(pick) << 8)))
                }
        }
        return style
    }

    @Test(
        "overriding, the diff, equality and hashing agree with reading the fields one by one",
        arguments: [1, 2, 3] as [UInt64])
    func againstFieldByField(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<2_000 {
            let a = Self.randomStyle(&random)
            let b = Self.randomStyle(&random)
            var expected = a
            for field in StyleField.allCases {
                guard let value = b[field] else { continue }
                if case .badge(let theirs) = value, case .badge(let mine)? = a[field] {
                    expected[field] = .badge(mine.overridden(by: theirs))
                } else {
                    expected[field] = value
                }
            }
            let overridden = a.overridden(by: b)
            #expect(
                StyleField.allCases.allSatisfy { overridden[$0] == expected[$0] },
                "seed \(seed): \(a.json) by \(b.json)")
            #expect(overridden == expected)
            let changed = StyleField.allCases.filter { a[$0] != b[$0] }
            #expect(a.changedFields(from: b) == changed, "seed \(seed): \(a.json) from \(b.json)")
            #expect((a == b) == changed.isEmpty)
            var copy = Style()
            for field in StyleField.allCases { copy[field] = a[field] }
            #expect(copy == a && copy.hashValue == a.hashValue)
            #expect(Array(a.setFields) == StyleField.allCases.filter { a[$0] != nil })
        }
    }
}
