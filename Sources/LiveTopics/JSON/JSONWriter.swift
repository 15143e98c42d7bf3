/// Writes JSON as UTF-8 bytes into one growing buffer, members in the order they are
/// written: what is published on every change is built here without a `String` on the way.
///
/// Output formats (DESIGN.md) fix the key order, which a dictionary-based encoder would not
/// keep. Nesting needs no stack: after an object or array closes, the container around it
/// has at least that member, so the next one takes a separator.
public struct JSONStream: Sendable {
    public private(set) var bytes: [UInt8]
    /// Whether the next member or element is the first of its container.
    private var first = true

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Empties the buffer and keeps its storage, for the next document.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        first = true
    }

    // MARK: Containers

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        first = true
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        first = false
    }

    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        first = true
    }

    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        first = false
    }

    /// A member's key (and the separator before it): its value comes next.
    public mutating func key(_ key: String) {
        if key.utf8.withContiguousStorageIfAvailable({ appendPlain(UnsafeRawBufferPointer($0), isKey: true) }) == true { return }
        separate()
        appendQuoted(key)
        valueFollows()
    }

    /// A member's key given as bytes.
    public mutating func key(bytes key: UnsafeRawBufferPointer) {
        if appendPlain(key, isKey: true) { return }
        separate()
        appendQuoted(key)
        valueFollows()
    }

    // MARK: Values (a member's after its key, or an array's element)

    public mutating func string(_ value: String) {
        if value.utf8.withContiguousStorageIfAvailable({ appendPlain(UnsafeRawBufferPointer($0), isKey: false) }) == true { return }
        separate()
        appendQuoted(value)
        first = false
    }

    public mutating func string(bytes value: UnsafeRawBufferPointer) {
        if appendPlain(value, isKey: false) { return }
        separate()
        appendQuoted(value)
        first = false
    }

    public mutating func integer(_ value: Int64) {
        separate()
        appendDigits(value)
        first = false
    }

    /// A number as people read it: whole numbers without a fraction (`16`, `0.5`).
    public mutating func number(_ value: Double) {
        if value == value.rounded(), abs(value) < 1e15 { return integer(Int64(value)) }
        separate()
        bytes.append(contentsOf: String(value).utf8)
        first = false
    }

    public mutating func boolean(_ value: Bool) {
        separate()
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
        first = false
    }

    /// A value that is already JSON text.
    public mutating func raw(_ json: String) {
        separate()
        bytes.append(contentsOf: json.utf8)
        first = false
    }

    /// A value written by `body` as plain bytes into the buffer (a timestamp, a color): the
    /// caller writes valid JSON.
    public mutating func rawBytes(_ body: (inout [UInt8]) -> Void) {
        separate()
        body(&bytes)
        first = false
    }

    // MARK: Members: a key and its value

    public mutating func add(_ key: String, _ value: String) {
        self.key(key)
        string(value)
    }

    public mutating func add(_ key: String, _ value: Int) {
        self.key(key)
        integer(Int64(value))
    }

    public mutating func add(_ key: String, _ value: Double) {
        self.key(key)
        number(value)
    }

    public mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        boolean(value)
    }

    public mutating func add(_ key: String, json value: String) {
        self.key(key)
        raw(value)
    }

    /// The bytes as text.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    // MARK: Bytes

    /// After a key: `: `, and the value takes no separator.
    private mutating func valueFollows() {
        bytes.append(UInt8(ascii: ":"))
        bytes.append(UInt8(ascii: " "))
        first = true
    }

    private mutating func separate() {
        if !first {
            bytes.append(UInt8(ascii: ","))
            bytes.append(UInt8(ascii: " "))
        }
    }

    /// The longest text ``appendPlain(_:isKey:)`` writes in one piece (from the stack).
    private static let plainLimit = 256

    /// A key or string value that needs no escaping (the usual case), with the separator
    /// before it and, for a key, the `: ` after it, as one append: each append to an array
    /// checks its uniqueness and capacity again, and a published change has a few dozen
    /// keys and strings, each of four or five appends piece by piece. `false` (nothing
    /// written) when the text needs escaping or is long: the caller writes it piecewise.
    private mutating func appendPlain(_ value: UnsafeRawBufferPointer, isKey: Bool) -> Bool {
        let count = value.count
        guard count <= Self.plainLimit else { return false }
        for byte in value where byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return false }
        let separated = !first
        let total = count + 2 + (separated ? 2 : 0) + (isKey ? 2 : 0)
        withUnsafeTemporaryAllocation(byteCount: Self.plainLimit + 6, alignment: 1) { buffer in
            let base = buffer.baseAddress!
            var at = 0
            if separated {
                base.storeBytes(of: UInt8(ascii: ","), toByteOffset: 0, as: UInt8.self)
                base.storeBytes(of: UInt8(ascii: " "), toByteOffset: 1, as: UInt8.self)
                at = 2
            }
            base.storeBytes(of: UInt8(ascii: "\""), toByteOffset: at, as: UInt8.self)
            at += 1
            if count > 0 { (base + at).copyMemory(from: value.baseAddress!, byteCount: count) }
            at += count
            base.storeBytes(of: UInt8(ascii: "\""), toByteOffset: at, as: UInt8.self)
            if isKey {
                base.storeBytes(of: UInt8(ascii: ":"), toByteOffset: at + 1, as: UInt8.self)
                base.storeBytes(of: UInt8(ascii: " "), toByteOffset: at + 2, as: UInt8.self)
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(start: base, count: total))
        }
        // After a key its value takes no separator; after a value the next member does.
        first = isKey
        return true
    }

    private mutating func appendQuoted(_ value: String) {
        if value.utf8.withContiguousStorageIfAvailable({ appendQuoted(UnsafeRawBufferPointer($0)) }) != nil { return }
        var value = value
        value.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0)) }
    }

    private mutating func appendQuoted(_ value: UnsafeRawBufferPointer) {
        bytes.append(UInt8(ascii: "\""))
        var plainStart = 0
        for index in 0..<value.count {
            let byte = value[index]
            guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 else { continue }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[plainStart..<index]))
            bytes.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
            case 0x0A: bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "t"))
            default:
                func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }
                bytes.append(UInt8(ascii: "u"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(UInt8(ascii: "0"))
                bytes.append(hex(byte >> 4))
                bytes.append(hex(byte & 15))
            }
            plainStart = index + 1
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[plainStart..<value.count]))
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendDigits(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        if magnitude < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes, enough for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                count += 1
                buffer[24 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }
}

/// Builds one JSON object as text, keys in the order they are added: ``JSONStream`` for
/// what is not on the hot path.
public struct JSONObjectWriter: Sendable {
    private var stream = JSONStream(capacity: 64)

    public init() {
        stream.beginObject()
    }

    /// Adds a string member.
    public mutating func add(_ key: String, _ value: String) { stream.add(key, value) }

    /// Adds an integer member.
    public mutating func add(_ key: String, _ value: Int) { stream.add(key, value) }

    /// Adds a number member (whole numbers without a fraction).
    public mutating func add(_ key: String, _ value: Double) { stream.add(key, value) }

    /// Adds a boolean member.
    public mutating func add(_ key: String, _ value: Bool) { stream.add(key, value) }

    /// Adds a member whose value is already JSON text (a nested object or array).
    public mutating func add(_ key: String, json value: String) { stream.add(key, json: value) }

    /// The finished object.
    public var json: String {
        var stream = stream
        stream.endObject()
        return stream.text
    }
}

/// A number as JSON, and as people read it: whole numbers without a fraction (`16`, `0.5`).
public func jsonNumber(_ value: Double) -> String {
    var stream = JSONStream(capacity: 24)
    stream.number(value)
    return stream.text
}

/// A JSON array of strings.
public func jsonArray(_ values: [String]) -> String {
    var stream = JSONStream()
    stream.beginArray()
    for value in values { stream.string(value) }
    stream.endArray()
    return stream.text
}

/// A string as a JSON string literal.
public func jsonQuoted(_ value: String) -> String {
    var stream = JSONStream(capacity: value.utf8.count + 2)
    stream.string(value)
    return stream.text
}
