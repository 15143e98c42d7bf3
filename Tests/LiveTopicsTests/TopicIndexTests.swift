import LiveTopics
import LiveDataTestSupport
import Testing

@Suite("Topic index")
struct TopicIndexTests {
    @Test("every matching registration is returned, duplicates included")
    func returnsEveryMatch() throws {
        var index = TopicIndex<String>()
        try index.add("ds1/+/B/+/+/+/occupancy", "building B occupancy")
        try index.add("ds1/#", "all of ds1")
        try index.add("ds1/#", "all of ds1, again")
        try index.add("ds1/hq/B/F3/R7/room-7/occupancy", "room 7")
        try index.add("ds2/#", "other dataset")
        try index.add("+/+/+/+/+/+/co2", "co2 anywhere")
        let matches = try index.matches("ds1/hq/B/F3/R7/room-7/occupancy").sorted()
        #expect(matches == ["all of ds1", "all of ds1, again", "building B occupancy", "room 7"])
        #expect(try index.matches("ds3/hq/B/F3/R7/room-7/co2") == ["co2 anywhere"])
        #expect(try index.matches("ds3/x").isEmpty)
    }

    @Test("removal returns the value, prunes, and leaves the other registrations")
    func removal() throws {
        var index = TopicIndex<Int>()
        let first = try index.add("a/b/c", 1)
        let second = try index.add("a/b/c", 2)
        let wildcard = try index.add("a/+/#", 3)
        #expect(index.count == 3)
        #expect(index.remove(first) == 1)
        #expect(index.remove(first) == nil)
        #expect(try index.matches("a/b/c").sorted() == [2, 3])
        #expect(index.remove(wildcard) == 3)
        #expect(try index.matches("a/b/c") == [2])
        #expect(try index.matches("a/x") == [])
        #expect(index.remove(second) == 2)
        #expect(index.isEmpty)
        #expect(try index.matches("a/b/c") == [])
        try index.add("a/b/c", 4)
        #expect(try index.matches("a/b/c") == [4])
    }

    @Test("copies are independent (copy on write)")
    func copyOnWrite() throws {
        var original = TopicIndex<Int>()
        try original.add("a/#", 1)
        var copy = original
        try copy.add("a/b", 2)
        let registration = try copy.add("a/+", 3)
        copy.remove(registration)
        #expect(try original.matches("a/b") == [1])
        #expect(try copy.matches("a/b").sorted() == [1, 2])
    }

    @Test("topics with wildcards are refused")
    func refusesWildcardTopics() throws {
        var index = TopicIndex<Int>()
        try index.add("#", 1)
        #expect(throws: TopicError.wildcardInTopic(topic: "a/+", level: 2, wildcard: "+")) {
            try index.matches("a/+")
        }
        #expect(throws: TopicError.empty(kind: .topic)) { try index.matches("") }
        #expect(throws: TopicError.wildcardInTopic(topic: "a/b/c/#", level: 4, wildcard: "#")) {
            try Array("a/b/c/#".utf8).withUnsafeBytes { bytes throws(TopicError) in try index.hasMatch(bytes: bytes) }
        }
        #expect(throws: TopicError.self) { try index.add("a/#/b", 2) }
    }

    @Test("long levels survive heavy removal (their key storage is compacted)")
    func longLevelsAndCompaction() throws {
        var index = TopicIndex<Int>()
        let long = String(repeating: "x", count: 40)
        var registrations: [TopicIndex<Int>.Registration] = []
        for number in 0..<500 {
            registrations.append(try index.add("\(long)-\(number)/\(long)/+", number))
        }
        let keeper = try index.add("\(long)-keep/\(long)/#", -1)
        for (number, registration) in registrations.enumerated() where number % 5 != 0 {
            #expect(index.remove(registration) == number)
        }
        #expect(try index.matches("\(long)-10/\(long)/a") == [10])
        #expect(try index.matches("\(long)-11/\(long)/a") == [])
        #expect(try index.matches("\(long)-keep/\(long)") == [-1])
        for number in 500..<600 { try index.add("\(long)-\(number)/\(long)/+", number) }
        #expect(try index.matches("\(long)-599/\(long)/z") == [599])
        #expect(try index.matches("\(long)-495/\(long)/z") == [495])
        #expect(index.remove(keeper) == -1)
        #expect(index.count == 200)
    }

    @Test("the index agrees with a brute-force reference on random filters and topics", arguments: [1, 2, 3, 4])
    func agreesWithReference(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var index = TopicIndex<Int>()
        var filters: [Int: ReferenceFilter] = [:]
        var registrations: [Int: TopicIndex<Int>.Registration] = [:]
        for number in 0..<2000 {
            let filter = randomFilter(&random)
            filters[number] = ReferenceFilter(filter)
            registrations[number] = try index.add(filter, number)
        }
        // Remove a third, so that pruning is exercised too.
        for number in 0..<2000 where random.next() % 3 == 0 {
            #expect(index.remove(registrations[number]!) == number)
            filters[number] = nil
        }
        #expect(index.count == filters.count)
        var matched = 0
        for _ in 0..<2000 {
            let topic = randomTopic(&random)
            let levels = splitLevels(topic)
            let expected = filters.filter { $0.value.matches(topic: topic, levels: levels) }.keys.sorted()
            let actual = try index.matches(topic).sorted()
            #expect(actual == expected, "topic \(topic)")
            let bytes = Array(topic.utf8)
            let any = try bytes.withUnsafeBytes { bytes throws(TopicError) in try index.hasMatch(bytes: bytes) }
            #expect(any == !expected.isEmpty, "topic \(topic)")
            // The same with the levels found by the caller.
            let slashes = bytes.indices.filter { bytes[$0] == UInt8(ascii: "/") }
            let found = bytes.withUnsafeBytes { bytes in slashes.withUnsafeBufferPointer { index.hasMatch(bytes: bytes, slashes: $0) } }
            #expect(found == !expected.isEmpty, "topic \(topic)")
            matched += actual.count
        }
        #expect(matched > 500, "the random cases should produce plenty of matches")
    }

    @Test(
        "chains of '+' alone under a node (criteria that leave components out) match as the reference does",
        arguments: [
            ["d/+/+/+/+/+/+"], ["+/+/+/+/+/+/co2"], ["d/+/+/#"], ["d/+/+"], ["+/+"], ["d/+/+/+/+/+/+", "d/+/+/x/+/+/+"],
            ["d/+/#", "d/+/+/+"], ["+/+/+/+/+/+/+", "$s/+/+/+/+/+/+"],
        ])
    func plusChains(filters: [String]) throws {
        var index = TopicIndex<Int>()
        for (number, filter) in filters.enumerated() { try index.add(filter, number) }
        let topics = [
            "d", "d/a", "d/a/b", "d/a/b/c", "d/a/b/x/e/f/g", "d/a/b/c/e/f/g", "d/a/b/c/e/f/co2", "e/a/b/c/e/f/co2", "d/a/b/c/e/f/g/h",
            "$s/a/b/c/e/f/g", "d//////", "d/a/b/c/e/f/",
        ]
        for topic in topics {
            let expected = filters.indices.filter { ReferenceFilter(filters[$0]).matches(topic: topic, levels: splitLevels(topic)) }
            #expect(try index.matches(topic).sorted() == expected, "\(filters) \(topic)")
        }
    }
}

/// An independent, obviously-correct matcher: recursion over split levels.
struct ReferenceFilter {
    let levels: [[UInt8]]

    init(_ filter: String) {
        levels = splitLevels(filter)
    }

    func matches(topic: String, levels topicLevels: [[UInt8]]) -> Bool {
        let plus = Array("+".utf8)
        let hash = Array("#".utf8)
        if topic.hasPrefix("$") && (levels[0] == plus || levels[0] == hash) { return false }
        func match(_ i: Int, _ j: Int) -> Bool {
            if i == levels.count { return j == topicLevels.count }
            if levels[i] == hash { return true }
            if j == topicLevels.count { return false }
            if levels[i] == plus || levels[i] == topicLevels[j] { return match(i + 1, j + 1) }
            return false
        }
        return match(0, 0)
    }
}

func splitLevels(_ string: String) -> [[UInt8]] {
    string.split(separator: "/", omittingEmptySubsequences: false).map { Array($0.utf8) }
}

private let levelWords = ["a", "b", "c", "", "$s", "longer-level-name-x"]

func randomFilter(_ random: inout SplitMix64) -> String {
    let count = Int(random.next() % 5) + 1
    var levels: [String] = []
    for position in 0..<count {
        switch random.next() % 10 {
        case 0, 1: levels.append("+")
        case 2 where position == count - 1: levels.append("#")
        default: levels.append(levelWords[Int(random.next() % UInt64(levelWords.count))])
        }
    }
    let filter = levels.joined(separator: "/")
    return filter.isEmpty ? "a" : filter
}

func randomTopic(_ random: inout SplitMix64) -> String {
    let count = Int(random.next() % 5) + 1
    let topic = (0..<count).map { _ in levelWords[Int(random.next() % UInt64(levelWords.count))] }.joined(separator: "/")
    return topic.isEmpty ? "b" : topic
}
