import ArgumentParser
import Foundation
import LiveDataClient
import LiveTopics
import Mosquitto

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show the daemon's output as a map client applies it.",
        discussion: """
            Subscribes to the derived styles under the criteria (a left-out component matches \
            any value), the legends, the status and the failover leases, and applies them as \
            docs/protocol.md says a map client must: a location's changes in (epoch, version) \
            order, an older one dropped, a clear removing the location from that place only, \
            a move taking it to its new place, its state named by the legend, a hidden layer's \
            locations left out (shown with --all).

            On a terminal it shows a table refreshed in place (location, place, state, label, \
            badge, age); piped, one line per change; with --format json, one object per \
            change. A payload that breaks the contract is reported on standard error with its \
            topic, and the watch goes on.

            Examples:
              livedata watch --building B --floor F3
              livedata watch --dataset demo --format json --count 100
            """
    )

    @OptionGroup(title: "Topic criteria (the location's place; no --domain: a style is the location's)")
    var criteria: CriteriaOptions

    @Option(help: "The daemon's output.prefix.")
    var prefix = "livedata"

    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @Option(help: "Output: text (a table on a terminal, lines when piped) or json (one object per applied change).")
    var format: OutputFormat = .text

    @Flag(help: "Show the locations of hidden layers too.")
    var all = false

    @Option(help: "Exit with status 0 after this many applied changes and removals.")
    var count: Int?

    @Option(help: "Exit after this many seconds (status 1 if --count was not reached by then).")
    var timeout: Double?

    @Flag(name: .shortAndLong, help: "Log connection details on standard error.")
    var verbose = false

    func validate() throws {
        if criteria.domain != nil {
            throw ValidationError("--domain does not apply: the derived output is one style per location")
        }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be more than 0 seconds") }
    }

    func run() async throws {
        let place = [criteria.dataset, criteria.venue, criteria.building, criteria.floor, criteria.room, criteria.location]
        for level in place.compactMap({ $0 }) where level.isEmpty || level.contains(where: { "/+#".contains($0) }) {
            throw CommandFailure.usage("\"\(level)\" is not a topic level: it must be non-empty and free of /, + and #")
        }
        let styles = "\(prefix)/style/" + place.map { $0 ?? "+" }.joined(separator: "/")
        // The legend first: its retained message then comes before the styles it names.
        let filters = ["\(prefix)/legend/\(criteria.dataset ?? "+")", "\(prefix)/status", "\(prefix)/status/+", "\(prefix)/owner/+", styles]
        let client = try MQTTClient(configuration: broker.configuration(), logger: makeLogger(verbose: verbose))
        try await client.connect()
        for filter in filters { try await client.subscribe(filter, qos: .atLeastOnce) }
        let session = StreamingSession(client, timeout: timeout)
        defer { session.cancel() }

        var state = MapClientState(prefix: prefix)
        var printer = WatchPrinter(format: format, showHidden: all, terminal: isatty(STDOUT_FILENO) == 1)
        var applied = 0
        for await message in client.messages {
            let outcome = state.apply(topic: message.topic, payload: message.payload)
            printer.report(outcome, in: state)
            switch outcome {
            case .applied, .removed: applied += 1
            default: break
            }
            if let count, applied >= count { break }
        }
        printer.finish(state)
        await client.disconnect()
        if let refusal = await session.events.value {
            throw CommandFailure.runtime("\(refusal)")
        }
        if let count, applied < count {
            throw CommandFailure.runtime("timed out after \(timeout.map { "\($0)" } ?? "?") s with \(applied) of \(count) changes")
        }
    }
}
