import LiveTopics

/// A color written `#RRGGBB`.
public struct Color: Hashable, Sendable, CustomStringConvertible {
    /// 0xRRGGBB.
    public let rgb: UInt32

    public init(rgb: UInt32) {
        self.rgb = rgb & 0xFF_FFFF
    }

    /// Parses `#RRGGBB` (either case).
    /// - Returns: `nil` for anything else.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 7, bytes[0] == UInt8(ascii: "#") else { return nil }
        var value: UInt32 = 0
        for byte in bytes.dropFirst() {
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
            value = value << 4 | digit
        }
        rgb = value
    }

    /// `#RRGGBB`, upper case.
    public var description: String {
        var stream = JSONStream(capacity: 9)
        write(to: &stream)
        return String(stream.text.dropFirst().dropLast())
    }

    /// Writes `"#RRGGBB"` (quoted) as a JSON string.
    public func write(to stream: inout JSONStream) {
        stream.raw(maximum: 9) { at in
            at[0] = UInt8(ascii: "\"")
            at[1] = UInt8(ascii: "#")
            for index in 0..<6 {
                let nibble = UInt8((rgb >> UInt32(20 - 4 * index)) & 15)
                at[2 + index] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
            }
            at[8] = UInt8(ascii: "\"")
            return 9
        }
    }
}
