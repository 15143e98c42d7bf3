import Foundation
import Testing

@testable import LiveTopics

/// The payload decoder's JSON scanner against Foundation's `JSONSerialization` on generated
/// documents: they must agree on which ones are JSON, and on the values of properties.
@Suite("JSON scanner against JSONSerialization")
struct JSONDifferentialTests {
    /// A small deterministic generator (SplitMix64), so that a failure names its seed.
    struct Generator {
        var state: UInt64

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

        mutating func space() -> String { pick(["", "", "", " ", "\n", "\t ", "\r\n"]) }

        mutating func string() -> String {
            var text = "\""
            for _ in 0..<below(8) {
                text += pick([
                    "a", "Z", "0", " ", "é", "😀", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0041",
                    "\\u00e9", "\\u20AC", "\\ud83d\\ude00", "\\u0000", "{", "]", ":", ",",
                ])
            }
            return text + "\""
        }

        mutating func number() -> String {
            var text = below(4) == 0 ? "-" : ""
            text += below(3) == 0 ? "0" : String(1 + below(9)) + String(repeating: String(below(10)), count: below(4))
            if below(3) == 0 { text += "." + String(below(1000)) }
            if below(4) == 0 { text += pick(["e", "E", "e+", "E-"]) + String(below(30)) }
            return text
        }

        mutating func value(depth: Int) -> String {
            switch below(depth < 4 ? 8 : 5) {
            case 0: return string()
            case 1: return number()
            case 2: return pick(["true", "false"])
            case 3: return "null"
            case 4: return string()
            case 5, 6:
                let members = (0..<below(4)).map { _ in space() + string() + space() + ":" + space() + value(depth: depth + 1) + space() }
                return "{" + members.joined(separator: ",") + space() + "}"
            default:
                let elements = (0..<below(4)).map { _ in space() + value(depth: depth + 1) + space() }
                return "[" + elements.joined(separator: ",") + space() + "]"
            }
        }

        /// One byte deleted, inserted or replaced.
        mutating func mutate(_ bytes: [UInt8]) -> [UInt8] {
            var bytes = bytes
            let significant: [UInt8] = Array("{}[]:,\"\\0123456789-+.eEtrufanl \u{7F}".utf8) + [0x00, 0x0A, 0xC3, 0xFF, 0xED]
            let index = below(bytes.count + 1)
            switch below(3) {
            case 0 where index < bytes.count: bytes.remove(at: index)
            case 1 where index < bytes.count: bytes[index] = pick(significant)
            default: bytes.insert(pick(significant), at: index)
            }
            return bytes
        }
    }

    static func scannerAccepts(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var scanner = JSONScanner(raw)
            do throws(JSONScanner.Failure) {
                try scanner.skipValue()
                try scanner.expectEnd()
                return true
            } catch {
                return false
            }
        }
    }

    /// Whether an exponent of three digits or more appears (outside strings or in, alike).
    static func hasHugeNumber(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.range(of: #"[0-9][eE][+]?[0-9]{3,}"#, options: .regularExpression) != nil
    }

    static func hasTrailingComma(_ bytes: [UInt8]) -> Bool {
        String(decoding: bytes, as: UTF8.self).range(of: #",[ \t\r\n]*[\]}]"#, options: .regularExpression) != nil
    }

    static func foundationAccepts(_ bytes: [UInt8]) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) != nil
    }

    @Test("generated documents, and each with one byte changed: accepted and refused alike")
    func acceptance() {
        var generator = Generator(state: 20_261_123)
        var mutated = 0
        var refused = 0
        for round in 0..<4_000 {
            let document = Array(generator.value(depth: 0).utf8)
            #expect(Self.scannerAccepts(document), "round \(round): \(String(decoding: document, as: UTF8.self))")
            #expect(Self.foundationAccepts(document), "round \(round)")
            for _ in 0..<3 {
                let changed = generator.mutate(document)
                // Where Foundation departs from RFC 8259 the documents are not compared: it
                // refuses numbers beyond a Double's range (JSON allows them; the scanner keeps
                // their text), stops reading at a NUL byte, and takes a trailing comma.
                if Self.hasHugeNumber(changed) || changed.contains(0) || Self.hasTrailingComma(changed) { continue }
                let ours = Self.scannerAccepts(changed)
                mutated += 1
                if !ours { refused += 1 }
                #expect(
                    ours == Self.foundationAccepts(changed),
                    "round \(round): scanner \(ours ? "accepts" : "refuses") \(String(decoding: changed, as: UTF8.self).debugDescription) \(changed)")
            }
        }
        // The mutations must reach both answers, or the comparison says little.
        #expect(refused > mutated / 4 && refused < mutated * 9 / 10, "\(refused) of \(mutated) refused")
    }

    @Test("property values read as JSONSerialization reads them: strings equal, numbers the same value, booleans as text")
    func values() throws {
        var generator = Generator(state: 42)
        for round in 0..<2_000 {
            var generated: [String: String] = [:]
            for index in 0..<(1 + generator.below(5)) {
                generated["p\(index)"] = generator.pick([generator.string(), generator.number(), "true", "false"])
            }
            let members = generated.map { "\"\($0.key)\":\($0.value)" }
            let document = Array(("{\"properties\":{" + members.joined(separator: ",") + "}}").utf8)
            let payload = try LivePayload(document)
            let foundation = try #require(
                (try JSONSerialization.jsonObject(with: Data(document)) as? [String: Any])?["properties"] as? [String: Any])
            #expect(payload.properties.count == foundation.count, "round \(round)")
            for property in payload.properties {
                let text = generated[property.name] ?? ""
                if text == "true" || text == "false" {
                    #expect(property.value == text && (foundation[property.name] as? Bool) == (text == "true"), "round \(round)")
                } else if text.hasPrefix("\"") {
                    #expect(property.value == foundation[property.name] as? String, "round \(round): \(text)")
                } else {
                    let number = (foundation[property.name] as? NSNumber)?.doubleValue
                    #expect(Double(property.value) == number, "round \(round): \(property.value) against \(String(describing: number))")
                }
            }
        }
    }
}
