/// A strict, allocation-light JSON reader over UTF-8 bytes (RFC 8259).
///
/// It reads just what the live-update decoder asks for and skips (while still checking)
/// everything else, so a typical update is decoded without building any intermediate tree.
struct JSONScanner {
    /// What went wrong, and at which byte (counted from 0).
    enum Failure: Error, Equatable {
        case unexpectedEnd
        case unexpected(UInt8, at: Int)
        case badEscape(at: Int)
        case controlCharacter(at: Int)
        case invalidUTF8(at: Int)
        case badNumber(at: Int)
        case tooDeep(at: Int)
        /// The reader stopped on purpose (a bound of its own was passed).
        case stopped

        var description: String {
            switch self {
            case .unexpectedEnd: return "it ends too early"
            case .unexpected(let byte, let at): return "unexpected \(describe(byte)) at byte \(at)"
            case .badEscape(let at): return "bad escape sequence at byte \(at)"
            case .controlCharacter(let at): return "unescaped control character at byte \(at)"
            case .invalidUTF8(let at): return "invalid UTF-8 in a string starting at byte \(at)"
            case .badNumber(let at): return "malformed number at byte \(at)"
            case .tooDeep(let at): return "nesting deeper than 64 levels at byte \(at)"
            case .stopped: return "stopped"
            }
        }

        private func describe(_ byte: UInt8) -> String {
            if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
            return "byte 0x" + String(byte, radix: 16, uppercase: true)
        }
    }

    /// The kinds of JSON value, for error messages.
    enum Kind: String {
        case object = "an object"
        case array = "an array"
        case string = "a string"
        case number = "a number"
        case boolean = "a boolean"
        case null = "null"
    }

    let bytes: UnsafeRawBufferPointer
    private(set) var position = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { position >= bytes.count }

    @inline(__always)
    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    /// The kind of the next value, after whitespace.
    @inline(__always)
    mutating func peekKind() throws(Failure) -> Kind {
        skipWhitespace()
        guard position < bytes.count else { throw .unexpectedEnd }
        switch bytes[position] {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .boolean
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        case let byte: throw .unexpected(byte, at: position)
        }
    }

    /// Consumes `byte` after whitespace.
    @inline(__always)
    mutating func expect(_ byte: UInt8) throws(Failure) {
        skipWhitespace()
        guard position < bytes.count else { throw .unexpectedEnd }
        guard bytes[position] == byte else { throw .unexpected(bytes[position], at: position) }
        position += 1
    }

    /// Consumes `byte` after whitespace if it is next.
    @inline(__always)
    mutating func consume(_ byte: UInt8) -> Bool {
        skipWhitespace()
        if position < bytes.count && bytes[position] == byte {
            position += 1
            return true
        }
        return false
    }

    /// Iterates the members of an object; `body` must consume each member's value. Every
    /// key is checked (its escapes and UTF-8), whether or not `body` reads it.
    mutating func readObject(_ body: (inout JSONScanner, UnsafeRawBufferPointer, Bool) throws(Failure) -> Void)
        throws(Failure)
    {
        try expect(UInt8(ascii: "{"))
        if consume(UInt8(ascii: "}")) { return }
        while true {
            skipWhitespace()
            let keyStart = position
            let (key, escaped, ascii) = try readRawString()
            if escaped {
                _ = try Self.unescape(key, at: keyStart + 1)
            } else if !ascii, String(validating: key, as: UTF8.self) == nil {
                throw .invalidUTF8(at: keyStart)
            }
            try expect(UInt8(ascii: ":"))
            try body(&self, key, escaped)
            if consume(UInt8(ascii: ",")) { continue }
            try expect(UInt8(ascii: "}"))
            return
        }
    }

    /// Reads a string; the fast path (no escapes) validates UTF-8 and copies once.
    @inline(__always)
    mutating func readString() throws(Failure) -> String {
        skipWhitespace()
        let start = position
        let (raw, escaped, ascii) = try readRawString()
        if !escaped {
            guard let string = makeString(raw, validated: ascii) else { throw .invalidUTF8(at: start) }
            return string
        }
        // Offsets inside the string count from its first byte after the quote.
        return try Self.unescape(raw, at: start + 1)
    }

    /// Reads a string's raw bytes (between the quotes, escapes untouched).
    /// - Returns: the bytes, whether they contain escapes, and whether they are all ASCII
    ///   (seen on the way: ASCII bytes without escapes need no UTF-8 check).
    @inline(__always)
    mutating func readRawString() throws(Failure) -> (bytes: UnsafeRawBufferPointer, escaped: Bool, ascii: Bool) {
        guard position < bytes.count else { throw .unexpectedEnd }
        guard bytes[position] == UInt8(ascii: "\"") else { throw .unexpected(bytes[position], at: position) }
        position += 1
        let start = position
        var escaped = false
        // Every byte read, OR-ed together: a high bit set means a byte above 127.
        var highBits: UInt64 = 0
        while position < bytes.count {
            // Eight bytes at a time while none of them is a quote, a backslash or a
            // control character (the tests are the usual "has a zero byte" tricks), then
            // straight to the first one that is: the lowest flagged byte of such a test is
            // always a true match (a borrow only runs upwards from one), and the word was
            // loaded little-endian, so its lowest byte comes first.
            while position + 8 <= bytes.count {
                let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                let ones: UInt64 = 0x0101_0101_0101_0101
                let highs: UInt64 = 0x8080_8080_8080_8080
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special =
                    (((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)) & highs
                if special != 0 {
                    let before = special.trailingZeroBitCount >> 3
                    // Only the bytes before the flagged one are the string's so far.
                    highBits |= word & ((1 &<< UInt64(before * 8)) &- 1)
                    position += before
                    break
                }
                highBits |= word
                position += 8
            }
            guard position < bytes.count else { break }
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
                position += 1
                return (raw, escaped, highBits & 0x8080_8080_8080_8080 == 0)
            }
            if byte == UInt8(ascii: "\\") {
                escaped = true
                position += 2
                continue
            }
            if byte < 0x20 { throw .controlCharacter(at: position) }
            highBits |= UInt64(byte)
            position += 1
        }
        throw .unexpectedEnd
    }

    /// Reads a number and returns its literal text, checked against JSON's grammar.
    mutating func readNumber() throws(Failure) -> UnsafeRawBufferPointer {
        skipWhitespace()
        let start = position
        func isDigit(_ index: Int) -> Bool {
            index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9")
        }
        if position < bytes.count && bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard isDigit(position) else { throw .badNumber(at: start) }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while isDigit(position) { position += 1 }
        }
        if position < bytes.count && bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard isDigit(position) else { throw .badNumber(at: start) }
            while isDigit(position) { position += 1 }
        }
        if position < bytes.count && (bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")) {
            position += 1
            if position < bytes.count && (bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")) {
                position += 1
            }
            guard isDigit(position) else { throw .badNumber(at: start) }
            while isDigit(position) { position += 1 }
        }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<position])
    }

    /// Reads `true` or `false`.
    mutating func readBoolean() throws(Failure) -> Bool {
        skipWhitespace()
        if try readLiteral("true") { return true }
        if try readLiteral("false") { return false }
        guard position < bytes.count else { throw .unexpectedEnd }
        throw .unexpected(bytes[position], at: position)
    }

    /// Reads `null`.
    mutating func readNull() throws(Failure) {
        skipWhitespace()
        if try readLiteral("null") { return }
        guard position < bytes.count else { throw .unexpectedEnd }
        throw .unexpected(bytes[position], at: position)
    }

    private mutating func readLiteral(_ literal: StaticString) throws(Failure) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard position < bytes.count, bytes[position] == literal.utf8Start.pointee else { return false }
        for offset in 0..<count {
            guard position + offset < bytes.count else { throw .unexpectedEnd }
            guard bytes[position + offset] == literal.utf8Start[offset] else {
                throw .unexpected(bytes[position + offset], at: position + offset)
            }
        }
        position += count
        return true
    }

    /// Skips one value of any kind, checking it as it goes.
    mutating func skipValue(depth: Int = 0) throws(Failure) {
        if depth > 64 { throw .tooDeep(at: position) }
        switch try peekKind() {
        case .object:
            try readObject { (scanner: inout JSONScanner, _, _) throws(Failure) in
                try scanner.skipValue(depth: depth + 1)
            }
        case .array:
            try expect(UInt8(ascii: "["))
            if consume(UInt8(ascii: "]")) { return }
            while true {
                try skipValue(depth: depth + 1)
                if consume(UInt8(ascii: ",")) { continue }
                try expect(UInt8(ascii: "]"))
                return
            }
        case .string:
            _ = try readString()
        case .number:
            _ = try readNumber()
        case .boolean:
            _ = try readBoolean()
        case .null:
            try readNull()
        }
    }

    /// Checks that only whitespace is left.
    mutating func expectEnd() throws(Failure) {
        skipWhitespace()
        if position < bytes.count { throw .unexpected(bytes[position], at: position) }
    }

    static func unescape(_ raw: UnsafeRawBufferPointer, at start: Int) throws(Failure) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var index = 0
        func hex4(_ at: Int) throws(Failure) -> UInt32 {
            guard at + 4 <= raw.count else { throw .badEscape(at: start + at) }
            var value: UInt32 = 0
            for offset in 0..<4 {
                let byte = raw[at + offset]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw .badEscape(at: start + at)
                }
                value = value << 4 | digit
            }
            return value
        }
        while index < raw.count {
            let byte = raw[index]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                index += 1
                continue
            }
            guard index + 1 < raw.count else { throw .badEscape(at: start + index) }
            let escape = raw[index + 1]
            index += 2
            switch escape {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4(index)
                index += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard index + 6 <= raw.count, raw[index] == UInt8(ascii: "\\"), raw[index + 1] == UInt8(ascii: "u")
                    else { throw .badEscape(at: start + index) }
                    let low = try hex4(index + 2)
                    guard (0xDC00..<0xE000).contains(low) else { throw .badEscape(at: start + index) }
                    index += 6
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw .badEscape(at: start + index - 6)
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw .badEscape(at: start + index - 6) }
                out.append(contentsOf: UTF8.encode(unicode)!)
            default:
                throw .badEscape(at: start + index - 2)
            }
        }
        guard let string = String(validating: out, as: UTF8.self) else { throw .invalidUTF8(at: start - 1) }
        return string
    }
}

/// A string from UTF-8 bytes, or `nil` if they are not valid UTF-8. `validated`: the bytes
/// are known to be valid (the scanner saw that they are ASCII as it read them, the usual
/// case, or checked them), and are not checked again.
@inline(__always)
func makeString(_ bytes: UnsafeRawBufferPointer, validated: Bool) -> String? {
    guard validated else { return String(validating: bytes, as: UTF8.self) }
    // Filled in place (a short one inline): fewer steps than `String(decoding:as:)`, whose
    // repairing path scans the bytes again.
    return String(unsafeUninitializedCapacity: bytes.count) { buffer in
        UnsafeMutableRawBufferPointer(buffer).copyMemory(from: bytes)
        return bytes.count
    }
}

/// The byte ranges of the values of a JSON object's top-level members named `first` and
/// `second` (as they are written, unescaped keys only); `nil` when the bytes are not one
/// object. Nothing is allocated: a convergence reads a million retained styles this way.
package func topLevelMembers(
    _ json: UnsafeRawBufferPointer, _ first: StaticString, _ second: StaticString
) -> (Range<Int>?, Range<Int>?)? {
    var scanner = JSONScanner(json)
    var found: (Range<Int>?, Range<Int>?) = (nil, nil)
    func named(_ name: StaticString, _ key: UnsafeRawBufferPointer) -> Bool {
        name.utf8CodeUnitCount == key.count && bytesEqual(name.utf8Start, key.baseAddress, key.count)
    }
    do throws(JSONScanner.Failure) {
        try scanner.readObject { scanner, key, escaped throws(JSONScanner.Failure) in
            scanner.skipWhitespace()
            let start = scanner.position
            try scanner.skipValue()
            guard !escaped else { return }
            if named(first, key) { found.0 = start..<scanner.position } else if named(second, key) { found.1 = start..<scanner.position }
        }
        try scanner.expectEnd()
    } catch {
        return nil
    }
    return found
}
