#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    /// Whether two identifiers (domain and property names) are the same: as long in UTF-8
    /// and equal. Cheaper than `==` alone, which calls into the runtime for any two strings
    /// that differ; identifiers are compared as sent, so two spellings of one accented name
    /// (composed and decomposed) are two identifiers, as they are two MQTT topics.
    @inlinable @inline(__always)
    public func isSameIdentifier(as other: String) -> Bool {
        utf8.count == other.utf8.count && self == other
    }
}

extension String {
    /// ``isSameIdentifier(as:)`` against the UTF-8 bytes of another identifier (a slice of
    /// an incoming topic), without making a string of them.
    public func isSameIdentifier(asBytes bytes: UnsafeRawBufferPointer) -> Bool {
        guard utf8.count == bytes.count else { return false }
        if bytes.isEmpty { return true }
        return utf8.withContiguousStorageIfAvailable { own in
            memcmp(own.baseAddress!, bytes.baseAddress!, bytes.count) == 0
        } ?? utf8.elementsEqual(bytes)
    }
}

/// One byte per name for the first eight names of a short list (the domains of a location's
/// values): a name is looked up by comparing its tag with these, in a register, and only
/// the entries whose tag matches are read and compared in full.
public struct IdentifierTags: Sendable, Equatable {
    /// Byte `i` is the tag of name `i` (0 for none).
    public private(set) var bits: UInt64 = 0

    /// How many names the tags cover at most; later ones are compared without a tag.
    @inlinable public static var capacity: Int { 8 }

    public init() {}

    /// Inlinable, so that a caller's sequence (a lazy map over its values) is specialised
    /// rather than walked through generic metadata at run time.
    @inlinable
    public init(_ names: some Sequence<String>) {
        var index = 0
        for name in names {
            guard index < Self.capacity else { break }
            set(Self.tag(of: name), at: index)
            index += 1
        }
    }

    /// A name's tag, never 0: from its length and its first and last bytes.
    @inlinable
    public static func tag(of name: UnsafeRawBufferPointer) -> UInt8 {
        guard let first = name.first, let last = name.last else { return 1 }
        return tag(count: name.count, first: first, last: last)
    }

    @inlinable
    public static func tag(of name: String) -> UInt8 {
        // In place when the text is contiguous (a native string's always is): `utf8.last`
        // is a generic walk back over the view, several times an update.
        if let tag = name.utf8.withContiguousStorageIfAvailable({ tag(of: UnsafeRawBufferPointer($0)) }) { return tag }
        let utf8 = name.utf8
        guard let first = utf8.first, let last = utf8.last else { return 1 }
        return tag(count: utf8.count, first: first, last: last)
    }

    @usableFromInline @inline(__always)
    static func tag(count: Int, first: UInt8, last: UInt8) -> UInt8 {
        let mixed = UInt8(truncatingIfNeeded: count &* 37 &+ Int(first) &* 7 &+ Int(last))
        return mixed == 0 ? 1 : mixed
    }

    /// The tag of name `index` (0 past the covered ones).
    @inlinable
    public subscript(index: Int) -> UInt8 {
        index < Self.capacity ? Self.tag(at: index, in: bits) : 0
    }

    /// The first of `count` names that has `tag` (or is past the covered ones) and passes
    /// `isName`: only those are read.
    @inlinable
    public func firstIndex(tag: UInt8, count: Int, where isName: (Int) -> Bool) -> Int? {
        var index = 0
        while index < count {
            if (index >= Self.capacity || Self.tag(at: index, in: bits) == tag) && isName(index) { return index }
            index += 1
        }
        return nil
    }

    /// The tag of name `index` (below ``capacity``) in ``bits``.
    @inlinable @inline(__always)
    public static func tag(at index: Int, in bits: UInt64) -> UInt8 {
        UInt8(truncatingIfNeeded: bits &>> UInt64(truncatingIfNeeded: index &<< 3))
    }

    /// Sets the tag of name `index` (ignored past the covered ones).
    public mutating func set(_ tag: UInt8, at index: Int) {
        guard index < Self.capacity else { return }
        let shift = UInt64(index * 8)
        bits = (bits & ~(0xFF << shift)) | UInt64(tag) << shift
    }
}
