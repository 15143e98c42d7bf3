import LiveTopics
import Testing

/// What a partition owns, and the subscriptions narrowed to it.
@Suite("Partition")
struct PartitionTests {
    static let east = Partition(
        name: "east",
        shares: [
            try! Partition.Share(dataset: "ds1", venue: "v1", building: "A"),
            try! Partition.Share(dataset: "ds1", venue: "v2"),
            try! Partition.Share(dataset: "ds2"),
        ])

    @Test(
        "owns a building, a whole venue, a whole dataset; nothing else",
        arguments: [
            ("ds1/v1/A/F1/R1/x/occupancy", true), ("ds1/v1/B/F1/R1/x/occupancy", false), ("ds1/v2/Z/F1/R1/x/occupancy", true),
            ("ds2/any/where/F/R/x/d", true), ("ds3/v1/A/F1/R1/x/occupancy", false), ("ds1/v1", false), ("ds1/v1/AB/F/R/x/d", false),
            ("ds1/v1/A", true),
        ])
    func owns(topic: String, owned: Bool) {
        #expect(Self.east.owns(topic: topic) == owned)
    }

    @Test("a place and an address are owned by their first three levels")
    func places() throws {
        #expect(Self.east.owns(Place(dataset: "ds1", venue: "v1", building: "A", floor: "F9")))
        #expect(!Self.east.owns(Place(dataset: "ds1", venue: "v1", building: "B")))
        let address = LocationAddress(dataset: "ds1", venue: "v2", building: "Q", floor: "F", room: "R", location: "x")
        #expect(Self.east.owns(address))
    }

    @Test(
        "filters meet level by level; # takes the rest of the other; + takes the other's level",
        arguments: [
            ("a/+/c", "a/b/+", "a/b/c"), ("a/#", "+/b/c", "a/b/c"), ("#", "x/y", "x/y"), ("a/b", "a/c", nil), ("a/b", "a/b/c", nil),
            ("a/#", "a", "a"), ("+/+", "#", "+/+"), ("a/+/#", "+/b/c/d", "a/b/c/d"),
        ] as [(String, String, String?)])
    func intersection(a: String, b: String, expected: String?) throws {
        let levels = TopicFilter.intersection(try TopicFilter(a).levels, try TopicFilter(b).levels)
        #expect(levels.map(TopicFilter.text(of:)) == expected)
        // It is the same either way round.
        let swapped = TopicFilter.intersection(try TopicFilter(b).levels, try TopicFilter(a).levels)
        #expect(swapped.map(TopicFilter.text(of:)) == expected)
    }

    @Test("subscriptions narrowed to the partition: one filter per share they meet, none for what they miss")
    func narrowing() throws {
        let everything = try TopicCriteria()
        #expect(Self.east.narrow(everything).map(\.filter.string) == ["ds1/v1/A/+/+/+/+", "ds1/v2/+/+/+/+/+", "ds2/+/+/+/+/+/+"])
        let occupancy = try TopicCriteria(dataset: "ds1", domain: "occupancy")
        #expect(Self.east.narrow(occupancy).map(\.filter.string) == ["ds1/v1/A/+/+/+/occupancy", "ds1/v2/+/+/+/+/occupancy"])
        let raw = TopicCriteria(filter: try TopicFilter("ds1/v1/#"))
        #expect(Self.east.narrow(raw).map(\.filter.string) == ["ds1/v1/A/+/+/+/+"])
        let elsewhere = try TopicCriteria(dataset: "ds3")
        #expect(Self.east.narrow(elsewhere).isEmpty)
        // Every topic the narrowed filters take is one both the criteria and the partition take.
        for topic in ["ds1/v1/A/F/R/x/occupancy", "ds1/v1/B/F/R/x/occupancy", "ds1/v2/C/F/R/x/position", "ds2/v/b/f/r/x/d"] {
            let live = try LiveTopic(parsing: topic)
            let taken = Self.east.narrow(occupancy).contains { $0.filter.matches(topic) }
            #expect(taken == (occupancy.matches(live) && Self.east.owns(topic: topic)), "\(topic)")
        }
    }

    @Test("the output filters convergence reads: one per share")
    func outputFilters() {
        #expect(Self.east.filters(prefix: "livedata", kind: "style") == ["livedata/style/ds1/v1/A/#", "livedata/style/ds1/v2/+/#", "livedata/style/ds2/+/+/#"])
    }
}
