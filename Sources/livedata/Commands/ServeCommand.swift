import ArgumentParser
import LiveDataConfiguration
import LiveDataServer
import Logging
import ServiceLifecycle

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the daemon: subscribe, derive styles, publish what changes.",
        discussion: """
            Loads and checks the config (exit 78 when it is not valid), restores the state file, \
            connects to the broker (retrying while it is down: the daemon waits, it does not \
            exit), subscribes the criteria and tells systemd it is ready (Type=notify). SIGHUP \
            reloads styles, rules and catalog without reconnecting (a bad new config is logged \
            and the old one keeps running); SIGTERM or SIGINT stops taking updates, publishes \
            offline, disconnects and writes the store. Logs go to standard error, one line per \
            event.

            Example:
              livedata serve --config config/livedata.yaml
            """
    )

    @Option(help: ArgumentHelp("The config file.", valueName: "path"))
    var config: String

    func run() async throws {
        let settings = try RulesCommand.load(config)
        var logger = Logger(label: "livedata") { label in LineLogHandler(label: label) }
        logger.logLevel = Logger.Level(rawValue: settings.log.level) ?? .info
        let daemon = try await LiveDataDaemon(config: settings, configPath: config, logger: logger)
        var configuration = ServiceGroupConfiguration(
            services: daemon.services.map { .init(service: $0) }, gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger)
        // systemd allows TimeoutStopSec; exit well within it even if the broker does not answer.
        configuration.maximumGracefulShutdownDuration = .seconds(5)
        let group = ServiceGroup(configuration: configuration)
        try await group.run()
    }
}
