/// A validated MQTT topic filter, such as `ds1/+/B/#`.
///
/// Validation happens once, in the initializer; matching and indexing then work on
/// ``levels`` and never look at the string again.
public struct TopicFilter: Hashable, Sendable, CustomStringConvertible {
    /// One level of a filter.
    public enum Level: Hashable, Sendable {
        /// Matches exactly this level (byte for byte).
        case exact(String)
        /// `+`: matches any one level, including an empty one.
        case single
        /// `#`: matches the parent level and any number of levels below it.
        case multi
    }

    /// The filter as given.
    public let string: String
    /// The parsed levels; `.multi` can only be the last.
    public let levels: [Level]

    /// Parses and validates an MQTT topic filter.
    /// - Throws: ``TopicError`` when the filter is empty, too long, contains NUL, has a
    ///   wildcard that is not a whole level, or has `#` before the last level.
    public init(_ string: String) throws(TopicError) {
        try TopicName.checkLength(string, kind: .filter)
        var levels: [Level] = []
        var number = 0
        let parts = string.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for part in parts {
            number += 1
            if let previous = levels.last, previous == .multi {
                throw .multiLevelNotLast(filter: string, level: number - 1)
            }
            if part.count == 1, part.first == UInt8(ascii: "+") {
                levels.append(.single)
            } else if part.count == 1, part.first == UInt8(ascii: "#") {
                levels.append(.multi)
            } else {
                for byte in part {
                    switch byte {
                    case UInt8(ascii: "+"): throw .partialWildcard(filter: string, level: number, wildcard: "+")
                    case UInt8(ascii: "#"): throw .partialWildcard(filter: string, level: number, wildcard: "#")
                    case 0: throw .nullCharacter(kind: .filter, string: string, level: number)
                    default: continue
                    }
                }
                levels.append(.exact(String(Substring(part))))
            }
        }
        self.string = string
        self.levels = levels
    }

    /// Whether the filter contains `+` or `#`.
    public var hasWildcards: Bool {
        levels.contains { $0 == .single || $0 == .multi }
    }

    /// Whether this filter matches a topic name, with MQTT's rules: `#` matches the parent
    /// level, empty levels are levels, and a wildcard at the first level never matches a
    /// topic that starts with `$`. An invalid topic name matches nothing.
    ///
    /// This is the one-filter check; to match a topic against many filters use ``TopicIndex``.
    public func matches(_ topic: String) -> Bool {
        guard (try? TopicName.validate(topic)) != nil else { return false }
        let topicLevels = topic.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if topic.utf8.first == UInt8(ascii: "$"), let first = levels.first, first == .single || first == .multi {
            return false
        }
        var index = 0
        for level in levels {
            switch level {
            case .multi:
                return true
            case .single:
                guard index < topicLevels.count else { return false }
            case .exact(let text):
                guard index < topicLevels.count, topicLevels[index].elementsEqual(text.utf8) else { return false }
            }
            index += 1
        }
        return index == topicLevels.count
    }

    public var description: String { string }
}
