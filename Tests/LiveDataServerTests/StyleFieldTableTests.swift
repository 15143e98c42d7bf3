import DisplayRules
import Foundation
import LiveDataConfiguration
import LiveDataTestSupport
import LiveState
import LiveTopics
import Testing

@testable import LiveDataServer

/// The table of style fields (``StyleField``) is the one place a field is written down:
/// every field in it goes, with no code of its own, from a rule's style in the config
/// through the engine into the published payload, and the floor page draws what the table
/// says. A new field of an existing kind is covered here without a line added.
@Suite("Style-field table")
struct StyleFieldTableTests {
    /// A value of the field's kind: as YAML in a rule's style, as the derived style holds
    /// it, and as the payload shows it, at a location with 3 people of a capacity of 8.
    static func sample(_ field: StyleField) -> (yaml: String, value: StyleValue, json: JSONValue) {
        switch field.definition.kind {
        case .flag:
            ("false", .flag(false), .bool(false))
        case .number(let range):
            ("\(range.upperBound)", .number(range.upperBound), .number(range.upperBound))
        case .integer:
            ("-7", .integer(-7), .number(-7))
        case .text, .name:
            ("\"\(field.rawValue) value\"", .text("\(field.rawValue) value"), .string("\(field.rawValue) value"))
        case .template:
            ("\"{nrOfPeople} of {capacity}\"", .text("3 of 8"), .string("3 of 8"))
        case .color:
            ("\"#12AB3f\"", .color(Color(rgb: 0x12AB3F)), .string("#12AB3F"))
        case .badge:
            (
                ##"{text: "{nrOfPeople}!", textColor: "#010203", backgroundColor: "#0a0B0c"}"##,
                .badge(Badge(text: "3!", textColor: Color(rgb: 0x010203), backgroundColor: Color(rgb: 0x0A0B0C))),
                .object(["text": .string("3!"), "textColor": .string("#010203"), "backgroundColor": .string("#0A0B0C")])
            )
        }
    }

    /// The change published when a room reports 3 people, under a rule that sets `style`.
    static func change(style: String) throws -> DerivedChange {
        let yaml = """
            rules:
              - name: occupied
                domain: occupancy
                when: nrOfPeople > 0
                style: \(style)
            """
        let config = try LiveDataConfig.parse(yaml: yaml, file: "test.yaml")
        let core = LiveCore(ruleSet: config.ruleSet, subscriptions: [try TopicCriteria(dataset: "ds1")])
        let outcome = core.process(
            topic: "ds1/hq/B/F1/R1/room-1/occupancy",
            payload: Array(#"{"properties": {"nrOfPeople": "3", "capacity": "8"}}"#.utf8),
            receivedAt: LiveTimestamp(millisecondsSince1970: 1_763_720_000_000))
        guard case .changed(let change) = outcome else { throw PayloadError.noChange("\(outcome)") }
        return change
    }

    enum PayloadError: Error {
        case noChange(String)
    }

    struct Payload: Decodable {
        var style: [String: JSONValue]
        var changed: [String]
        var rules: [String]
    }

    @Test(
        "a field goes from a rule's style in the config to the derived style, the payload and back",
        arguments: StyleField.allCases)
    func roundTrip(field: StyleField) throws {
        let sample = Self.sample(field)
        let change = try Self.change(style: "{\(field.rawValue): \(sample.yaml)}")
        #expect(change.style[field] == sample.value)
        #expect(Array(change.style.setFields) == [field])
        let payload = try JSONDecoder().decode(Payload.self, from: Data(change.json.utf8))
        #expect(payload.style == [field.rawValue: sample.json], "\(change.json)")
        #expect(payload.changed == [field.rawValue])
        #expect(payload.rules == ["occupied"])
    }

    @Test("every field at once: the payload lists them in table order, each as its kind is written")
    func everyField() throws {
        let style = StyleField.allCases.map { "\($0.rawValue): \(Self.sample($0).yaml)" }.joined(separator: ", ")
        let change = try Self.change(style: "{\(style)}")
        for field in StyleField.allCases { #expect(change.style[field] == Self.sample(field).value, "\(field)") }
        let payload = try JSONDecoder().decode(Payload.self, from: Data(change.json.utf8))
        #expect(payload.changed == StyleField.allCases.map(\.rawValue))
        #expect(
            payload.style
                == Dictionary(uniqueKeysWithValues: StyleField.allCases.map { ($0.rawValue, Self.sample($0).json) }))
        // The style's members in field order, as `changed` lists them.
        let keys = change.style.json.matches(of: #/"([A-Za-z]+)": /#).map { String($0.1) }.filter {
            StyleField(rawValue: $0) != nil
        }
        #expect(keys == StyleField.allCases.map(\.rawValue))
    }

    @Test("the floor page carries the table: every field, in field order, with its kind and how it is drawn")
    func floorPageCarriesTheTable() throws {
        let page = String(buffer: FloorPage.render(dataset: "ds1", venue: "hq", building: "B", floor: "F1"))
        let attribute = try #require(page.firstMatch(of: #/data-style-fields="([^"]*)"/#)).1
        var json = String(attribute)
        for (escaped, character) in [("&quot;", "\""), ("&#39;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")] {
            json = json.replacingOccurrences(of: escaped, with: character)
        }
        let fields = try JSONDecoder().decode([FloorStyleField].self, from: Data(json.utf8))
        #expect(fields.map(\.name) == StyleField.allCases.map(\.rawValue))
        for (entry, field) in zip(fields, StyleField.allCases) {
            #expect(entry.kind == field.definition.kind.name)
            let drawing: StyleField.Drawing =
                switch entry.drawing {
                case "shows": .shows(try #require(entry.part.flatMap(StyleField.Part.init)))
                case "content": .content(try #require(entry.part.flatMap(StyleField.Part.init)))
                case "attribute":
                    .attribute(
                        try #require(entry.part.flatMap(StyleField.Part.init)), try #require(entry.attribute),
                        unset: try #require(entry.unset))
                default: .none
                }
            #expect(drawing == field.definition.drawing, "\(field)")
        }
    }

    @Test("the floor page's script names no style field: it draws each from the table")
    func scriptNamesNoField() throws {
        let script = String(decoding: try FloorPageTests.file("floor.js"), as: UTF8.self)
        let parts = Set(StyleField.Part.allCases.map(\.rawValue))
        for field in StyleField.allCases {
            let name = field.rawValue
            // A part's name (label, icon, badge) is the script's word for that part; any
            // other field's name as a property or a string would be the script knowing it.
            let patterns =
                parts.contains(name) ? [#"style\.\#(name)\b"#, #"style\[["']\#(name)"#] : [#"[.'"]\#(name)(?![\w-])"#]
            for pattern in patterns {
                #expect(
                    script.range(of: pattern, options: .regularExpression) == nil, "floor.js names \(name) (\(pattern))"
                )
            }
        }
    }
}
