import Foundation
import LiveDataTestSupport
import Testing

@testable import LiveTopics

/// The byte writer that builds every published document.
@Suite("JSON stream")
struct JSONStreamTests {
    @Test("nested objects and arrays take separators, keys and strings are escaped")
    func nesting() throws {
        var stream = JSONStream()
        stream.beginObject()
        stream.add(text: "a\"b", "line\nnext\ttab\\ \u{01} é 😀")
        stream.key("list")
        stream.beginArray()
        stream.string("x")
        stream.beginObject()
        stream.endObject()
        stream.integer(-42)
        stream.endArray()
        stream.add("n", 0.5)
        stream.add("whole", 16.0)
        stream.add("flag", false)
        stream.key("min")
        stream.integer(Int64.min)
        stream.key("max")
        stream.integer(Int64.max)
        stream.endObject()
        #expect(
            stream.text
                == #"{"a\"b": "line\nnext\ttab\\ \u0001 é 😀", "list": ["x", {}, -42], "n": 0.5, "whole": 16, "flag": false, "min": -9223372036854775808, "max": 9223372036854775807}"#
        )
        // What it writes is JSON, with the values it was given.
        let parsed = try #require(JSONSerialization.jsonObject(with: Data(stream.bytes)) as? [String: Any])
        #expect(parsed["a\"b"] as? String == "line\nnext\ttab\\ \u{01} é 😀")
        #expect(parsed["max"] as? Int64 == Int64.max)
    }

    @Test("timestamps: the same text whether a stream wrote the same second before or not, at any year, before 1970 too")
    func streamTimestamps() {
        let instants: [Int64] = [
            1_763_720_000_000, 1_763_720_000_999, 1_763_720_000_001, 1_763_720_001_000, 1_763_720_000_500, 0, -1, -999, -1_000,
            -1_001, -86_400_000, -62_135_596_800_000, -62_135_596_800_001, 253_402_300_799_999, 253_402_300_800_000,
            253_402_300_800_001, 1_763_720_001_042,
        ]
        // One stream for all (each one's second may be the last one's), and a fresh one each.
        var reused = JSONStream()
        for millis in instants + instants.reversed() {
            let value = LiveTimestamp(millisecondsSince1970: millis)
            reused.reset()
            reused.timestamp(value)
            var fresh = JSONStream()
            fresh.timestamp(value)
            #expect(reused.text == fresh.text, "\(millis)")
            #expect(fresh.text == "\"\(value)\"", "\(millis)")
        }
        var members = JSONStream()
        members.beginObject()
        members.key("a")
        members.timestamp(LiveTimestamp(millisecondsSince1970: 1_763_720_000_000))
        members.key("b")
        members.timestamp(LiveTimestamp(millisecondsSince1970: 1_763_720_000_007))
        members.endObject()
        #expect(members.text == #"{"a": "2025-11-21T10:13:20.000Z", "b": "2025-11-21T10:13:20.007Z"}"#)
    }

    @Test("keys and strings written whole or piece by piece (escapes, long text) take the same separators")
    func plainAndEscaped() throws {
        let long = String(repeating: "x", count: 300)
        var stream = JSONStream()
        stream.beginObject()
        stream.add("plain", "value")
        stream.add(text: "esc\"aped", "tab\there")
        _ = "bytes".utf8.withContiguousStorageIfAvailable { stream.key(bytes: UnsafeRawBufferPointer($0)) }
        _ = "in place".utf8.withContiguousStorageIfAvailable { stream.string(bytes: UnsafeRawBufferPointer($0)) }
        stream.add("long", long)
        stream.add("", "")
        stream.key("list")
        stream.beginArray()
        stream.string("a")
        stream.string("b\\c")
        stream.string("d")
        stream.endArray()
        stream.endObject()
        #expect(
            stream.text
                == #"{"plain": "value", "esc\"aped": "tab\there", "bytes": "in place", "long": "\#(long)", "": "", "list": ["a", "b\\c", "d"]}"#)
        let parsed = try #require(JSONSerialization.jsonObject(with: Data(stream.bytes)) as? [String: Any])
        #expect(parsed["long"] as? String == long)
        #expect(parsed["esc\"aped"] as? String == "tab\there")
    }

    @Test("the word-at-a-time escape test agrees with a byte-by-byte one, at every length and position")
    func escapeTest() {
        func reference(_ bytes: [UInt8]) -> Bool { bytes.contains { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 } }
        var random = SplitMix64.seeded(for: "the escape test's random texts")
        // Plain ASCII, UTF-8 (bytes of 0x80 and more), and each special byte at each place.
        let alphabets: [[UInt8]] = [Array(0x20...0x7E).filter { $0 != 0x22 && $0 != 0x5C }, Array(0x20...0xFF).filter { $0 != 0x22 && $0 != 0x5C }]
        for alphabet in alphabets {
            for length in 0...40 {
                let plain = (0..<length).map { _ in alphabet.randomElement(using: &random)! }
                #expect(plain.withUnsafeBytes { JSONStream.needsEscaping($0) } == false)
                for position in 0..<length {
                    for special: UInt8 in [0x00, 0x01, 0x0A, 0x1F, 0x22, 0x5C] {
                        var bytes = plain
                        bytes[position] = special
                        #expect(bytes.withUnsafeBytes { JSONStream.needsEscaping($0) } == reference(bytes))
                    }
                }
            }
        }
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0...33, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(bytes.withUnsafeBytes { JSONStream.needsEscaping($0) } == reference(bytes), "\(bytes)")
        }
    }

    @Test("an object of a text's parts: the same bytes written in one piece as member by member, escaped or not, at any place")
    func objectOfParts() throws {
        func name(_ position: Int) -> StaticString {
            switch position {
            case 0: "first"
            case 1: "b"
            default: "rest"
            }
        }
        func memberByMember(_ text: String) -> String {
            var stream = JSONStream(capacity: 4)
            stream.beginArray()
            stream.integer(1)
            stream.beginObject()
            for (position, part) in text.split(separator: "/", omittingEmptySubsequences: false).enumerated() {
                stream.key(name(position))
                stream.string(String(part))
            }
            stream.endObject()
            stream.endArray()
            return stream.text
        }
        let texts = ["dataset/venue/building/floor/room/location", "a", "", "/", "a//b/", "/lead", "quote\"/back\\slash/tab\t", "é/😀/x"]
        for text in texts {
            // A stream with a member before, and little room: the object takes its separator
            // and makes the buffer grow.
            var stream = JSONStream(capacity: 4)
            stream.beginArray()
            stream.integer(1)
            Array(text.utf8).withUnsafeBytes { stream.object(parts: $0, separatedBy: UInt8(ascii: "/"), name: name) }
            stream.endArray()
            #expect(stream.text == memberByMember(text), "\(text)")
            let parsed = try #require(JSONSerialization.jsonObject(with: Data(stream.bytes)) as? [Any])
            #expect((parsed.last as? [String: String])?.count == min(3, text.split(separator: "/", omittingEmptySubsequences: false).count))
        }
        #expect(LocationAddress(path: "d/v/b/f/r/l")!.json == #"{"dataset": "d", "venue": "v", "building": "b", "floor": "f", "room": "r", "location": "l"}"#)
        // As a member's value, with members after it: they take their separators.
        var stream = JSONStream(capacity: 8)
        stream.beginObject()
        stream.key("a")
        Array("x/y".utf8).withUnsafeBytes { stream.object(parts: $0, separatedBy: UInt8(ascii: "/"), name: name) }
        stream.add("b", 1)
        stream.endObject()
        #expect(stream.text == #"{"a": {"first": "x", "b": "y"}, "b": 1}"#)
    }

    @Test("a run through a cursor writes the same bytes as the stream's pieces one by one, escaped or not, within its maximum")
    func runs() throws {
        let texts = ["plain", "", "quote\"back\\slash\ttab\u{01}", "é 😀", String(repeating: "x", count: 40)]
        let instants: [Int64] = [1_763_720_000_000, 1_763_720_000_007, 1_763_720_001_000, -62_167_219_200_001]
        for text in texts {
            for millis in instants {
                let timestamp = LiveTimestamp(millisecondsSince1970: millis)
                let path = "d/v/b/\(text)/r/\(text)"
                let address = try #require(LocationAddress(path: path))
                // One by one: the members a run writes below, after a member before them.
                var pieces = JSONStream(capacity: 4)
                pieces.beginObject()
                pieces.add("before", 1)
                pieces.key("a")
                pieces.string(text)
                pieces.key(text: text)
                pieces.beginArray()
                pieces.integer(Int64.min)
                pieces.timestamp(timestamp)
                pieces.boolean(false)
                pieces.string("lit" as StaticString)
                Array(text.utf8).withUnsafeBytes { pieces.string(bytes: $0) }
                pieces.raw(json: Array("[1]".utf8))
                pieces.endArray()
                Array(text.utf8).withUnsafeBytes { pieces.key(bytes: $0) }
                address.write(to: &pieces)
                pieces.key("at")
                pieces.timestamp(timestamp)
                pieces.endObject()
                // The same in two runs, each taking the most its pieces may take.
                let count = text.utf8.count
                var runs = JSONStream(capacity: 4)
                runs.beginObject()
                runs.add("before", 1)
                typealias Cursor = JSONStream.Cursor
                runs.write(
                    maximum: Cursor.maximum(key: "a") + 2 * Cursor.maximum(text: count) + 3 + Cursor.integerMaximum
                        + Cursor.timestampMaximum + 7 + 2 + "lit".count + 2 + Cursor.maximum(text: count) + 5 + 1
                ) { json in
                    json.key("a")
                    json.string(text)
                    json.key(text: text)
                    json.beginArray()
                    json.integer(Int64.min)
                    json.timestamp(timestamp)
                    json.boolean(false)
                    json.string("lit" as StaticString)
                    Array(text.utf8).withUnsafeBytes { json.string(bytes: $0) }
                    Array("[1]".utf8).withUnsafeBytes { json.raw(bytes: $0) }
                    json.endArray()
                }
                runs.write(
                    maximum: Cursor.maximum(text: count) + address.jsonMaximum + Cursor.maximum(key: "at")
                        + Cursor.timestampMaximum + 1
                ) { json in
                    Array(text.utf8).withUnsafeBytes { json.key(bytes: $0) }
                    address.write(to: &json)
                    json.key("at")
                    json.timestamp(timestamp)
                    json.endObject()
                }
                #expect(runs.text == pieces.text, "\(text) \(millis)")
                #expect(try JSONSerialization.jsonObject(with: Data(runs.bytes)) is [String: Any])
                // The address as it was written member by member.
                var members = JSONStream()
                members.beginObject()
                for (name, part) in zip(
                    ["dataset", "venue", "building", "floor", "room", "location"],
                    path.split(separator: "/", omittingEmptySubsequences: false)) {
                    members.add(text: name, String(part))
                }
                members.endObject()
                #expect(address.json == members.text)
            }
        }
    }

    @Test("a copy is a stream of its own; the buffer grows past its first capacity")
    func copiesAndGrowth() {
        var stream = JSONStream(capacity: 16)
        stream.beginObject()
        stream.add("a", 1)
        var copy = stream
        copy.add("b", "two")
        stream.add("c", true)
        stream.endObject()
        copy.endObject()
        #expect(stream.text == #"{"a": 1, "c": true}"#)
        #expect(copy.text == #"{"a": 1, "b": "two"}"#)
        var long = JSONStream(capacity: 16)
        long.beginArray()
        for index in 0..<1000 { long.integer(Int64(index)) }
        long.endArray()
        #expect(long.text == "[" + (0..<1000).map(String.init).joined(separator: ", ") + "]")
        #expect(long.count == long.bytes.count)
        long.withUnsafeBytes { #expect(Array($0) == long.bytes) }
    }

    @Test("raw values written in place take their separators")
    func rawInPlace() {
        var stream = JSONStream(capacity: 16)
        stream.beginArray()
        stream.raw(maximum: 10) { at in
            at[0] = UInt8(ascii: "7")
            return 1
        }
        stream.raw(maximum: LiveTimestamp.maximumLength) { at in LiveTimestamp(millisecondsSince1970: 0).write(into: at) }
        stream.string("z" as StaticString)
        stream.endArray()
        #expect(stream.text == #"[7, 1970-01-01T00:00:00.000Z, "z"]"#)
        for value: Int64 in [0, 9, 10, -1, -10, 99, 100, 1_234_567_890, Int64.max, Int64.min, Int64.min + 1] {
            var digits = JSONStream()
            digits.integer(value)
            #expect(digits.text == String(value))
        }
    }

    @Test("reset keeps nothing of the last document")
    func reset() {
        var stream = JSONStream()
        stream.beginObject()
        stream.add("a", 1)
        stream.endObject()
        stream.reset()
        stream.beginObject()
        stream.add("b", 2)
        stream.endObject()
        #expect(stream.text == #"{"b": 2}"#)
    }

    @Test("timestamps print as ISO-8601 with milliseconds, years padded")
    func timestamps() {
        #expect(LiveTimestamp(millisecondsSince1970: 0).description == "1970-01-01T00:00:00.000Z")
        #expect(LiveTimestamp(millisecondsSince1970: 1_795_256_103_120).description == "2026-11-21T10:15:03.120Z")
        #expect(LiveTimestamp(millisecondsSince1970: -1).description == "1969-12-31T23:59:59.999Z")
        #expect(LiveTimestamp(millisecondsSince1970: -62_135_596_800_000).description == "0001-01-01T00:00:00.000Z")
        for millis: Int64 in [0, 1, 999, 1_000, 86_399_999, 1_795_342_503_120, 4_102_444_800_000] {
            let timestamp = LiveTimestamp(millisecondsSince1970: millis)
            #expect(LiveTimestamp(parsing: timestamp.description) == timestamp)
        }
        // Years 0 to 9999 take the fixed-width path; the rest the general one.
        var random = SplitMix64.seeded(for: "the random timestamps")
        for _ in 0..<2000 {
            let millis = Int64.random(in: -62_167_219_200_000...253_402_300_799_999, using: &random)
            let timestamp = LiveTimestamp(millisecondsSince1970: millis)
            #expect(timestamp.description.count == 24)
            #expect(LiveTimestamp(parsing: timestamp.description) == timestamp, "\(millis): \(timestamp)")
        }
        #expect(LiveTimestamp(millisecondsSince1970: -62_167_219_200_000).description == "0000-01-01T00:00:00.000Z")
        #expect(LiveTimestamp(millisecondsSince1970: 253_402_300_800_000).description == "10000-01-01T00:00:00.000Z")
        #expect(LiveTimestamp(millisecondsSince1970: -62_167_219_200_001).description == "-0001-12-31T23:59:59.999Z")
    }
}
