import LiveTopics
import Testing

@Suite("Topic filters and names")
struct TopicFilterTests {
    @Test(
        "valid filters parse into levels",
        arguments: [
            ("a/b/c", [TopicFilter.Level.exact("a"), .exact("b"), .exact("c")]),
            ("#", [.multi]),
            ("+", [.single]),
            ("a/#", [.exact("a"), .multi]),
            ("+/+/#", [.single, .single, .multi]),
            ("a//b", [.exact("a"), .exact(""), .exact("b")]),
            ("/", [.exact(""), .exact("")]),
            ("$SYS/#", [.exact("$SYS"), .multi]),
            ("ds1/+/B/+/+/+/occupancy", [.exact("ds1"), .single, .exact("B"), .single, .single, .single, .exact("occupancy")]),
        ])
    func validFilters(filter: String, levels: [TopicFilter.Level]) throws {
        #expect(try TopicFilter(filter).levels == levels)
    }

    @Test(
        "invalid filters are refused with where and why",
        arguments: [
            ("", "a topic filter cannot be empty"),
            ("a+", "level 1 of \"a+\": '+' must be a whole level"),
            ("a/b+/c", "level 2 of \"a/b+/c\": '+' must be a whole level"),
            ("a/#b", "level 2 of \"a/#b\": '#' must be a whole level"),
            ("#/a", "level 1 of \"#/a\": '#' must be the last level"),
            ("a/#/#", "level 2 of \"a/#/#\": '#' must be the last level"),
            ("a/\u{0}b", "level 2 of \"a/\\0b\": a filter cannot contain the NUL character"),
        ])
    func invalidFilters(filter: String, message: String) {
        #expect {
            try TopicFilter(filter)
        } throws: { error in
            (error as? TopicError)?.description == message
        }
    }

    @Test("a filter longer than 65535 bytes is refused")
    func tooLong() {
        #expect(throws: TopicError.tooLong(kind: .filter, bytes: 65_536)) {
            try TopicFilter(String(repeating: "a", count: 65_536))
        }
    }

    @Test(
        "topic names refuse wildcards and NUL",
        arguments: [
            ("a/+/c", "level 2 of \"a/+/c\": a topic name cannot contain '+' (wildcards belong in filters)"),
            ("#", "level 1 of \"#\": a topic name cannot contain '#' (wildcards belong in filters)"),
            ("", "a topic cannot be empty"),
        ])
    func invalidTopicNames(topic: String, message: String) {
        #expect {
            try TopicName.validate(topic)
        } throws: { error in
            (error as? TopicError)?.description == message
        }
    }

    /// (filter, topic, matches): MQTT 3.1.1 §4.7 and MQTT 5 §4.7, edge cases included.
    static let matchCases: [(String, String, Bool)] = [
        ("a/b/c", "a/b/c", true),
        ("a/b/c", "a/b", false),
        ("a/b", "a/b/c", false),
        ("a/+/c", "a/b/c", true),
        ("a/+/c", "a/b/d", false),
        ("a/+", "a/b/c", false),
        ("a/#", "a/b/c", true),
        ("a/#", "a", true),  // '#' matches the parent level
        ("a/#", "ab", false),
        ("a/b/#", "a/b", true),
        ("#", "a/b/c", true),
        ("#", "/", true),
        ("+", "a", true),
        ("+", "a/b", false),
        ("+", "", false),  // not a valid topic
        ("+/+", "/", true),  // empty levels are levels
        ("/+", "/a", true),
        ("+/a", "/a", true),
        ("a//b", "a//b", true),
        ("a/+/b", "a//b", true),
        ("a/b", "a//b", false),
        ("a/b/", "a/b/", true),
        ("a/b/", "a/b", false),
        ("a/b/+", "a/b/", true),
        ("#", "$SYS/uptime", false),  // first-level wildcards never match '$' topics
        ("+/uptime", "$SYS/uptime", false),
        ("$SYS/#", "$SYS/uptime", true),
        ("$SYS/+", "$SYS/uptime", true),
        ("a/$x", "a/$x", true),
        ("+/$x", "a/$x", true),
        ("sport/tennis/+", "sport/tennis/player1", true),
        ("ds1/+/B/+/+/+/occupancy", "ds1/hq/B/F3/R7/room-7/occupancy", true),
        ("ds1/+/B/+/+/+/occupancy", "ds1/hq/C/F3/R7/room-7/occupancy", false),
        ("caf\u{E9}", "cafe\u{301}", false),  // bytes, not canonical equivalence
        ("A", "a", false),
    ]

    @Test("matching follows MQTT", arguments: matchCases)
    func matching(filter: String, topic: String, expected: Bool) throws {
        #expect(try TopicFilter(filter).matches(topic) == expected)
    }

    @Test("the index agrees with the single-filter check on the same table", arguments: matchCases)
    func indexMatching(filter: String, topic: String, expected: Bool) throws {
        var index = TopicIndex<Int>()
        index.add(try TopicFilter(filter), 1)
        if topic.isEmpty {
            #expect(throws: TopicError.self) { try index.matches(topic) }
        } else {
            #expect(try index.matches(topic) == (expected ? [1] : []))
        }
    }
}
