import ArgumentParser
import Foundation
import LiveDataConfiguration
import LiveDataServer
import Logging
import Mosquitto
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

            A start that cannot succeed ends with one error line naming the address or file and \
            the cause: exit 1 for an address it cannot listen on, a state file it cannot open or \
            a broker host name that does not resolve; exit 78 for a TLS or password file it \
            cannot read.

            Example:
              livedata serve --config config/livedata.yaml
            """
    )

    @Option(help: ArgumentHelp("The config file.", valueName: "path"))
    var config: String

    @Option(help: ArgumentHelp("Location shapes for the floor view (GeoJSON, as `livedata simulate --write-geometry` writes them); overrides the config's geometry: key.", valueName: "path"))
    var geometry: String?

    func run() async throws {
        var settings = try RulesCommand.load(config)
        if let geometry {
            guard let data = FileManager.default.contents(atPath: geometry) else {
                throw CommandFailure(message: "cannot read the geometry file \(geometry)", exitCode: 78)
            }
            do {
                settings.geometry = try VenueGeometry(geoJSON: data, file: geometry)
            } catch {
                for problem in error.problems { printError("error: \(problem)") }
                throw CommandFailure(message: "\(geometry) has \(error.problems.count) problems", exitCode: 78)
            }
        }
        var logger = Logger(label: "livedata") { label in LineLogHandler(label: label) }
        logger.logLevel = Logger.Level(rawValue: settings.log.level) ?? .info
        // A start that cannot succeed ends with one error line naming the address or file and
        // the cause, and a non-zero exit: systemd then shows why, rather than a start timeout.
        do {
            let daemon: LiveDataDaemon
            do {
                daemon = try await LiveDataDaemon(config: settings, configPath: config, logger: logger)
            } catch let error as MQTTError {
                // The broker settings cannot make a client (a password file that is not one line…).
                logger.error("\(error)")
                throw ExitCode(78)
            }
            // A service that fails (the HTTP server that cannot bind, a state file that cannot
            // be opened) stops the others as SIGTERM does, each its own way, rather than by
            // cancelling them.
            var configuration = ServiceGroupConfiguration(
                services: daemon.services.map { .init(service: $0, failureTerminationBehavior: .gracefullyShutdownGroup) },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            // systemd allows TimeoutStopSec; exit well within it even if the broker does not answer.
            configuration.maximumGracefulShutdownDuration = .seconds(5)
            // The last resort against a part that ignores cancellation: the process ends
            // (with a trap, so not as a clean stop) instead of waiting forever.
            configuration.maximumCancellationDuration = .seconds(5)
            try await ServiceGroup(configuration: configuration).run()
        } catch let failure as StartFailure {
            logger.error("\(failure)")
            throw ExitCode(failure.exitCode)
        } catch let code as ExitCode {
            throw code
        } catch {
            logger.error("stopped: \(error)")
            throw ExitCode(1)
        }
    }
}
