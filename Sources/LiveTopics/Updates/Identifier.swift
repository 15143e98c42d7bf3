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
