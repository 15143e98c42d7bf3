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
        let hex = String(rgb, radix: 16, uppercase: true)
        return "#" + String(repeating: "0", count: 6 - hex.count) + hex
    }
}
