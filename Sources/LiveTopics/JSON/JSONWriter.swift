/// Builds one JSON object as text, keys in the order they are added.
///
/// Output formats (DESIGN.md) fix the key order, which a dictionary-based encoder would not keep.
public struct JSONObjectWriter: Sendable {
    private var text = "{"
    private var empty = true

    public init() {}

    /// Adds a string member.
    public mutating func add(_ key: String, _ value: String) {
        separator(key)
        appendQuoted(value, to: &text)
    }

    /// Adds an integer member.
    public mutating func add(_ key: String, _ value: Int) {
        separator(key)
        text += String(value)
    }

    /// Adds a number member (whole numbers without a fraction).
    public mutating func add(_ key: String, _ value: Double) {
        separator(key)
        text += jsonNumber(value)
    }

    /// Adds a boolean member.
    public mutating func add(_ key: String, _ value: Bool) {
        separator(key)
        text += value ? "true" : "false"
    }

    /// Adds a member whose value is already JSON text (a nested object or array).
    public mutating func add(_ key: String, json value: String) {
        separator(key)
        text += value
    }

    /// The finished object.
    public var json: String { text + "}" }

    private mutating func separator(_ key: String) {
        if !empty { text += ", " }
        empty = false
        appendQuoted(key, to: &text)
        text += ": "
    }
}

/// A number as JSON, and as people read it: whole numbers without a fraction (`16`, `0.5`).
public func jsonNumber(_ value: Double) -> String {
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return String(value)
}

/// A JSON array of strings.
public func jsonArray(_ values: [String]) -> String {
    var text = "["
    for (index, value) in values.enumerated() {
        if index > 0 { text += ", " }
        appendQuoted(value, to: &text)
    }
    return text + "]"
}

/// A string as a JSON string literal.
public func jsonQuoted(_ value: String) -> String {
    var text = ""
    appendQuoted(value, to: &text)
    return text
}

private func appendQuoted(_ value: String, to text: inout String) {
    text += "\""
    var plainStart = value.utf8.startIndex
    var index = plainStart
    let utf8 = value.utf8
    while index != utf8.endIndex {
        let byte = utf8[index]
        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 {
            text += value[plainStart..<index]
            switch byte {
            case UInt8(ascii: "\""): text += "\\\""
            case UInt8(ascii: "\\"): text += "\\\\"
            case 0x0A: text += "\\n"
            case 0x0D: text += "\\r"
            case 0x09: text += "\\t"
            default:
                let hex = String(byte, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
            plainStart = utf8.index(after: index)
        }
        index = utf8.index(after: index)
    }
    text += value[plainStart..<utf8.endIndex]
    text += "\""
}
