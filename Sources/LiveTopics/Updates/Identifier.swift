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
