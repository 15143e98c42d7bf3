import ArgumentParser
import DisplayRules
import LiveDataConfiguration
import LiveState
import LiveTopics

struct RulesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Check a config file's display rules, print its legend, or try an update against it, offline.",
        discussion: """
            Examples:
              livedata rules check config/livedata.yaml
              livedata rules legend config/livedata.yaml --format json
              livedata rules eval config/livedata.yaml --topic demo/hq/B1/F1/R101/room-101/occupancy \\
                  --payload '{"properties": {"nrOfPeople": "3"}}' --zoom 18
            """,
        subcommands: [Check.self, LegendCommand.self, Eval.self]
    )

    /// Loads a config, or fails with every problem and exit code 78 (EX_CONFIG).
    static func load(_ path: String) throws -> LiveDataConfig {
        do {
            return try LiveDataConfig.load(path: path)
        } catch {
            for problem in error.errors { printError("error: \(problem)") }
            let count = error.errors.count
            throw CommandFailure(message: "\(path) has \(count) problem\(count == 1 ? "" : "s")", exitCode: 78)
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check a config file: exit 0 when it is valid, 78 with every problem when not.",
            discussion: """
                Each problem names the file, line and column and says what was expected.

                Example:
                  livedata rules check config/livedata.yaml
                """
        )

        @Argument(help: "The config file.")
        var file: String

        func run() throws {
            let config = try RulesCommand.load(file)
            let ruleSet = config.ruleSet
            for warning in config.warnings { printError("warning: \(warning)") }
            printLine(
                "\(file): ok: \(ruleSet.rules.count) rules, \(ruleSet.layers.count) layers, "
                    + "\(config.subscriptions.count) subscriptions, \(ruleSet.catalog.count) catalog locations"
                    + (config.geometry.map { ", \($0.features.count) shapes" } ?? ""))
        }
    }

    struct LegendCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "legend",
            abstract: "Print the legend the rules make: title, swatch, layer.",
            discussion: """
                Example:
                  livedata rules legend config/livedata.yaml --dataset demo
                """
        )

        @Argument(help: "The config file.")
        var file: String

        @Option(help: "Only the rules that can apply to this dataset.")
        var dataset: String?

        @Option(help: "Output: text (a table) or json.")
        var format: OutputFormat = .text

        func run() throws {
            let legend = try RulesCommand.load(file).ruleSet.legend(dataset: dataset)
            switch format {
            case .json:
                printLine(legend.json)
            case .text:
                let rows = legend.entries.map { [$0.title, $0.swatch?.description ?? "-", $0.layer ?? "-", $0.rules.joined(separator: ", ")] }
                for line in table(header: ["TITLE", "SWATCH", "LAYER", "RULES"], rows: rows) { printLine(line) }
            }
        }
    }

    struct Eval: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply one update to an empty state and print the derived change it publishes.",
            discussion: """
                Prints the derived change: for people, its location, rules, legend state, \
                changed fields and style (text, the default); with --format json, the change as \
                the daemon would publish it at {prefix}/style/…. Prints "no change" (exit 1) \
                when the update changes nothing. With --zoom, adds whether the location shows at \
                that zoom level.

                Example:
                  livedata rules eval config/livedata.yaml --topic demo/hq/B1/F1/R101/room-101/occupancy \\
                      --payload '{"properties": {"nrOfPeople": "3", "capacity": "8"}}' --zoom 18 --format json
                """
        )

        @Argument(help: "The config file.")
        var file: String

        @Option(help: "Output: text (for people) or json (the derived change as published).")
        var format: OutputFormat = .text

        @Option(help: "The live-data topic of the update.")
        var topic: String

        @Option(help: "The update's payload (JSON; empty removes the value).")
        var payload: String

        @Option(help: "A zoom level to check the style's visibility at.")
        var zoom: Double?

        func run() throws {
            let config = try RulesCommand.load(file)
            let liveTopic = try LiveTopic(parsing: topic)
            let now = LiveTimestamp.now
            let update: LiveUpdate
            do {
                update = try LiveUpdate(topic: liveTopic, payload: payload, receivedAt: now)
            } catch {
                throw CommandFailure.usage("--payload: \(error)")
            }
            let store = LiveStore(ruleEngine: RuleEngine(config.ruleSet))
            guard case .changed(let change) = store.apply(update, now: now) else {
                printLine("no change")
                throw ExitCode(1)
            }
            let visible = zoom.map { change.derived.style.isVisible(atZoom: $0) }
            switch format {
            case .json:
                var json = change.json
                if let zoom, let visible {
                    var object = JSONObjectWriter()
                    object.add("level", zoom)
                    object.add("visible", visible)
                    json.removeLast()
                    json += ", \"zoom\": \(object.json)}"
                }
                printLine(json)
            case .text:
                let derived = change.derived
                var rows = [
                    ["location", change.address.description],
                    ["rules", derived.rules.isEmpty ? "-" : derived.rules.joined(separator: ", ")],
                    ["legend", derived.legendState ?? "-"],
                    ["changed", change.changed.map(\.rawValue).joined(separator: ", ")],
                ]
                for field in StyleField.allCases {
                    guard let value = derived.style[field] else { continue }
                    rows.append(["  " + field.rawValue, Self.text(value)])
                }
                if let zoom, let visible { rows.append(["zoom \(jsonNumber(zoom))", visible ? "visible" : "hidden"]) }
                for line in table(header: ["", ""], rows: rows).dropFirst() { printLine(line) }
            }
        }

        /// A style value as a person reads it.
        static func text(_ value: StyleValue) -> String {
            switch value {
            case .flag(let flag): "\(flag)"
            case .number(let number): jsonNumber(number)
            case .integer(let integer): "\(integer)"
            case .text(let text): text
            case .color(let color): color.description
            case .badge(let badge):
                [badge.text.map { "\"\($0)\"" }, badge.textColor.map { "text \($0)" }, badge.backgroundColor.map { "on \($0)" }]
                    .compactMap { $0 }.joined(separator: " ")
            }
        }
    }
}

/// Aligned columns for people.
func table(header: [String], rows: [[String]]) -> [String] {
    var widths = header.map(\.count)
    for row in rows {
        for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { index, cell in
            index == cells.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
        }.joined(separator: "  ")
    }
    return [line(header)] + rows.map(line)
}
