import DisplayRules
import LiveState
import LiveTopics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A compact binary form of a ``LocationRecord`` for the SQLite file: varints and
/// length-prefixed UTF-8, fields in a fixed order, a format byte first so that a later
/// format can still read this one.
public enum RecordCodec {
    static let format: UInt8 = 1

    public struct DecodingError: Error, CustomStringConvertible {
        var reason: String
        public var description: String { "a stored location cannot be read: \(reason)" }
    }

    // MARK: Encoding

    public static func encode(_ record: LocationRecord) -> [UInt8] {
        var out = ByteWriter(capacity: 256)
        encode(record, into: &out)
        return out.bytes
    }

    /// Writes a record's bytes into `out`, replacing what it held (a writer of many records
    /// reuses one buffer), or after it with `appending`.
    public static func encode(_ record: LocationRecord, into out: inout ByteWriter, appending: Bool = false) {
        if !appending { out.reset() }
        encode(address: record.address, values: record.values, published: record.published, version: record.version, into: &out)
    }

    /// Writes the bytes of a record of these parts after what `out` holds.
    static func encode(
        address: LocationAddress, values: [DomainValue], published: DerivedStyle?, version: UInt64, into out: inout ByteWriter
    ) {
        encode(address: address, values: values, version: version, into: &out)
        encode(published: published, into: &out)
    }

    /// Writes a record's first part, all but its published style, after what `out` holds.
    static func encode(address: LocationAddress, values: [DomainValue], version: UInt64, into out: inout ByteWriter) {
        out.append(format)
        // The six components, each as a string (the path cut at its first five slashes),
        // written in one piece of room: a length takes at most three bytes (a path is
        // shorter than a topic's 65,535).
        address.withPathBytes { path in
            let at = out.room(path.count + 18)
            var written = 0
            var start = 0
            func component(to end: Int) {
                written += ByteWriter.putVarint(UInt64(end - start), at: at + written)
                if end > start { (at + written).update(from: path.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, count: end - start) }
                written += end - start
            }
            if let base = path.baseAddress {
                for _ in 0..<5 {
                    guard let slash = memchr(base + start, Int32(UInt8(ascii: "/")), path.count - start) else { break }
                    let end = base.distance(to: UnsafeRawPointer(slash))
                    component(to: end)
                    start = end + 1
                }
            }
            component(to: path.count)
            out.advance(written)
        }
        out.appendVarint(version)
        out.appendVarint(UInt64(values.count))
        for value in values {
            string(value.domain, &out)
            out.appendVarint(zigzag(value.timestamp.millisecondsSince1970))
            out.append(value.stale ? 1 : 0)
            out.appendVarint(UInt64(value.properties.count))
            for property in value.properties {
                string(property.name, &out)
                string(property.value, &out)
            }
        }
    }

    /// Writes a record's last part, its published style (the same bytes for the same style),
    /// after what `out` holds.
    static func encode(published: DerivedStyle?, into out: inout ByteWriter) {
        if let published {
            out.append(1)
            style(published.style, &out)
            out.appendVarint(UInt64(published.rules.count))
            for rule in published.rules { string(rule, &out) }
            optionalString(published.legendState, &out)
        } else {
            out.append(0)
        }
    }

    /// The set fields' stored ids as bits, then each set field's value in stored-id order
    /// (see ``StyleField/definition``).
    private static func style(_ style: Style, _ out: inout ByteWriter) {
        out.appendVarint(style.setFields.bits)
        for field in StyleField.inStoredOrder where style.setFields.contains(field) {
            switch style[field] {
            case nil: break
            case .flag(let value): out.append(value ? 1 : 0)
            case .number(let value): double(value, &out)
            case .integer(let value): out.appendVarint(zigzag(Int64(value)))
            case .text(let value): string(value, &out)
            case .color(let value): out.appendVarint(UInt64(value.rgb))
            case .badge(let badge):
                optionalString(badge.text, &out)
                out.appendVarint(badge.textColor.map { UInt64($0.rgb) + 1 } ?? 0)
                out.appendVarint(badge.backgroundColor.map { UInt64($0.rgb) + 1 } ?? 0)
            }
        }
    }

    private static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }

    private static func string(_ value: String, _ out: inout ByteWriter) {
        out.appendVarint(UInt64(value.utf8.count))
        out.append(value)
    }

    private static func optionalString(_ value: String?, _ out: inout ByteWriter) {
        if let value {
            out.append(1)
            string(value, &out)
        } else {
            out.append(0)
        }
    }

    private static func double(_ value: Double, _ out: inout ByteWriter) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { out.append($0) }
    }

    // MARK: Decoding

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(DecodingError) -> LocationRecord {
        var reader = Reader(bytes: bytes)
        let (address, version, values) = try head(&reader)
        var published: DerivedStyle?
        if try reader.byte() == 1 { published = try derivedStyle(&reader) }
        return LocationRecord(address: address, values: values, published: published, version: version)
    }

    /// A record read straight into what a restore puts back (``LiveStore/prepare(address:values:version:row:published:ruleEngine:)``),
    /// with no ``LocationRecord`` in between. With `sameRules` (the file's styles were
    /// derived by these very rules) a published style is read no further than its key
    /// needs: its label, badge text and visibility, and its rule names; and a published
    /// style stored in the same bytes as one of the last ones read is not read at all (see
    /// ``PreparationCache``). A style whose names these rules do not have is read whole, as
    /// ``decode(_:)`` reads it.
    package static func prepare(
        _ bytes: UnsafeRawBufferPointer, row: Int64, ruleEngine: RuleEngine, sameRules: Bool, cache: inout PreparationCache
    ) throws(DecodingError) -> LiveStore.PreparedLocation {
        var reader = Reader(bytes: bytes)
        let (address, version, values) = try head(&reader)
        var published = PublishedStyle.none
        if try reader.byte() == 1 {
            let start = reader.position
            // A record's published style is its last part: the rest of its bytes.
            let stored = UnsafeRawBufferPointer(rebasing: bytes[start...])
            if sameRules, let key = cache.key(stored: stored) {
                published = .key(key)
            } else if sameRules, let parts = try trustedKey(&reader, ruleEngine: ruleEngine, cache: &cache) {
                let key = ruleEngine.styleKey(
                    trusting: parts.selection, label: parts.label, badgeText: parts.badgeText, invisible: parts.invisible, at: address)
                // An invisible style's key depends on the address (its layer, see
                // RuleEngine.styleKey(trusting:label:badgeText:invisible:at:)): not kept for others.
                if !parts.invisible { cache.keep(key, stored: stored) }
                published = .key(key)
            } else {
                reader.position = start
                published = PublishedStyle(try derivedStyle(&reader), at: address, ruleEngine: ruleEngine, trusted: sameRules)
            }
        }
        return LiveStore.prepare(address: address, values: values, version: version, row: row, published: published, ruleEngine: ruleEngine)
    }

    /// What a restore's reading thread keeps from one record to the next: the last few lists
    /// of rule names (their bytes as stored) with the selections they map to, the latest
    /// first; and the keys of recently read published styles, by their stored bytes.
    ///
    /// Most records of a venue share their published style's bytes with many others (the
    /// same rules and label: an occupied room showing 3), and reading a style into its key
    /// is a large part of the reading thread's work, the thread that sets a restore's pace. A style whose bytes are those of a kept one has its key,
    /// found by a hash of the bytes and one comparison. Only inline keys are kept
    /// (``StyleKey/isInline``): the copies handed out share no storage, so the thread that
    /// fills the store never changes a count of references this thread changes too.
    package struct PreparationCache {
        var lists: [(bytes: [UInt8], selection: RuleSelection?)] = []
        static let keptLists = 8

        /// Direct-mapped: slot `i` holds the bytes of one published style (at most
        /// `longest`) at `i * longest` in `keptBytes`, their count (-1: empty), and its key.
        private var keptBytes: [UInt8]
        private var keptCounts: [Int]
        private var keptKeys: [StyleKey?]
        static let slots = 64
        static let longest = 120
        /// Styles whose key came from the kept ones.
        package private(set) var hits = 0

        package init() {
            keptBytes = Array(repeating: 0, count: Self.slots * Self.longest)
            keptCounts = Array(repeating: -1, count: Self.slots)
            keptKeys = Array(repeating: nil, count: Self.slots)
        }

        /// The slot of some stored bytes: the top bits of their hash (the one the store's
        /// table of locations uses).
        private static func slot(_ stored: UnsafeRawBufferPointer) -> Int {
            Int(truncatingIfNeeded: LocationTable.hash(stored, continuing: 0) >> 58)
        }

        /// The kept key of a published style stored as `stored`, if it is kept.
        mutating func key(stored: UnsafeRawBufferPointer) -> StyleKey? {
            guard stored.count <= Self.longest else { return nil }
            let slot = Self.slot(stored)
            guard keptCounts[slot] == stored.count,
                keptBytes.withUnsafeBytes({ kept in
                    memcmp(kept.baseAddress! + slot * Self.longest, stored.baseAddress!, stored.count) == 0
                })
            else { return nil }
            hits += 1
            return keptKeys[slot]
        }

        /// Keeps the key of a published style stored as `stored` (when inline and short).
        mutating func keep(_ key: StyleKey, stored: UnsafeRawBufferPointer) {
            guard stored.count <= Self.longest, key.isInline else { return }
            let slot = Self.slot(stored)
            keptBytes.withUnsafeMutableBytes { kept in
                if let source = stored.baseAddress { (kept.baseAddress! + slot * Self.longest).copyMemory(from: source, byteCount: stored.count) }
            }
            keptCounts[slot] = stored.count
            keptKeys[slot] = key
        }

        /// The selection of the names stored as `bytes`, read with `read` when they are not
        /// among the kept ones.
        mutating func selection(
            _ bytes: UnsafeRawBufferPointer, _ read: () throws(DecodingError) -> RuleSelection?
        ) throws(DecodingError) -> RuleSelection? {
            if let index = lists.firstIndex(where: { $0.bytes.withUnsafeBytes { $0.elementsEqual(bytes) } }) {
                if index > 0 { lists.swapAt(0, index) }
                return lists[0].selection
            }
            let selection = try read()
            if lists.count == Self.keptLists { lists.removeLast() }
            lists.insert((Array(bytes), selection), at: 0)
            return selection
        }
    }

    /// The fields of a stored style that its key is made of.
    private static let keyFields: StyleFieldSet = {
        var fields = StyleFieldSet()
        for field in [StyleField.label, .badge, .visible] { fields.insert(field) }
        return fields
    }()

    /// Reads a published style (style, rule names, legend state) into what its key under
    /// rules that derived it is made of (see ``RuleEngine/styleKey(trusting:label:badgeText:invisible:at:)``);
    /// `nil` when its names do not map onto these rules.
    private static func trustedKey(
        _ reader: inout Reader, ruleEngine: RuleEngine, cache: inout PreparationCache
    ) throws(DecodingError) -> (selection: RuleSelection, label: String?, badgeText: String?, invisible: Bool)? {
        let style = try decodeStyle(&reader, keeping: keyFields)
        let namesStart = reader.position
        let count = try reader.count()
        for _ in 0..<count { try reader.skipString() }
        let stored = UnsafeRawBufferPointer(rebasing: reader.bytes[namesStart..<reader.position])
        let selection = try cache.selection(stored) { () throws(DecodingError) in
            var decoded = Reader(bytes: stored)
            var list: [String] = []
            for _ in 0..<(try decoded.count()) { list.append(try decoded.string()) }
            return ruleEngine.selection(named: list)
        }
        try reader.skipOptionalString()
        guard let selection else { return nil }
        return (selection, style[text: .label], style[badge: .badge]?.text, style[flag: .visible] == false)
    }

    /// The parts of a record before its published style: address, version and values.
    private static func head(_ reader: inout Reader) throws(DecodingError) -> (LocationAddress, UInt64, [DomainValue]) {
        guard try reader.byte() == format else { throw DecodingError(reason: "unknown format") }
        let address = try reader.address()
        let version = try reader.varint()
        let valueCount = try reader.count()
        var values: [DomainValue] = []
        values.reserveCapacity(valueCount)
        for _ in 0..<valueCount {
            let domain = try reader.string()
            let timestamp = LiveTimestamp(millisecondsSince1970: unzigzag(try reader.varint()))
            let stale = try reader.byte() == 1
            let propertyCount = try reader.count()
            var properties: [LiveProperties.Property] = []
            properties.reserveCapacity(propertyCount)
            for _ in 0..<propertyCount {
                let name = try reader.string()
                properties.append(LiveProperties.Property(name: name, value: try reader.string()))
            }
            // Written from a LiveProperties, so the names are distinct.
            values.append(DomainValue(domain: domain, properties: LiveProperties(distinct: properties), timestamp: timestamp, stale: stale))
        }
        return (address, version, values)
    }

    /// A published style as stored: the style, its rule names and its legend state.
    private static func derivedStyle(_ reader: inout Reader) throws(DecodingError) -> DerivedStyle {
        let style = try decodeStyle(&reader)
        var rules: [String] = []
        for _ in 0..<(try reader.count()) { rules.append(try reader.string()) }
        return DerivedStyle(style: style, rules: rules, legendState: try reader.optionalString())
    }

    /// A stored style, with the values of the fields in `kept` only (the others are read
    /// past, checked as much as when they are kept).
    private static func decodeStyle(_ reader: inout Reader, keeping kept: StyleFieldSet? = nil) throws(DecodingError) -> Style {
        let fields = StyleFieldSet(bits: try reader.varint())
        var style = Style()
        // The set bits, lowest first: the fields in stored-id order.
        var remaining = fields.bits
        while remaining != 0 {
            guard let field = StyleField.withStoredID(remaining.trailingZeroBitCount) else {
                let unknown = (0..<64).filter { fields.bits & (1 << UInt64($0)) != 0 && StyleField.withStoredID($0) == nil }
                throw DecodingError(reason: "a style has fields this version does not know (stored ids \(unknown))")
            }
            remaining &= remaining - 1
            let keep = kept?.contains(field) ?? true
            switch field.kind {
            case .flag:
                let value = try reader.byte() == 1
                if keep { style[field] = .flag(value) }
            case .number:
                let value = try reader.double()
                if keep { style[field] = .number(value) }
            case .integer:
                let value = try reader.varint()
                if keep { style[field] = .integer(Int(truncatingIfNeeded: unzigzag(value))) }
            case .text, .name, .template:
                if keep { style[field] = .text(try reader.string()) } else { try reader.skipString() }
            case .color:
                let value = try reader.varint()
                if keep { style[field] = .color(Color(rgb: UInt32(truncatingIfNeeded: value))) }
            case .badge:
                var text: String?
                if keep { text = try reader.optionalString() } else { try reader.skipOptionalString() }
                let textColor = try reader.varint()
                let backgroundColor = try reader.varint()
                if keep {
                    style[field] = .badge(
                        Badge(
                            text: text, textColor: textColor == 0 ? nil : Color(rgb: UInt32(truncatingIfNeeded: textColor - 1)),
                            backgroundColor: backgroundColor == 0 ? nil : Color(rgb: UInt32(truncatingIfNeeded: backgroundColor - 1))))
                }
            }
        }
        return style
    }

    private static func unzigzag(_ value: UInt64) -> Int64 { Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1) }

    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        mutating func byte() throws(DecodingError) -> UInt8 {
            guard position < bytes.count else { throw DecodingError(reason: "it ends too early") }
            defer { position += 1 }
            return bytes[position]
        }

        @inline(__always)
        mutating func varint() throws(DecodingError) -> UInt64 {
            // Most are one byte (counts, lengths, flags' bits).
            if position < bytes.count, bytes[position] < 0x80 {
                position += 1
                return UInt64(bytes[position - 1])
            }
            return try longVarint()
        }

        private mutating func longVarint() throws(DecodingError) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = try byte()
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
                if shift > 63 { throw DecodingError(reason: "a number is too long") }
            }
        }

        /// A count of what follows (entries or bytes): never more than the bytes left, each
        /// entry taking at least one, so that a corrupt record cannot ask for a huge array or
        /// a number that does not fit an `Int`.
        mutating func count() throws(DecodingError) -> Int {
            let value = try varint()
            guard value <= UInt64(bytes.count - position) else { throw DecodingError(reason: "a count is larger than the record") }
            return Int(value)
        }

        mutating func string() throws(DecodingError) -> String {
            let count = try count()
            defer { position += count }
            // Written from Swift strings, so valid UTF-8: no need to check it again.
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[position..<(position + count)]), as: UTF8.self)
        }

        /// Six strings, the components of an address, read into its path: once to measure,
        /// once to copy.
        mutating func address() throws(DecodingError) -> LocationAddress {
            let start = position
            var length = 5
            for _ in 0..<6 {
                let count = try count()
                // A component of a topic is never empty and holds no '/': anything else is damage.
                guard count > 0, !bytes[position..<(position + count)].contains(UInt8(ascii: "/")) else {
                    throw DecodingError(reason: "an address component is empty or holds '/'")
                }
                length += count
                position += count
            }
            let end = position
            position = start
            var copy = self
            let path = String(unsafeUninitializedCapacity: length) { buffer in
                var offset = 0
                for number in 0..<6 {
                    if number > 0 {
                        buffer[offset] = UInt8(ascii: "/")
                        offset += 1
                    }
                    // Measured above: cannot fail.
                    let count = Int((try? copy.varint()) ?? 0)
                    UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[offset..<(offset + count)]))
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[copy.position..<(copy.position + count)]))
                    copy.position += count
                    offset += count
                }
                return offset
            }
            position = end
            // Six components, each checked above: a path as it stands.
            return LocationAddress(joinedPath: path)
        }

        mutating func optionalString() throws(DecodingError) -> String? {
            try byte() == 1 ? try string() : nil
        }

        /// Reads past a string.
        mutating func skipString() throws(DecodingError) {
            position += try count()
        }

        /// Reads past an optional string.
        mutating func skipOptionalString() throws(DecodingError) {
            if try byte() == 1 { try skipString() }
        }

        mutating func double() throws(DecodingError) -> Double {
            guard position + 8 <= bytes.count else { throw DecodingError(reason: "it ends inside a number") }
            let value = Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)))
            // Styles hold finite numbers only (JSON has no NaN): anything else is damage.
            guard value.isFinite else { throw DecodingError(reason: "a number is not finite") }
            position += 8
            return value
        }
    }
}
