import LiveTopics
import Mosquitto
import Testing

@Suite("The topic index agrees with libmosquitto")
struct LibMosquittoAgreementTests {
    static let filters = [
        "a/b/c", "a/+/c", "a/#", "#", "+", "+/+", "/+", "+/a", "a//b", "a/+/b", "a/b/", "a/b/+", "$SYS/#",
        "+/uptime", "$SYS/+", "a/$x", "+/$x", "ds1/+/B/+/+/+/occupancy", "+/+/+/+/+/+/+", "a/b/#",
    ]
    static let topics = [
        "a/b/c", "a", "a/b", "ab", "/", "/a", "a//b", "a/b/", "$SYS/uptime", "$SYS", "a/$x",
        "ds1/hq/B/F3/R7/room-7/occupancy", "ds1/hq/C/F3/R7/room-7/occupancy", "x/y/z",
    ]

    @Test("on every pair of a table of filters and topics", arguments: filters)
    func agreement(filter: String) throws {
        var index = TopicIndex<Int>()
        index.add(try TopicFilter(filter), 1)
        for topic in Self.topics {
            let answer: Bool? = LibMosquitto.topicMatches(filter: filter, topic: topic)
            let library = try #require(answer as Bool?)
            #expect(try !index.matches(topic).isEmpty == library, "filter \(filter) topic \(topic)")
            #expect(try TopicFilter(filter).matches(topic) == library, "filter \(filter) topic \(topic)")
        }
    }

    @Test("libmosquitto also refuses the filters the index refuses", arguments: ["a+", "#/a", "a/#b"])
    func refusals(filter: String) {
        #expect(LibMosquitto.topicMatches(filter: filter, topic: "a") == nil)
        #expect(throws: TopicError.self) { try TopicFilter(filter) }
    }
}
