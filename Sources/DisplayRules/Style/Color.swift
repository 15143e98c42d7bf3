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
        stream.rawBytes { bytes in
            bytes.append(UInt8(ascii: "\""))
            bytes.append(UInt8(ascii: "#"))
            for shift in stride(from: 20, through: 0, by: -4) {
                let nibble = UInt8((rgb >> UInt32(shift)) & 15)
                bytes.append(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10)
            }
            bytes.append(UInt8(ascii: "\""))
        }
    }
}
