import ArgumentParser
import LiveTopics
import Mosquitto

struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish one live update.",
        discussion: """
            Names the topic with all seven component flags (or --topic) and the values as \
            name=value arguments; builds the payload with the current time. --payload sends \
            a payload exactly as given (useful to test how bad input is handled), --clear \
            sends an empty one, which removes the domain's value for the location.

            Examples:
              livedata publish --dataset ds1 --venue hq --building B --floor F3 --room R7 \\
                  --location room-7 --domain occupancy nrOfPeople=3 capacity=8
              livedata publish --topic ds1/hq/B/F3/R7/desk-4/availability available=false --retain
              livedata publish --topic ds1/hq/B/F3/R7/room-7/occupancy --clear --retain
            """
    )

    @OptionGroup(title: "Topic")
    var components: CriteriaOptions

    @Option(help: ArgumentHelp("The whole topic instead of the seven component flags.", valueName: "topic"))
    var topic: String?

    @Argument(help: ArgumentHelp("Property values, such as nrOfPeople=3.", valueName: "name=value"))
    var properties: [String] = []

    @Option(help: "Send this payload as it is instead of building one from name=value arguments.")
    var payload: String?

    @Flag(help: "Send an empty payload: removes this domain's value for the location.")
    var clear = false

    @Option(help: "The update's id (default: the topic's location).")
    var id: String?

    @Option(help: "The update's timestamp, ISO-8601 or epoch milliseconds (default: now).")
    var timestamp: String?

    @Option(help: "Which system sends it (originSourceId).")
    var origin: String?

    @Option(help: "QoS of the message.")
    var qos: MQTTQoS = .atLeastOnce

    @Flag(help: "Ask the broker to keep the message for later subscribers.")
    var retain = false

    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @Flag(name: .shortAndLong, help: "Log connection details on standard error.")
    var verbose = false

    func validate() throws {
        let sources = [payload != nil, clear, !properties.isEmpty].filter { $0 }.count
        if sources == 0 { throw ValidationError("give name=value properties, --payload or --clear") }
        if sources > 1 { throw ValidationError("give only one of name=value properties, --payload and --clear") }
        if topic != nil && !components.isEmpty {
            throw ValidationError("give either --topic or the component flags, not both")
        }
    }

    func run() async throws {
        let topicName: String
        if let topic {
            try TopicName.validate(topic)
            topicName = topic
        } else {
            topicName = try components.topic().description
        }
        let body = try makePayload(topicName: topicName)
        let client = try MQTTClient(configuration: broker.configuration(), logger: makeLogger(verbose: verbose))
        try await client.connect()
        do {
            try await client.publish(topicName, text: body, qos: qos, retain: retain)
        } catch {
            await client.disconnect()
            throw error
        }
        await client.disconnect()
    }

    private func makePayload(topicName: String) throws -> String {
        if clear { return "" }
        if let payload { return payload }
        guard let topic = try? LiveTopic(parsing: topicName) else {
            throw CommandFailure.usage(
                "name=value properties need a seven-part live-data topic; \(jsonQuoted(topicName)) is not one "
                    + "(send any other payload with --payload)")
        }
        var values = LiveProperties()
        for argument in properties {
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
                throw CommandFailure.usage("property \(jsonQuoted(argument)) is not name=value")
            }
            values[String(argument[..<equals])] = String(argument[argument.index(after: equals)...])
        }
        var time = LiveTimestamp.now
        if let timestamp {
            guard let parsed = LiveTimestamp(parsing: timestamp) else {
                throw CommandFailure.usage(
                    "--timestamp \(jsonQuoted(timestamp)) is neither ISO-8601 with a time zone nor epoch milliseconds")
            }
            time = parsed
        }
        return LiveUpdate(topic: topic, id: id, timestamp: time, originSourceId: origin, properties: values).payload
    }
}
