import ArgumentParser
import LiveTopics

/// The seven topic components as flags; a left-out one means "any".
struct CriteriaOptions: ParsableArguments {
    @Option(help: "Dataset (also called solution), level 1.")
    var dataset: String?
    @Option(help: "Venue, level 2.")
    var venue: String?
    @Option(help: "Building, level 3.")
    var building: String?
    @Option(help: "Floor id (not an index), level 4.")
    var floor: String?
    @Option(help: "Room, level 5.")
    var room: String?
    @Option(help: "Location id, level 6.")
    var location: String?
    @Option(help: "Domain, level 7: occupancy, availability, position, temperature, co2, humidity, count, or any other.")
    var domain: String?

    var values: [(LiveTopic.Component, String?)] {
        [
            (.dataset, dataset), (.venue, venue), (.building, building), (.floor, floor), (.room, room),
            (.location, location), (.domain, domain),
        ]
    }

    var isEmpty: Bool { values.allSatisfy { $0.1 == nil } }

    /// The criteria these flags describe.
    func criteria() throws(TopicError) -> TopicCriteria {
        try TopicCriteria(
            dataset: dataset, venue: venue, building: building, floor: floor, room: room, location: location,
            domain: domain)
    }

    /// The one topic all seven flags name.
    /// - Throws: a usage failure naming the missing flags.
    func topic() throws -> LiveTopic {
        let missing = values.filter { $0.1 == nil }.map { "--\($0.0.rawValue)" }
        guard missing.isEmpty else {
            throw CommandFailure.usage(
                "a live-data topic needs all seven components; missing \(missing.joined(separator: ", ")) "
                    + "(or give the whole topic with --topic)")
        }
        return try LiveTopic(
            dataset: dataset!, venue: venue!, building: building!, floor: floor!, room: room!, location: location!,
            domain: domain!)
    }
}
