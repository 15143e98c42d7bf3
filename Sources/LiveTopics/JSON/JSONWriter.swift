/// Writes JSON as UTF-8 bytes into one growing buffer, members in the order they are
/// written: what is published on every change is built here without a `String` on the way.
///
/// Output formats (DESIGN.md) fix the key order, which a dictionary-based encoder would not
/// keep. Nesting needs no stack: after an object or array closes, the container around it
/// has at least that member, so the next one takes a separator.
///
/// Every published change is a few dozen keys and values written here, so each write is
/// one capacity check and stores through a pointer (a ``ByteWriter``), no temporary
/// buffer. Keys given as literals (`StaticString`) are read in place; all text is checked
/// for what needs escaping a word at a time and copied whole when nothing does (the usual
/// case). A copy of a stream is a stream of its own.
public struct JSONStream {
    private var out: ByteWriter
    /// Whether the next member or element is the first of its container.
    private var first = true
    /// The second of the last timestamp written with four-digit year, and its text up to the
    /// seconds (`YYYY-MM-DDTHH:MM:SS`, 19 bytes): the timestamps of a change, and those of
    /// the next changes a reused stream writes, mostly fall in one second.
    private var lastSecond = Int64.min
    private var secondText: (UInt64, UInt64, UInt64) = (0, 0, 0)

    public init(capacity: Int = 256) {
        out = ByteWriter(capacity: capacity)
    }

    /// Bytes written.
    public var count: Int { out.count }

    /// The document's bytes (a copy).
    public var bytes: [UInt8] { out.bytes }

    /// The bytes as text.
    public var text: String { out.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    /// Lends the bytes written so far, without a copy.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try out.withUnsafeBytes(body)
    }

    /// Empties the buffer and keeps its storage, for the next document.
    public mutating func reset() {
        out.reset()
        first = true
    }

    // MARK: Containers

    public mutating func beginObject() { open(UInt8(ascii: "{")) }

    public mutating func endObject() { close(UInt8(ascii: "}")) }

    public mutating func beginArray() { open(UInt8(ascii: "[")) }

    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// A member's key (and the separator before it), given as a literal: its bytes are
    /// read in place. Its value comes next.
    public mutating func key(_ key: StaticString) {
        appendLiteral(key, isKey: true)
    }

    /// A member's key given at run time (escaped where it must be).
    public mutating func key(text key: String) {
        if let done = key.utf8.withContiguousStorageIfAvailable({ appendQuoted(UnsafeRawBufferPointer($0), isKey: true) }) {
            return done
        }
        var key = key
        key.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0), isKey: true) }
    }

    /// A member's key given as bytes (escaped where it must be).
    public mutating func key(bytes key: UnsafeRawBufferPointer) { appendQuoted(key, isKey: true) }

    // MARK: Values (a member's after its key, or an array's element)

    public mutating func string(_ value: String) {
        if let done = value.utf8.withContiguousStorageIfAvailable({ appendQuoted(UnsafeRawBufferPointer($0), isKey: false) }) {
            return done
        }
        var value = value
        value.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0), isKey: false) }
    }

    /// A string value given as a literal.
    public mutating func string(_ value: StaticString) {
        appendLiteral(value, isKey: false)
    }

    public mutating func string(bytes value: UnsafeRawBufferPointer) { appendQuoted(value, isKey: false) }

    public mutating func integer(_ value: Int64) {
        let at = room(22)
        out.advance(Self.digits(value, at: at))
        first = false
    }

    /// A number as people read it: whole numbers without a fraction (`16`, `0.5`).
    public mutating func number(_ value: Double) {
        if value == value.rounded(), abs(value) < 1e15 { return integer(Int64(value)) }
        raw(String(value))
    }

    public mutating func boolean(_ value: Bool) {
        if value { fragment("true") } else { fragment("false") }
    }

    /// A value that is already JSON text.
    public mutating func raw(_ json: String) {
        if let done = json.utf8.withContiguousStorageIfAvailable({ raw(bytes: UnsafeRawBufferPointer($0)) }) { return done }
        var json = json
        json.withUTF8 { raw(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// A value that is already JSON, as bytes (a fragment kept from an earlier document).
    public mutating func raw(bytes json: UnsafeRawBufferPointer) {
        separate()
        out.append(json)
        first = false
    }

    /// A value that is already JSON, kept as bytes.
    public mutating func raw(json: [UInt8]) { json.withUnsafeBytes { raw(bytes: $0) } }

    /// A value of at most `maximum` bytes written by `body` straight into the buffer (a
    /// timestamp, a color); `body` returns how many it wrote. The caller writes valid JSON.
    public mutating func raw(maximum: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        let at = room(maximum)
        let written = body(at)
        precondition(written <= maximum)
        out.advance(written)
        first = false
    }

    /// A timestamp's ISO-8601 form, a JSON string (`"2025-11-21T10:13:20.000Z"`). Within the
    /// second of the last one, only the milliseconds are written anew.
    public mutating func timestamp(_ value: LiveTimestamp) {
        let millis = value.millisecondsSince1970
        let second = millis >= 0 ? millis / 1000 : -((999 - millis) / 1000)
        let at = room(LiveTimestamp.maximumLength + 2)
        at[0] = UInt8(ascii: "\"")
        if second == lastSecond {
            var text = secondText
            Swift.withUnsafeBytes(of: &text) { (at + 1).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 19) }
            var fraction = millis - second * 1000
            at[20] = UInt8(ascii: ".")
            for index in stride(from: 23, through: 21, by: -1) {
                at[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: fraction % 10)
                fraction /= 10
            }
            at[24] = UInt8(ascii: "Z")
            at[25] = UInt8(ascii: "\"")
            out.advance(26)
        } else {
            let count = value.write(into: at + 1)
            at[count + 1] = UInt8(ascii: "\"")
            out.advance(count + 2)
            if count == 24 {
                lastSecond = second
                var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
                Swift.withUnsafeMutableBytes(of: &text) { $0.baseAddress!.copyMemory(from: at + 1, byteCount: 19) }
                secondText = text
            }
        }
        first = false
    }

    /// A value written by `body` as plain bytes (the caller writes valid JSON).
    public mutating func rawBytes(_ body: (inout [UInt8]) -> Void) {
        var bytes: [UInt8] = []
        body(&bytes)
        bytes.withUnsafeBytes { raw(bytes: $0) }
    }

    // MARK: Members: a key and its value

    /// An object with a string member for each part of `text` between `separator` bytes,
    /// named in order by `name` (an address's components, as ``LocationAddress`` writes
    /// them). When no part needs escaping (the usual case) the whole object is one capacity
    /// check and stores through a pointer, instead of two checks and an escape scan a member.
    public mutating func object(
        parts text: UnsafeRawBufferPointer, separatedBy separator: UInt8, name: (Int) -> StaticString
    ) {
        let count = text.count
        guard let source = text.baseAddress?.assumingMemoryBound(to: UInt8.self), !Self.needsEscaping(text) else {
            beginObject()
            var start = 0
            var position = 0
            for index in 0...count where index == count || text[index] == separator {
                key(name(position))
                string(bytes: UnsafeRawBufferPointer(rebasing: text[start..<index]))
                start = index + 1
                position += 1
            }
            return endObject()
        }
        // `{}`, and a part's `"name": "value"` with `, ` before all but the first: the
        // separators' bytes are not written, so the text's count covers what they take.
        var parts = 1
        for index in 0..<count where source[index] == separator { parts += 1 }
        var needed = 2 + count + 7 * parts
        for position in 0..<parts { needed += name(position).utf8CodeUnitCount }
        let start = room(needed)
        var at = start
        at.pointee = UInt8(ascii: "{")
        at += 1
        var partStart = 0
        var position = 0
        var index = 0
        while true {
            if index == count || source[index] == separator {
                if position > 0 {
                    at[0] = UInt8(ascii: ",")
                    at[1] = UInt8(ascii: " ")
                    at += 2
                }
                let key = name(position)
                at.pointee = UInt8(ascii: "\"")
                (at + 1).update(from: key.utf8Start, count: key.utf8CodeUnitCount)
                at += key.utf8CodeUnitCount + 1
                at[0] = UInt8(ascii: "\"")
                at[1] = UInt8(ascii: ":")
                at[2] = UInt8(ascii: " ")
                at[3] = UInt8(ascii: "\"")
                at += 4
                at.update(from: source + partStart, count: index - partStart)
                at += index - partStart
                at.pointee = UInt8(ascii: "\"")
                at += 1
                if index == count { break }
                partStart = index + 1
                position += 1
            }
            index += 1
        }
        at.pointee = UInt8(ascii: "}")
        at += 1
        assert(at - start <= needed, "an object of parts wrote past the room it took")
        out.advance(at - start)
        first = false
    }

    public mutating func add(_ key: StaticString, _ value: String) {
        self.key(key)
        string(value)
    }

    public mutating func add(_ key: StaticString, _ value: Int) {
        self.key(key)
        integer(Int64(value))
    }

    public mutating func add(_ key: StaticString, _ value: Double) {
        self.key(key)
        number(value)
    }

    public mutating func add(_ key: StaticString, _ value: Bool) {
        self.key(key)
        boolean(value)
    }

    public mutating func add(_ key: StaticString, json value: String) {
        self.key(key)
        raw(value)
    }

    /// A member whose key is given at run time.
    public mutating func add(text key: String, _ value: String) {
        self.key(text: key)
        string(value)
    }

    public mutating func add(text key: String, _ value: Int) {
        self.key(text: key)
        integer(Int64(value))
    }

    public mutating func add(text key: String, _ value: Double) {
        self.key(text: key)
        number(value)
    }

    public mutating func add(text key: String, _ value: Bool) {
        self.key(text: key)
        boolean(value)
    }

    public mutating func add(text key: String, json value: String) {
        self.key(text: key)
        raw(value)
    }

    // MARK: Bytes

    /// Room for `needed` more bytes past a separator, when the container has a member
    /// before this one: where to write them. The separator is written already.
    private mutating func room(_ needed: Int) -> UnsafeMutablePointer<UInt8> {
        let at = out.room(needed + 2)
        guard !first else { return at }
        at[0] = UInt8(ascii: ",")
        at[1] = UInt8(ascii: " ")
        out.advance(2)
        return at + 2
    }

    /// The separator, when the container has a member before this one.
    private mutating func separate() {
        _ = room(0)
    }

    private mutating func open(_ bracket: UInt8) {
        room(1).pointee = bracket
        out.advance(1)
        first = true
    }

    private mutating func close(_ bracket: UInt8) {
        // A closing bracket never takes a separator.
        out.append(bracket)
        first = false
    }

    /// A literal value (`true`, `false`).
    private mutating func fragment(_ text: StaticString) {
        let at = room(text.utf8CodeUnitCount)
        at.update(from: text.utf8Start, count: text.utf8CodeUnitCount)
        out.advance(text.utf8CodeUnitCount)
        first = false
    }

    /// A key (with `: ` after it) or a string value, in quotes, escaped where it must be.
    private mutating func appendQuoted(_ value: UnsafeRawBufferPointer, isKey: Bool) {
        guard !Self.needsEscaping(value) else { return appendEscaped(value, isKey: isKey) }
        appendUnescaped(value, isKey: isKey)
    }

    /// A literal of the code's own (a key such as `"version"`): it needs no escaping, so none
    /// is looked for (a debug build checks).
    private mutating func appendLiteral(_ literal: StaticString, isKey: Bool) {
        precondition(literal.hasPointerRepresentation)
        let bytes = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        assert(!Self.needsEscaping(bytes), "the literal \(literal) would need escaping")
        appendUnescaped(bytes, isKey: isKey)
    }

    /// ``appendQuoted(_:isKey:)`` of bytes that need no escaping.
    private mutating func appendUnescaped(_ value: UnsafeRawBufferPointer, isKey: Bool) {
        let length = value.count
        let at = room(length + 4)
        at[0] = UInt8(ascii: "\"")
        if length > 0 { (at + 1).update(from: value.baseAddress!.assumingMemoryBound(to: UInt8.self), count: length) }
        at[length + 1] = UInt8(ascii: "\"")
        if isKey {
            at[length + 2] = UInt8(ascii: ":")
            at[length + 3] = UInt8(ascii: " ")
            out.advance(length + 4)
        } else {
            out.advance(length + 2)
        }
        // After a key its value takes no separator; after a value the next member does.
        first = isKey
    }

    /// Whether any byte is a quote, a backslash or a control character: eight bytes a step
    /// (a word has a byte below 0x20, or equal to `"` or `\`, when the classic "has a zero
    /// byte" test finds one in it or in it XORed with that byte repeated; a byte of 0x80 or
    /// more can only make the test say yes, and the escaping path looks again byte by byte).
    static func needsEscaping(_ value: UnsafeRawBufferPointer) -> Bool {
        let count = value.count
        guard count > 0, let base = value.baseAddress else { return false }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index + 8 <= count {
            let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            let control = (word &- ones &* 0x20) & ~word
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let found = control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)
            if found & highs != 0 { return true }
            index += 8
        }
        while index < count {
            let byte = base.load(fromByteOffset: index, as: UInt8.self)
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return true }
            index += 1
        }
        return false
    }

    /// The slow path of ``appendQuoted(_:isKey:)``: byte by byte, with escapes.
    private mutating func appendEscaped(_ value: UnsafeRawBufferPointer, isKey: Bool) {
        // At most six bytes for each (`\u00XX`), the quotes and `: `.
        let start = room(value.count * 6 + 4)
        var at = start
        at.pointee = UInt8(ascii: "\"")
        at += 1
        for byte in value {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                at[0] = UInt8(ascii: "\\")
                at[1] = byte
                at += 2
            case 0x0A, 0x0D, 0x09:
                at[0] = UInt8(ascii: "\\")
                at[1] = byte == 0x0A ? UInt8(ascii: "n") : byte == 0x0D ? UInt8(ascii: "r") : UInt8(ascii: "t")
                at += 2
            case 0..<0x20:
                func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }
                at[0] = UInt8(ascii: "\\")
                at[1] = UInt8(ascii: "u")
                at[2] = UInt8(ascii: "0")
                at[3] = UInt8(ascii: "0")
                at[4] = hex(byte >> 4)
                at[5] = hex(byte & 15)
                at += 6
            default:
                at.pointee = byte
                at += 1
            }
        }
        at.pointee = UInt8(ascii: "\"")
        at += 1
        if isKey {
            at[0] = UInt8(ascii: ":")
            at[1] = UInt8(ascii: " ")
            at += 2
        }
        out.advance(at - start)
        first = isKey
    }

    /// Writes `value`'s decimal digits at `at` (at most 20 and a sign); returns how many.
    static func digits(_ value: Int64, at: UnsafeMutablePointer<UInt8>) -> Int {
        var magnitude = value.magnitude
        var length = 1
        var scale: UInt64 = 10
        while length < 20 && magnitude >= scale {
            length += 1
            scale = scale &* 10
        }
        var written = 0
        if value < 0 {
            at.pointee = UInt8(ascii: "-")
            written = 1
        }
        var index = written + length - 1
        repeat {
            at[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
            index -= 1
        } while magnitude > 0
        return written + length
    }
}

/// Builds one JSON object as text, keys in the order they are added: ``JSONStream`` for
/// what is not on the hot path.
public struct JSONObjectWriter {
    private var stream = JSONStream(capacity: 64)

    public init() {
        stream.beginObject()
    }

    /// Adds a string member.
    public mutating func add(_ key: String, _ value: String) { stream.add(text: key, value) }

    /// Adds an integer member.
    public mutating func add(_ key: String, _ value: Int) { stream.add(text: key, value) }

    /// Adds a number member (whole numbers without a fraction).
    public mutating func add(_ key: String, _ value: Double) { stream.add(text: key, value) }

    /// Adds a boolean member.
    public mutating func add(_ key: String, _ value: Bool) { stream.add(text: key, value) }

    /// Adds a member whose value is already JSON text (a nested object or array).
    public mutating func add(_ key: String, json value: String) { stream.add(text: key, json: value) }

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
