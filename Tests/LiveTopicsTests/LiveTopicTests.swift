import LiveTopics
import Testing

@Suite("Seven-part topics and criteria")
struct LiveTopicTests {
    @Test("a seven-part topic parses into its components and formats back")
    func parseAndFormat() throws {
        let topic = try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-7/occupancy")
        #expect(topic.dataset == "ds1")
        #expect(topic.venue == "hq")
        #expect(topic.building == "B")
        #expect(topic.floor == "F3")
        #expect(topic.room == "R7")
        #expect(topic.location == "room-7")
        #expect(topic.domain == "occupancy")
        #expect(topic[.floor] == "F3")
        #expect(topic.description == "ds1/hq/B/F3/R7/room-7/occupancy")
        #expect(topic.locationPath == "ds1/hq/B/F3/R7/room-7")
        let built = try LiveTopic(
            dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: "room-7", domain: "occupancy")
        #expect(built == topic)
    }

    @Test(
        "bad live topics say what is wrong and where",
        arguments: [
            ("a/b/c", "\"a/b/c\" has 3 levels; a live-data topic has 7: dataset/venue/building/floor/room/location/domain"),
            ("a/b/c/d/e/f/g/h", "\"a/b/c/d/e/f/g/h\" has 8 levels; a live-data topic has 7: dataset/venue/building/floor/room/location/domain"),
            ("a/b/c/d//f/g", "level 5 (room) of \"a/b/c/d//f/g\" is empty"),
            ("a/b/c/d/e/f/", "level 7 (domain) of \"a/b/c/d/e/f/\" is empty"),
            ("a/b/+/d/e/f/g", "level 3 of \"a/b/+/d/e/f/g\": a topic name cannot contain '+' (wildcards belong in filters)"),
        ])
    func badTopics(topic: String, message: String) {
        #expect {
            try LiveTopic(parsing: topic)
        } throws: { error in
            (error as? TopicError)?.description == message
        }
    }

    @Test(
        "a topic cut in one pass has the components the checked way gives, bad ones the same errors",
        arguments: [
            "ds1/hq/B/F3/R7/room-7/occupancy", "bench/hq/b0/f0/r0/loc-0/occupancy", "é/ü/😀/f/r/l/d",
            "a-very-long-dataset-name/venue/building/floor/room/location-with-a-long-id/temperature",
            "a/b/c", "a/b/c/d/e/f/g/h", "/b/c/d/e/f/g", "a/b/c/d//f/g", "a/b/c/d/e/f/", "a/b/+/d/e/f/g", "a/b/c/d/e/f/#",
            "a/b/c/d/e/f/g\u{0}", "", "//////",
        ])
    func onePass(topic: String) {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let checked = Result { () throws(TopicError) -> LiveTopic in
            try TopicName.validate(topic)
            guard parts.count == 7 else { throw .wrongLevelCount(topic: topic, count: parts.count) }
            return try LiveTopic(
                dataset: parts[0], venue: parts[1], building: parts[2], floor: parts[3], room: parts[4], location: parts[5],
                domain: parts[6])
        }
        let parsed = Result { () throws(TopicError) -> LiveTopic in try LiveTopic(parsing: topic) }
        switch (parsed, checked) {
        case (.success(let parsed), .success(let checked)): #expect(parsed == checked)
        case (.failure, .failure): break
        default: Issue.record("\(topic): parsed \(parsed), checked \(checked)")
        }
    }

    @Test(
        "a topic's slashes are found in place when it is well formed of ASCII characters, and only then",
        arguments: [
            ("ds1/hq/B/F3/R7/room-7/occupancy", [3, 6, 8, 11, 14, 21]), ("a/b/c/d/e/f/g", [1, 3, 5, 7, 9, 11]),
            ("bench/hq/b0/f0/r0/loc-123456789/occupancy", [5, 8, 11, 14, 17, 31]), ("é/ü/f/r/l/d/x", nil), ("a/b/c", nil),
            ("a/b/c/d/e/f/g/h", nil), ("/b/c/d/e/f/g", nil), ("a/b/c/d//f/g", nil), ("a/b/c/d/e/f/", nil), ("a/b/+/d/e/f/g", nil),
            ("a/b/c/d/e/f/#", nil), ("a/b/c/d/e/f/g\u{0}", nil), ("", nil), ("//////", nil),
            ("a/b/c/d/e/f/" + String(repeating: "g", count: 65_524), nil),
            ("a/b/c/d/e/f/" + String(repeating: "g", count: 65_523), [1, 3, 5, 7, 9, 11]),
        ] as [(String, [Int]?)])
    func slashesOfWellFormedASCII(topic: String, slashes: [Int]?) {
        let found = Array(topic.utf8).withUnsafeBytes { LiveTopic.slashesOfWellFormedASCII($0) }
        #expect(found.map { [$0.0, $0.1, $0.2, $0.3, $0.4, $0.5] } == slashes)
    }

    @Test(
        "components cannot contain separators or wildcards",
        arguments: [
            ("B/1", "building \"B/1\": a component cannot contain '/' (it separates levels)"),
            ("B+", "building \"B+\": a component cannot contain '+' (leave the component out to match any value)"),
            ("#", "building \"#\": a component cannot contain '#' (leave the component out to match any value)"),
            ("", "building \"\": a component cannot be empty"),
        ])
    func badComponents(value: String, message: String) {
        #expect {
            try TopicCriteria(building: value)
        } throws: { error in
            (error as? TopicError)?.description == message
        }
    }

    @Test(
        "criteria become MQTT filters with '+' for what is left out",
        arguments: [
            (try! TopicCriteria(dataset: "ds1", building: "B", domain: "occupancy"), "ds1/+/B/+/+/+/occupancy"),
            (try! TopicCriteria(), "+/+/+/+/+/+/+"),
            (try! TopicCriteria(domain: "co2"), "+/+/+/+/+/+/co2"),
            (
                try! TopicCriteria(
                    dataset: "d", venue: "v", building: "b", floor: "f", room: "r", location: "l", domain: "x"),
                "d/v/b/f/r/l/x"
            ),
            (TopicCriteria(filter: try! TopicFilter("ds1/#")), "ds1/#"),
        ])
    func criteriaFilters(criteria: TopicCriteria, filter: String) {
        #expect(criteria.filter.string == filter)
    }

    @Test("criteria match topics component by component, like their filter does")
    func criteriaMatch() throws {
        let criteria = try TopicCriteria(dataset: "ds1", building: "B", domain: "occupancy")
        let yes = try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-7/occupancy")
        let no = try LiveTopic(parsing: "ds1/hq/C/F3/R7/room-7/occupancy")
        #expect(criteria.matches(yes))
        #expect(!criteria.matches(no))
        #expect(criteria.filter.matches(yes.description))
        #expect(!criteria.filter.matches(no.description))
        #expect(criteria[.building] == "B")
        #expect(criteria[.floor] == nil)
    }

    @Test("an address's path bytes are its description, and only those bytes are its path")
    func addressPath() throws {
        let address = LocationAddress(try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-7/occupancy"))
        let bytes = address.withPathBytes { Array($0) }
        #expect(String(decoding: bytes, as: UTF8.self) == address.description)
        func hasPath(_ path: String) -> Bool { Array(path.utf8).withUnsafeBytes { address.hasPath($0) } }
        #expect(hasPath("ds1/hq/B/F3/R7/room-7"))
        for other in [
            "ds1/hq/B/F3/R7/room-", "ds1/hq/B/F3/R7/room-77", "ds1/hq/B/F3/R7/room-7/", "ds1/hq/B/F3/R7room-7",
            "ds1/hq/B/F3/R7/room-8", "ds2/hq/B/F3/R7/room-7", "ds1/hq/B/F3R7//room-7", "", "ds1/hq/B/F3/R7",
        ] {
            #expect(!hasPath(other), "\(other)")
        }
    }

    @Test("an address kept as its path gives back each component, and compares them in place")
    func addressComponents() throws {
        let address = LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "", location: "rüm-7")
        #expect(address.path == "ds1/hq/B/F3//rüm-7")
        #expect([address.dataset, address.venue, address.building, address.floor, address.room, address.location]
            == ["ds1", "hq", "B", "F3", "", "rüm-7"])
        #expect(address[.domain] == nil)
        #expect(address.has(.floor, "F3") && address.has(.room, "") && address.has(.location, "rüm-7"))
        #expect(!address.has(.floor, "F") && !address.has(.floor, "F33") && !address.has(.dataset, "hq") && !address.has(.domain, ""))
        #expect(LocationAddress(path: "ds1/hq/B/F3//rüm-7") == address)
        #expect(LocationAddress(path: "ds1/hq/B/F3/rüm-7") == nil)
        #expect(LocationAddress(path: "ds1/hq/B/F3/R/r/x") == nil)
        let topic = try LiveTopic(parsing: "ds1/hq/B/F3/R7/room-7/occupancy")
        #expect(try TopicCriteria(floor: "F3", domain: "occupancy").matches(topic))
        #expect(try !TopicCriteria(floor: "F", domain: "occupancy").matches(topic))
        #expect(try !TopicCriteria(floor: "F3", domain: "occupanc").matches(topic))
    }
}
