import ArgumentParser
import LiveTopics
import Logging
import Mosquitto

struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Print live updates as they arrive.",
        discussion: """
            Subscribes to the topics that match the criteria (a left-out component matches any \
            value) and prints one line per update. Updates whose payload cannot be read print \
            one warning line on standard error and the stream goes on. A lost connection is \
            retried; if the first connection fails, the command exits with status 1.

            Examples:
              livedata subscribe --domain occupancy
              livedata subscribe --dataset ds1 --building B --format json --count 10
              livedata subscribe --filter 'ds1/#' --timeout 30
            """
    )

    @OptionGroup(title: "Topic criteria")
    var criteria: CriteriaOptions

    @Option(help: ArgumentHelp("A raw MQTT filter instead of the component flags, such as 'ds1/#'.", valueName: "filter"))
    var filter: String?

    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @Option(help: "Output: text (aligned lines for people) or json (one object per line).")
    var format: OutputFormat = .text

    @Option(help: "Exit with status 0 after this many updates.")
    var count: Int?

    @Option(help: "Exit after this many seconds (status 1 if --count was not reached by then).")
    var timeout: Double?

    @Option(help: "QoS of the subscription.")
    var qos: MQTTQoS = .atLeastOnce

    @Flag(name: .shortAndLong, help: "Log connection details on standard error.")
    var verbose = false

    func validate() throws {
        if filter != nil && !criteria.isEmpty {
            throw ValidationError("give either --filter or component flags, not both")
        }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be more than 0 seconds") }
    }

    func run() async throws {
        let topicCriteria = try filter.map { text throws(TopicError) in TopicCriteria(filter: try TopicFilter(text)) }
            ?? criteria.criteria()
        let client = try MQTTClient(configuration: broker.configuration(), logger: makeLogger(verbose: verbose))
        try await client.connect()
        try await client.subscribe(topicCriteria.filter.string, qos: qos)
        // Started after the subscription succeeded: a refusal from here on comes from a
        // renewed subscription after a reconnection, and ends the command.
        let session = StreamingSession(client, timeout: timeout)
        defer { session.cancel() }

        var printer = UpdatePrinter(format: format)
        var received = 0
        for await message in client.messages {
            guard let update = printer.decode(message) else { continue }
            printer.print(update, retained: message.retain)
            received += 1
            if let count, received >= count { break }
        }
        await client.disconnect()
        if let refusal = await session.events.value {
            throw CommandFailure.runtime("\(refusal)")
        }
        if let count, received < count {
            throw CommandFailure.runtime(
                "timed out after \(timeout.map { "\($0)" } ?? "?") s with \(received) of \(count) updates")
        }
    }

    /// Tells the person at the terminal when the connection drops and comes back.
    /// - Returns: the error if the broker refused the renewed subscription (the client is
    ///   then disconnected, which ends the output).
    static func watch(_ client: MQTTClient) async -> MQTTError? {
        var lost = false
        for await event in client.events {
            switch event {
            case .error(let error):
                if case .connectionLost = error {
                    lost = true
                    printError("warning: \(error); reconnecting")
                }
            case .state(.connected) where lost:
                lost = false
                printError("note: reconnected")
            case .subscriptionFailed(_, let error):
                await client.disconnect()
                return error
            default:
                continue
            }
        }
        return nil
    }
}

/// What a command that prints a stream runs beside its loop: a watch of the connection
/// (``SubscribeCommand/watch(_:)``), and a timer that disconnects after `timeout` seconds,
/// which ends the client's messages and so the loop. Both are cancelled when the command
/// ends (`cancel()` in a `defer`); the loop awaits `events` for a refusal.
struct StreamingSession {
    let events: Task<MQTTError?, Never>
    let timer: Task<Void, any Error>?

    init(_ client: MQTTClient, timeout: Double?) {
        events = Task { await SubscribeCommand.watch(client) }
        timer = timeout.map { seconds in
            Task {
                try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                await client.disconnect()
            }
        }
    }

    func cancel() {
        events.cancel()
        timer?.cancel()
    }
}

/// A logger for a command: warnings by default, everything with `--verbose`.
func makeLogger(verbose: Bool) -> Logger {
    var logger = Logger(label: "livedata") { label in StreamLogHandler.standardError(label: label) }
    logger.logLevel = verbose ? .debug : .error
    return logger
}
