import ArgumentParser
import LiveTopics

struct TopicCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topic",
        abstract: "Check, take apart and build topics and filters, offline.",
        discussion: """
            Examples:
              livedata topic match 'ds1/+/B/#' ds1/hq/B/F3/R7/room-7/occupancy
              livedata topic parse ds1/hq/B/F3/R7/room-7/occupancy --format json
              livedata topic criteria --dataset ds1 --building B --domain occupancy
            """,
        subcommands: [Match.self, Parse.self, Criteria.self]
    )

    struct Match: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Tell whether an MQTT filter matches a topic.",
            discussion: """
                Prints "match" (exit 0) or "no match" (exit 1), with MQTT's rules: '+' matches one \
                level, '#' the rest (including the parent: 'a/#' matches 'a'), empty levels are \
                levels, and a wildcard at the first level never matches a topic starting with '$'. \
                An invalid filter or topic exits with status 2 and says why.

                Examples:
                  livedata topic match 'ds1/+/B/#' ds1/hq/B/F3/R7/room-7/occupancy   # match
                  livedata topic match '#' '$SYS/broker/uptime'                     # no match
                """
        )

        @Argument(help: "The MQTT filter, such as 'ds1/+/B/#'.")
        var filter: String

        @Argument(help: "The topic name, such as ds1/hq/B/F3/R7/room-7/occupancy.")
        var topic: String

        func run() throws {
            let filter = try TopicFilter(filter)
            try TopicName.validate(topic)
            if filter.matches(topic) {
                printLine("match")
            } else {
                printLine("no match")
                throw ExitCode(1)
            }
        }
    }

    struct Parse: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the seven components of a live-data topic.",
            discussion: """
                Example:
                  livedata topic parse ds1/hq/B/F3/R7/room-7/occupancy
                """
        )

        @Argument(help: "A seven-level topic: dataset/venue/building/floor/room/location/domain.")
        var topic: String

        @Option(help: "Output: text or json.")
        var format: OutputFormat = .text

        func run() throws {
            let topic = try LiveTopic(parsing: topic)
            switch format {
            case .json:
                var object = JSONObjectWriter()
                for component in LiveTopic.Component.allCases { object.add(component.rawValue, topic[component]) }
                printLine(object.json)
            case .text:
                for component in LiveTopic.Component.allCases {
                    let name = component.rawValue
                    printLine(name + String(repeating: " ", count: 10 - name.count) + topic[component])
                }
            }
        }
    }

    struct Criteria: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the MQTT filter for topic criteria.",
            discussion: """
                A left-out component matches any value ('+').

                Example:
                  livedata topic criteria --dataset ds1 --building B --domain occupancy
                  # ds1/+/B/+/+/+/occupancy
                """
        )

        @OptionGroup var criteria: CriteriaOptions

        func run() throws {
            printLine(try criteria.criteria().filter.string)
        }
    }
}
