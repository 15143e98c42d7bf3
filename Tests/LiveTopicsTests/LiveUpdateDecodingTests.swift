import LiveTopics
import Testing

@Suite("Live update payloads")
struct LiveUpdateDecodingTests {
    static let topic = try! LiveTopic(parsing: "ds1/hq/B/F3/R7/room-7/occupancy")
    static let received = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    func decode(_ payload: String, topic: LiveTopic = Self.topic) throws -> LiveUpdate {
        try LiveUpdate(topic: topic, payload: payload, receivedAt: Self.received)
    }

    @Test("a key is checked even where its value is skipped: bad escapes and invalid UTF-8 in unknown fields are refused")
    func unknownKeysChecked() {
        for payload in [#"{"x\u00": 1, "properties": {}}"#.utf8.map { $0 }, #"{"\q": 1, "properties": {}}"#.utf8.map { $0 },
                        [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x2C] + Array(#""properties": {}}"#.utf8)] {
            #expect(throws: LiveUpdateError.self) { try LivePayload(payload) }
        }
        #expect(throws: Never.self) { try LivePayload(Array(#"{"\u00e9t\u00e9": 1, "properties": {}}"#.utf8)) }
    }

    @Test("the documented example decodes")
    func documentedExample() throws {
        let update = try decode(
            #"{"id": "loc-123", "timestamp": "2026-11-21T10:15:03.120Z", "originSourceId": "booking", "properties": {"nrOfPeople": "3", "capacity": "8"}}"#
        )
        #expect(update.id == "loc-123")
        #expect(update.timestamp.description == "2026-11-21T10:15:03.120Z")
        #expect(update.originSourceId == "booking")
        #expect(update.properties == ["nrOfPeople": "3", "capacity": "8"])
        #expect(update.occupancy == Occupancy(nrOfPeople: 3, capacity: 8))
        #expect(!update.isRemoval)
    }

    @Test("without keeping the source, id and originSourceId are checked but left out")
    func sourceLeftOut() throws {
        func payload(_ json: String, keeping: Bool) throws(LiveUpdateError) -> LivePayload {
            try LivePayload(Array(json.utf8), keepingSource: keeping)
        }
        let json = #"{"id": "loc-123", "originSourceId": "b\u00f6oking", "properties": {"nrOfPeople": "3"}}"#
        let kept = try payload(json, keeping: true)
        let lean = try payload(json, keeping: false)
        #expect(kept.id == "loc-123" && kept.originSourceId == "böoking")
        #expect(lean.id == nil && lean.originSourceId == nil)
        #expect(lean.properties == kept.properties && lean.timestamp == kept.timestamp)
        // Whatever the full decoding refuses in those fields, the lean one refuses too.
        for bad in [
            #"{"id": 7, "properties": {}}"#, #"{"originSourceId": {}, "properties": {}}"#, #"{"id": "a\qb", "properties": {}}"#,
            "{\"id\": \"a\u{01}b\", \"properties\": {}}",
        ] {
            #expect(throws: LiveUpdateError.self, "\(bad)") { try payload(bad, keeping: true) }
            #expect(throws: LiveUpdateError.self, "\(bad)") { try payload(bad, keeping: false) }
        }
        var invalidUTF8 = Array(#"{"id": "ab", "properties": {}}"#.utf8)
        invalidUTF8[8] = 0xFF
        #expect(throws: LiveUpdateError.self) { try LivePayload(invalidUTF8, keepingSource: true) }
        #expect(throws: LiveUpdateError.self) { try LivePayload(invalidUTF8, keepingSource: false) }
    }

    @Test("only properties is required; id and timestamp default")
    func defaults() throws {
        let update = try decode(#"{"properties": {}}"#)
        #expect(update.id == "room-7")
        #expect(update.timestamp == Self.received)
        #expect(update.originSourceId == nil)
        #expect(update.properties.isEmpty)
    }

    @Test(
        "numbers and booleans are normalised to text; null properties are left out",
        arguments: [
            (#"{"properties": {"nrOfPeople": 3}}"#, "nrOfPeople", "3"),
            (#"{"properties": {"temperature": 21.5}}"#, "temperature", "21.5"),
            (#"{"properties": {"t": -0.5e2}}"#, "t", "-0.5e2"),
            (#"{"properties": {"available": true}}"#, "available", "true"),
            (#"{"properties": {"available": false}}"#, "available", "false"),
            (#"{"properties": {"name": "Caf\u00e9 \"7\"\n"}}"#, "name", "Café \"7\"\n"),
            (#"{"properties": {"emoji": "\ud83d\ude00"}}"#, "emoji", "😀"),
            (#"{"properties": {"x": null, "y": "1"}}"#, "y", "1"),
        ])
    func normalisation(payload: String, name: String, value: String) throws {
        let update = try decode(payload)
        #expect(update.properties[name] == value)
        #expect(update.properties["x"] == nil)
    }

    @Test(
        "strings are read eight bytes at a time: a quote, escape or control character anywhere in a word is found",
        arguments: 0..<20)
    func wordAtATimeStrings(offset: Int) throws {
        let padding = String(repeating: "a", count: offset)
        // A quote ending the string at every offset within a word.
        #expect(try decode(#"{"properties": {"name": "\#(padding)"}}"#).properties["name"] == padding)
        // An escape at every offset.
        #expect(try decode(#"{"properties": {"name": "\#(padding)\"x"}}"#).properties["name"] == padding + "\"x")
        // A raw control character at every offset is refused.
        #expect(throws: LiveUpdateError.self) { try decode("{\"properties\": {\"name\": \"\(padding)\u{1}abcdefghij\"}}") }
        // Bytes above 0x7F (UTF-8) do not stop the scan early or confuse it.
        #expect(try decode(#"{"properties": {"name": "\#(padding)café crème brûlée"}}"#).properties["name"] == padding + "café crème brûlée")
    }

    @Test(
        "a byte above 0x7F is seen wherever it is in a word: invalid UTF-8 is refused in a name, a value, a key or an id, valid UTF-8 kept",
        arguments: 0..<20)
    func nonASCIIAnywhere(offset: Int) throws {
        let padding = Array(repeating: UInt8(ascii: "a"), count: offset)
        func payload(_ before: String, _ text: [UInt8], _ after: String) -> [UInt8] { Array(before.utf8) + text + Array(after.utf8) }
        let invalid = padding + [0xFF] + Array("bc".utf8)
        let valid = padding + Array("é".utf8)
        for keepingSource in [true, false] {
            for (before, after) in [
                (#"{"properties": {"name": ""#, #""}}"#), (#"{"properties": {""#, #"": "v"}}"#), (#"{""#, #"": 1, "properties": {}}"#),
                (#"{"id": ""#, #"", "properties": {}}"#),
            ] {
                #expect(throws: LiveUpdateError.self) { try LivePayload(payload(before, invalid, after), keepingSource: keepingSource) }
                #expect(throws: Never.self) { try LivePayload(payload(before, valid, after), keepingSource: keepingSource) }
            }
        }
        let text = String(decoding: valid, as: UTF8.self)
        #expect(try LivePayload(payload(#"{"properties": {""#, valid, #"": "v"}}"#)).properties[text] == "v")
        #expect(try LivePayload(payload(#"{"properties": {"name": ""#, valid, #""}}"#)).properties["name"] == text)
    }

    @Test("unknown fields of any shape are ignored")
    func unknownFields() throws {
        let update = try decode(
            #"{"extra": {"deep": [1, 2, {"x": null}]}, "v": 2, "properties": {"count": "4"}, "tail": [true, false]}"#)
        #expect(update.properties == ["count": "4"])
    }

    @Test(
        "timestamps: ISO-8601 with a zone, or epoch milliseconds",
        arguments: [
            (#""2026-11-21T10:15:03.120Z""#, "2026-11-21T10:15:03.120Z"),
            (#""2026-11-21T10:15:03Z""#, "2026-11-21T10:15:03.000Z"),
            (#""2026-11-21T11:15:03.1+01:00""#, "2026-11-21T10:15:03.100Z"),
            (#""2026-11-21T05:15:03.123456-0500""#, "2026-11-21T10:15:03.123Z"),
            ("1763720103120", "2025-11-21T10:15:03.120Z"),
            (#""1763720103120""#, "2025-11-21T10:15:03.120Z"),
            (#""2024-02-29T00:00:00Z""#, "2024-02-29T00:00:00.000Z"),
            (#""1969-12-31T23:59:59.999Z""#, "1969-12-31T23:59:59.999Z"),
            ("0", "1970-01-01T00:00:00.000Z"),
            ("100000000000000", "5138-11-16T09:46:40.000Z"),
        ])
    func timestamps(json: String, expected: String) throws {
        let update = try decode(#"{"timestamp": \#(json), "properties": {}}"#)
        #expect(update.timestamp.description == expected)
    }

    @Test(
        "epoch milliseconds have at most 15 digits, and nothing else",
        arguments: ["1000000000000000", #""1000000000000000""#, #""99999999999999999999""#, #""12a""#, #""1 ""#, "1.5", "-1"])
    func badEpochTimestamps(json: String) {
        #expect(throws: LiveUpdateError.self) { try decode(#"{"timestamp": \#(json), "properties": {}}"#) }
    }

    @Test("an empty payload is a removal")
    func emptyPayloadRemoves() throws {
        let update = try LiveUpdate(topic: Self.topic, payload: [UInt8](), receivedAt: Self.received)
        #expect(update.isRemoval)
        #expect(update.properties.isEmpty)
        #expect(update.payload == "")
    }

    @Test(
        "bad payloads say why",
        arguments: [
            ("not json", "payload is not JSON: unexpected 'o' at byte 1"),
            ("{", "payload is not JSON: it ends too early"),
            (#"{"properties": {}} x"#, "payload is not JSON: unexpected 'x' at byte 19"),
            (#"{"properties": {},}"#, "payload is not JSON: unexpected '}' at byte 18"),
            (#"{"properties": {"a": "\q"}}"#, "payload is not JSON: bad escape sequence at byte 22"),
            (#"{"properties": {"a": 01}}"#, "payload is not JSON: unexpected '1' at byte 22"),
            ("[1, 2]", "payload must be a JSON object, found an array"),
            ("\"text\"", "payload must be a JSON object, found a string"),
            (#"{"id": "x"}"#, "payload has no \"properties\" object (it is the one required field)"),
            (#"{"properties": "nrOfPeople=3"}"#, "\"properties\" must be an object of strings, found a string"),
            (#"{"properties": {"a": {"b": 1}}}"#, "property \"a\" must be a string, number or boolean, found an object"),
            (#"{"properties": {"a": [1]}}"#, "property \"a\" must be a string, number or boolean, found an array"),
            (#"{"id": 7, "properties": {}}"#, "\"id\" must be a string, found a number"),
            (
                #"{"timestamp": "yesterday", "properties": {}}"#,
                "\"timestamp\" \"yesterday\" is neither ISO-8601 with a time zone (2026-11-21T10:15:03.120Z) nor epoch milliseconds"
            ),
            (
                #"{"timestamp": "2026-11-21T10:15:03", "properties": {}}"#,
                "\"timestamp\" \"2026-11-21T10:15:03\" is neither ISO-8601 with a time zone (2026-11-21T10:15:03.120Z) nor epoch milliseconds"
            ),
            (
                #"{"timestamp": "2026-02-30T10:15:03Z", "properties": {}}"#,
                "\"timestamp\" \"2026-02-30T10:15:03Z\" is neither ISO-8601 with a time zone (2026-11-21T10:15:03.120Z) nor epoch milliseconds"
            ),
        ])
    func badPayloads(payload: String, message: String) {
        #expect {
            try decode(payload)
        } throws: { error in
            (error as? LiveUpdateError)?.description == message
        }
    }

    @Test("invalid UTF-8 and control characters are refused")
    func invalidText() {
        let invalid: [UInt8] = Array(#"{"properties": {"a": ""#.utf8) + [0xFF] + Array(#""}}"#.utf8)
        #expect(throws: LiveUpdateError.notJSON(reason: "invalid UTF-8 in a string starting at byte 21")) {
            try LiveUpdate(topic: Self.topic, payload: invalid, receivedAt: Self.received)
        }
        #expect(throws: LiveUpdateError.notJSON(reason: "unescaped control character at byte 22")) {
            try decode("{\"properties\": {\"a\": \"\n\"}}")
        }
    }

    @Test("oversize payloads are refused before parsing")
    func oversize() {
        let payload = [UInt8](repeating: UInt8(ascii: " "), count: 70_000)
        #expect(throws: LiveUpdateError.payloadTooLarge(bytes: 70_000, limit: 65_536)) {
            try LiveUpdate(topic: Self.topic, payload: payload, receivedAt: Self.received)
        }
    }

    @Test("deep nesting in unknown fields is refused, not a stack overflow")
    func deepNesting() {
        let payload = #"{"x": "# + String(repeating: "[", count: 200) + String(repeating: "]", count: 200) + "}"
        #expect(throws: LiveUpdateError.self) { try decode(payload) }
    }

    @Test("an update's payload decodes back to the same update")
    func roundTrip() throws {
        var update = LiveUpdate(
            topic: Self.topic, id: "x\"y", timestamp: LiveTimestamp(millisecondsSince1970: 1_763_720_103_120),
            originSourceId: "sensor", properties: ["nrOfPeople": "3", "note": "a\\b\n"])
        let decoded = try decode(update.payload)
        #expect(decoded == update)
        update.isRemoval = true
        #expect(update.payload.isEmpty)
    }

    @Test("typed views read the built-in domains")
    func typedViews() throws {
        func update(_ domain: String, _ properties: LiveProperties) throws -> LiveUpdate {
            LiveUpdate(
                topic: try LiveTopic(parsing: "d/v/b/f/r/l/\(domain)"), timestamp: Self.received, properties: properties)
        }
        #expect(try update("occupancy", ["nrOfPeople": "2.0", "capacity": "x"]).occupancy == Occupancy(nrOfPeople: 2, capacity: nil))
        #expect(try update("availability", ["available": "false"]).availability == Availability(available: false))
        #expect(try update("availability", ["available": "TRUE"]).availability == Availability(available: true))
        #expect(
            try update("position", ["latitude": "55.6", "longitude": "12.5", "floorIndex": "3"]).position
                == Position(latitude: 55.6, longitude: 12.5, floorIndex: 3))
        #expect(try update("temperature", ["temperature": "21.5"]).temperature == Temperature(celsius: 21.5))
        #expect(try update("co2", ["co2Level": "812"]).co2 == CO2(ppm: 812))
        #expect(try update("humidity", ["relativeHumidity": "40"]).humidity == Humidity(percent: 40))
        #expect(try update("count", ["count": "17"]).count == Count(count: 17))
        #expect(try update("count", ["count": "17"]).occupancy == nil)
        #expect(try update("parking", ["free": "3"]).knownDomain == nil)
    }
}
