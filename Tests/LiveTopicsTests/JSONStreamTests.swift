import Foundation
import Testing

@testable import LiveTopics

/// The byte writer that builds every published document.
@Suite("JSON stream")
struct JSONStreamTests {
    @Test("nested objects and arrays take separators, keys and strings are escaped")
    func nesting() throws {
        var stream = JSONStream()
        stream.beginObject()
        stream.add("a\"b", "line\nnext\ttab\\ \u{01} é 😀")
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

    @Test("keys and strings written whole or piece by piece (escapes, long text) take the same separators")
    func plainAndEscaped() throws {
        let long = String(repeating: "x", count: 300)
        var stream = JSONStream()
        stream.beginObject()
        stream.add("plain", "value")
        stream.add("esc\"aped", "tab\there")
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
        var random = SystemRandomNumberGenerator()
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
