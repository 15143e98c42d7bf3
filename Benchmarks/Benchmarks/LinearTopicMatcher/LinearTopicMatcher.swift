import CLibMosquitto

/// Matches a topic by asking `mosquitto_topic_matches_sub` about every filter in turn:
/// the straightforward approach whose cost grows with the number of filters. Kept as the
/// reference that the topic index is measured against (Benchmarks/).
public final class LinearTopicMatcher {
    /// The filters as NUL-terminated C strings, copied once so the scan measures matching only.
    private var filters: [[CChar]] = []

    public init(filters: [String]) {
        self.filters = filters.map { Array($0.utf8CString) }
    }

    public var count: Int { filters.count }

    /// How many filters match the topic, by libmosquitto's rules.
    public func countMatches(_ topic: String) -> Int {
        topic.withCString { topicPointer in
            var matches = 0
            var result = false
            for filter in filters {
                filter.withUnsafeBufferPointer { filterPointer in
                    if mosquitto_topic_matches_sub(filterPointer.baseAddress, topicPointer, &result) == 0, result {
                        matches += 1
                    }
                }
            }
            return matches
        }
    }
}
