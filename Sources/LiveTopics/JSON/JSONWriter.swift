/// Writes JSON as UTF-8 bytes into one growing buffer, members in the order they are
/// written: what is published on every change is built here without a `String` on the way.
///
/// The published payloads (docs/protocol.md, "Derived changes") fix the key order, which a
/// dictionary-based encoder would not keep. Nesting needs no stack: after an object or array
/// closes, the container around it has at least that member, so the next one takes a
/// separator.
///
/// Every published change is a few dozen keys and values written here, so each write is
/// one capacity check and stores through a pointer (a ``ByteWriter``), no temporary
/// buffer, and a run of them can share one check (``write(maximum:_:)``). Keys given as
/// literals (`StaticString`) are read in place; all text is checked for what needs escaping
/// a word at a time and copied whole when nothing does (the usual case). The writes are
/// inlinable: a literal key then costs its stores, not a call and a copy of unknown length.
/// A copy of a stream is a stream of its own.
public struct JSONStream {
    @usableFromInline var out: ByteWriter
    /// Whether the next member or element is the first of its container.
    @usableFromInline var first = true
    @usableFromInline var lastSecond = LastSecond()

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

    // MARK: Runs: pieces written with one capacity check

    /// Writes what `body` writes through its cursor, at most `maximum` bytes (``Cursor`` says
    /// what each piece may take): the room is taken once for the run, where each piece
    /// written on its own takes it again, checking the buffer's capacity and that it is not
    /// shared.
    @inlinable @inline(__always)
    public mutating func write(maximum: Int, _ body: (inout Cursor) -> Void) {
        let start = out.room(maximum)
        var cursor = Cursor(start, maximum: maximum, first: first, lastSecond: lastSecond)
        body(&cursor)
        // A maximum too small is found only after the run wrote past it, but then the
        // process stops at once instead of going on over what it overwrote.
        precondition(cursor.at - start <= maximum, "a run of JSON wrote past the room it took")
        out.advance(cursor.at - start)
        first = cursor.first
        lastSecond = cursor.lastSecond
    }

    /// ``write(maximum:_:)`` of a piece that writes no timestamp: the second of the last one
    /// is left as it is, not stored back.
    @inlinable @inline(__always)
    mutating func writePiece(maximum: Int, _ body: (inout Cursor) -> Void) {
        let start = out.room(maximum)
        var cursor = Cursor(start, maximum: maximum, first: first, lastSecond: lastSecond)
        body(&cursor)
        out.advance(cursor.at - start)
        first = cursor.first
    }

    // MARK: Containers

    @inlinable @inline(__always)
    public mutating func beginObject() { writePiece(maximum: 3) { $0.beginObject() } }

    @inlinable @inline(__always)
    public mutating func endObject() { writePiece(maximum: 1) { $0.endObject() } }

    @inlinable @inline(__always)
    public mutating func beginArray() { writePiece(maximum: 3) { $0.beginArray() } }

    @inlinable @inline(__always)
    public mutating func endArray() { writePiece(maximum: 1) { $0.endArray() } }

    /// A member's key (and the separator before it), given as a literal: its bytes are
    /// read in place. Its value comes next.
    @inlinable @inline(__always)
    public mutating func key(_ key: StaticString) {
        writePiece(maximum: Cursor.maximum(key: key)) { $0.key(key) }
    }

    /// A member's key given at run time (escaped where it must be).
    public mutating func key(text key: String) {
        if let done = key.utf8.withContiguousStorageIfAvailable({ quoted(UnsafeRawBufferPointer($0), isKey: true) }) {
            return done
        }
        var key = key
        key.withUTF8 { quoted(UnsafeRawBufferPointer($0), isKey: true) }
    }

    /// A member's key given as bytes (escaped where it must be).
    public mutating func key(bytes key: UnsafeRawBufferPointer) { quoted(key, isKey: true) }

    // MARK: Values (a member's after its key, or an array's element)

    public mutating func string(_ value: String) {
        if let done = value.utf8.withContiguousStorageIfAvailable({ quoted(UnsafeRawBufferPointer($0), isKey: false) }) {
            return done
        }
        var value = value
        value.withUTF8 { quoted(UnsafeRawBufferPointer($0), isKey: false) }
    }

    /// A string value given as a literal.
    @inlinable @inline(__always)
    public mutating func string(_ value: StaticString) {
        writePiece(maximum: value.utf8CodeUnitCount + 4) { $0.string(value) }
    }

    public mutating func string(bytes value: UnsafeRawBufferPointer) { quoted(value, isKey: false) }

    @inlinable @inline(__always)
    public mutating func integer(_ value: Int64) {
        writePiece(maximum: Cursor.integerMaximum) { $0.integer(value) }
    }

    /// A number as people read it: whole numbers without a fraction (`16`, `0.5`).
    public mutating func number(_ value: Double) {
        if value == value.rounded(), abs(value) < 1e15 { return integer(Int64(value)) }
        raw(String(value))
    }

    public mutating func boolean(_ value: Bool) {
        writePiece(maximum: 7) { $0.boolean(value) }
    }

    /// A value that is already JSON text.
    public mutating func raw(_ json: String) {
        if let done = json.utf8.withContiguousStorageIfAvailable({ raw(bytes: UnsafeRawBufferPointer($0)) }) { return done }
        var json = json
        json.withUTF8 { raw(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// A value that is already JSON, as bytes (a fragment kept from an earlier document).
    @inlinable @inline(__always)
    public mutating func raw(bytes json: UnsafeRawBufferPointer) {
        writePiece(maximum: json.count + 2) { $0.raw(bytes: json) }
    }

    /// A value that is already JSON, kept as bytes.
    @inlinable @inline(__always)
    public mutating func raw(json: [UInt8]) { json.withUnsafeBytes { raw(bytes: $0) } }

    /// A value of at most `maximum` bytes written by `body` straight into the buffer (a
    /// timestamp, a color); `body` returns how many it wrote. The caller writes valid JSON.
    public mutating func raw(maximum: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        writePiece(maximum: maximum + 2) { $0.raw(maximum: maximum, body) }
    }

    /// A timestamp's ISO-8601 form, a JSON string (`"2025-11-21T10:13:20.000Z"`).
    @inlinable @inline(__always)
    public mutating func timestamp(_ value: LiveTimestamp) {
        write(maximum: Cursor.timestampMaximum) { $0.timestamp(value) }
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
    /// them), in one run (see ``Cursor/object(parts:separatedBy:name:)``).
    public mutating func object(
        parts text: UnsafeRawBufferPointer, separatedBy separator: UInt8, name: (Int) -> StaticString
    ) {
        let escaping = Self.needsEscaping(text)
        var maximum = 4 + (escaping ? 6 : 1) * text.count
        var position = 0
        for index in 0...text.count where index == text.count || text[index] == separator {
            maximum += name(position).utf8CodeUnitCount + 8
            position += 1
        }
        writePiece(maximum: maximum) { $0.object(parts: text, separatedBy: separator, name: name) }
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

    /// A key (with `: ` after it) or a string value, in quotes, escaped where it must be:
    /// room for six bytes a byte only when it must.
    private mutating func quoted(_ value: UnsafeRawBufferPointer, isKey: Bool) {
        guard !Self.needsEscaping(value) else {
            return writePiece(maximum: Cursor.maximum(text: value.count)) { $0.escaped(value, isKey: isKey) }
        }
        writePiece(maximum: value.count + 6) { $0.unescaped(value, isKey: isKey) }
    }

    /// Whether any byte is a quote, a backslash or a control character: eight bytes a step
    /// (a word has a byte below 0x20, or equal to `"` or `\`, when the classic "has a zero
    /// byte" test finds one in it or in it XORed with that byte repeated; a byte of 0x80 or
    /// more can only make the test say yes, and the escaping path looks again byte by byte).
    @usableFromInline
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

    /// Writes `value`'s decimal digits at `at` (at most 20 and a sign); returns how many.
    @usableFromInline
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

    /// The second of the last timestamp written with a four-digit year, and its text up to
    /// the seconds (`YYYY-MM-DDTHH:MM:SS`, 19 bytes): the timestamps of a change, and those
    /// of the next changes a reused stream writes, mostly fall in one second, and then only
    /// the milliseconds are written anew.
    @usableFromInline
    struct LastSecond {
        @usableFromInline var second = Int64.min
        @usableFromInline var text: (UInt64, UInt64, UInt64) = (0, 0, 0)

        @inlinable
        init() {}
    }
}

extension JSONStream {
    /// Writes the pieces of a run into the room its stream took for them at once
    /// (``JSONStream/write(maximum:_:)``): the same pieces, separators included, as the
    /// stream's own writes, stored through a pointer with no capacity check each.
    ///
    /// The most a piece takes: 2 bytes for the separator when it is not the first of its
    /// container; a key its bytes and 4 (the quotes, `: `), a string its bytes and 2, each
    /// byte of them 6 when it may need escaping (`\u00XX`); an integer 20; a timestamp
    /// ``LiveTimestamp/maximumLength`` and 2; a bracket 1; raw JSON its bytes. The
    /// `maximum` functions give these with the separator.
    public struct Cursor {
        /// Where the next byte goes.
        @usableFromInline var at: UnsafeMutablePointer<UInt8>
        /// The end of the room taken: debug builds check every piece against it.
        @usableFromInline let end: UnsafeMutablePointer<UInt8>
        @usableFromInline var first: Bool
        @usableFromInline var lastSecond: LastSecond

        /// The most a member's key given as a literal takes.
        @inlinable
        public static func maximum(key: StaticString) -> Int { 2 + key.utf8CodeUnitCount + 4 }

        /// The most a key or a string value of `count` bytes given at run time takes, escaped.
        @inlinable
        public static func maximum(text count: Int) -> Int { 2 + 6 * count + 4 }

        /// The most an integer takes: a sign and 19 digits.
        @inlinable
        public static var integerMaximum: Int { 2 + 20 }

        /// The most a timestamp takes: its text in quotes.
        @inlinable
        public static var timestampMaximum: Int { 2 + LiveTimestamp.maximumLength + 2 }

        @inlinable
        init(_ start: UnsafeMutablePointer<UInt8>, maximum: Int, first: Bool, lastSecond: LastSecond) {
            at = start
            end = start + maximum
            self.first = first
            self.lastSecond = lastSecond
        }

        // MARK: Containers

        @inlinable @inline(__always)
        public mutating func beginObject() { open(UInt8(ascii: "{")) }

        @inlinable @inline(__always)
        public mutating func endObject() { close(UInt8(ascii: "}")) }

        @inlinable @inline(__always)
        public mutating func beginArray() { open(UInt8(ascii: "[")) }

        @inlinable @inline(__always)
        public mutating func endArray() { close(UInt8(ascii: "]")) }

        /// A member's key given as a literal (``JSONStream/key(_:)``).
        @inlinable @inline(__always)
        public mutating func key(_ key: StaticString) { literal(key, isKey: true) }

        /// A member's key given as bytes (escaped where it must be).
        @inlinable @inline(__always)
        public mutating func key(bytes key: UnsafeRawBufferPointer) { quoted(key, isKey: true) }

        /// A member's key given at run time (escaped where it must be).
        @inlinable @inline(__always)
        public mutating func key(text key: String) { quoted(text: key, isKey: true) }

        // MARK: Values

        @inlinable @inline(__always)
        public mutating func string(_ value: StaticString) { literal(value, isKey: false) }

        @inlinable @inline(__always)
        public mutating func string(bytes value: UnsafeRawBufferPointer) { quoted(value, isKey: false) }

        @inlinable @inline(__always)
        public mutating func string(_ value: String) { quoted(text: value, isKey: false) }

        /// A key or a string value given at run time, its bytes read in place.
        @inlinable @inline(__always)
        mutating func quoted(text: String, isKey: Bool) {
            if text.utf8.withContiguousStorageIfAvailable({ quoted(UnsafeRawBufferPointer($0), isKey: isKey) }) != nil {
                return
            }
            var text = text
            text.withUTF8 { quoted(UnsafeRawBufferPointer($0), isKey: isKey) }
        }

        @inlinable @inline(__always)
        public mutating func integer(_ value: Int64) {
            let start = next(Self.integerMaximum - 2)
            at = start + JSONStream.digits(value, at: start)
            first = false
        }

        @inlinable @inline(__always)
        public mutating func boolean(_ value: Bool) {
            if value { fragment("true") } else { fragment("false") }
        }

        /// A value that is already JSON, as bytes.
        @inlinable @inline(__always)
        public mutating func raw(bytes json: UnsafeRawBufferPointer) {
            let start = next(json.count)
            if let source = json.baseAddress, json.count > 0 {
                start.update(from: source.assumingMemoryBound(to: UInt8.self), count: json.count)
            }
            at = start + json.count
            first = false
        }

        /// A value of at most `maximum` bytes written by `body` at the pointer it is given;
        /// `body` returns how many it wrote.
        @inlinable
        public mutating func raw(maximum: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
            let start = next(maximum)
            let written = body(start)
            precondition(written <= maximum)
            at = start + written
            first = false
        }

        /// A timestamp's ISO-8601 form, a JSON string (`"2025-11-21T10:13:20.000Z"`). Within the
        /// second of the last one, only the milliseconds are written anew.
        @inlinable @inline(__always)
        public mutating func timestamp(_ value: LiveTimestamp) {
            let start = next(Self.timestampMaximum - 2)
            let millis = value.millisecondsSince1970
            let second = millis >= 0 ? millis / 1000 : -((999 - millis) / 1000)
            guard second == lastSecond.second else { return timestamp(value, inNewSecond: second, at: start) }
            start[0] = UInt8(ascii: "\"")
            var text = lastSecond.text
            Swift.withUnsafeBytes(of: &text) {
                (start + 1).update(from: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: 19)
            }
            var fraction = millis - second * 1000
            start[20] = UInt8(ascii: ".")
            for index in stride(from: 23, through: 21, by: -1) {
                start[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: fraction % 10)
                fraction /= 10
            }
            start[24] = UInt8(ascii: "Z")
            start[25] = UInt8(ascii: "\"")
            at = start + 26
            first = false
        }

        /// ``timestamp(_:)`` in a second other than the last one's: written whole, and its
        /// second kept when its year has four digits.
        @usableFromInline
        mutating func timestamp(_ value: LiveTimestamp, inNewSecond second: Int64, at start: UnsafeMutablePointer<UInt8>) {
            start[0] = UInt8(ascii: "\"")
            let count = value.write(into: start + 1)
            start[count + 1] = UInt8(ascii: "\"")
            at = start + count + 2
            first = false
            if count == 24 {
                lastSecond.second = second
                var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
                Swift.withUnsafeMutableBytes(of: &text) { $0.baseAddress!.copyMemory(from: start + 1, byteCount: 19) }
                lastSecond.text = text
            }
        }

        // MARK: Members

        /// An object with a string member for each part of `text` between `separator` bytes,
        /// named in order by `name` (an address's components, as ``LocationAddress`` writes
        /// them). It takes at most 2 bytes for its separator and 2 for its braces, and for
        /// each part its name and 8, and its bytes, six times when the text needs escaping.
        /// When no part does (the usual case) the object is stores through the pointer,
        /// instead of an escape scan a member.
        public mutating func object(
            parts text: UnsafeRawBufferPointer, separatedBy separator: UInt8, name: (Int) -> StaticString
        ) {
            let count = text.count
            guard let source = text.baseAddress?.assumingMemoryBound(to: UInt8.self), !JSONStream.needsEscaping(text) else {
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
            // `{}`, and a part's `"name": "value"` with `, ` before all but the first.
            var to = next(2 + count)
            to.pointee = UInt8(ascii: "{")
            to += 1
            var partStart = 0
            var position = 0
            var index = 0
            while true {
                if index == count || source[index] == separator {
                    if position > 0 {
                        to[0] = UInt8(ascii: ",")
                        to[1] = UInt8(ascii: " ")
                        to += 2
                    }
                    let key = name(position)
                    assert(end - to >= key.utf8CodeUnitCount + 6 + index - partStart + 2, "an object of parts wrote past its room")
                    to.pointee = UInt8(ascii: "\"")
                    (to + 1).update(from: key.utf8Start, count: key.utf8CodeUnitCount)
                    to += key.utf8CodeUnitCount + 1
                    to[0] = UInt8(ascii: "\"")
                    to[1] = UInt8(ascii: ":")
                    to[2] = UInt8(ascii: " ")
                    to[3] = UInt8(ascii: "\"")
                    to += 4
                    to.update(from: source + partStart, count: index - partStart)
                    to += index - partStart
                    to.pointee = UInt8(ascii: "\"")
                    to += 1
                    if index == count { break }
                    partStart = index + 1
                    position += 1
                }
                index += 1
            }
            to.pointee = UInt8(ascii: "}")
            at = to + 1
            first = false
        }

        // MARK: Bytes

        /// Where a piece of at most `maximum` bytes goes, after the separator when the
        /// container has a member before it (written here).
        @inlinable @inline(__always)
        mutating func next(_ maximum: Int) -> UnsafeMutablePointer<UInt8> {
            if !first {
                at[0] = UInt8(ascii: ",")
                at[1] = UInt8(ascii: " ")
                at += 2
            }
            assert(end - at >= maximum, "a run of JSON wrote past the room it took")
            return at
        }

        @inlinable @inline(__always)
        mutating func open(_ bracket: UInt8) {
            next(1).pointee = bracket
            at += 1
            first = true
        }

        @inlinable @inline(__always)
        mutating func close(_ bracket: UInt8) {
            // A closing bracket never takes a separator.
            assert(end - at >= 1, "a run of JSON wrote past the room it took")
            at.pointee = bracket
            at += 1
            first = false
        }

        /// A literal value (`true`, `false`).
        @inlinable @inline(__always)
        mutating func fragment(_ text: StaticString) {
            let start = next(text.utf8CodeUnitCount)
            start.update(from: text.utf8Start, count: text.utf8CodeUnitCount)
            at = start + text.utf8CodeUnitCount
            first = false
        }

        /// A literal of the code's own (a key such as `"version"`) in quotes: it needs no
        /// escaping, so none is looked for (a debug build checks).
        @inlinable @inline(__always)
        mutating func literal(_ literal: StaticString, isKey: Bool) {
            let bytes = UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
            assert(!JSONStream.needsEscaping(bytes), "the literal \(literal) would need escaping")
            unescaped(bytes, isKey: isKey)
        }

        /// A key (with `: ` after it) or a string value, in quotes, escaped where it must be.
        @inlinable @inline(__always)
        mutating func quoted(_ value: UnsafeRawBufferPointer, isKey: Bool) {
            guard !JSONStream.needsEscaping(value) else { return escaped(value, isKey: isKey) }
            unescaped(value, isKey: isKey)
        }

        /// ``quoted(_:isKey:)`` of bytes that need no escaping.
        @inlinable @inline(__always)
        mutating func unescaped(_ value: UnsafeRawBufferPointer, isKey: Bool) {
            let length = value.count
            let start = next(isKey ? length + 4 : length + 2)
            start[0] = UInt8(ascii: "\"")
            if length > 0 { (start + 1).update(from: value.baseAddress!.assumingMemoryBound(to: UInt8.self), count: length) }
            start[length + 1] = UInt8(ascii: "\"")
            if isKey {
                start[length + 2] = UInt8(ascii: ":")
                start[length + 3] = UInt8(ascii: " ")
                at = start + length + 4
            } else {
                at = start + length + 2
            }
            // After a key its value takes no separator; after a value the next member does.
            first = isKey
        }

        /// The slow path of ``quoted(_:isKey:)``: byte by byte, with escapes.
        @usableFromInline
        mutating func escaped(_ value: UnsafeRawBufferPointer, isKey: Bool) {
            // At most six bytes for each (`\u00XX`), the quotes and `: `.
            var to = next(value.count * 6 + 4)
            to.pointee = UInt8(ascii: "\"")
            to += 1
            for byte in value {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    to[0] = UInt8(ascii: "\\")
                    to[1] = byte
                    to += 2
                case 0x0A, 0x0D, 0x09:
                    to[0] = UInt8(ascii: "\\")
                    to[1] = byte == 0x0A ? UInt8(ascii: "n") : byte == 0x0D ? UInt8(ascii: "r") : UInt8(ascii: "t")
                    to += 2
                case 0..<0x20:
                    func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }
                    to[0] = UInt8(ascii: "\\")
                    to[1] = UInt8(ascii: "u")
                    to[2] = UInt8(ascii: "0")
                    to[3] = UInt8(ascii: "0")
                    to[4] = hex(byte >> 4)
                    to[5] = hex(byte & 15)
                    to += 6
                default:
                    to.pointee = byte
                    to += 1
                }
            }
            to.pointee = UInt8(ascii: "\"")
            to += 1
            if isKey {
                to[0] = UInt8(ascii: ":")
                to[1] = UInt8(ascii: " ")
                to += 2
            }
            at = to
            first = isKey
        }
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
