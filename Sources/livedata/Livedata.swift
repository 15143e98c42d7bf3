import ArgumentParser
// Linked for its malloc, which then serves the whole process (see `LiveDataDaemon.heapAllocator`).
import CMimalloc
import Foundation
import LiveTopics
import Mosquitto

/// The `livedata` command: live data for indoor maps, from an MQTT broker.
struct Livedata: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livedata",
        abstract: "Live data for indoor maps: subscribe to, publish and inspect seven-part MQTT topics.",
        discussion: """
            Topics have seven levels: dataset/venue/building/floor/room/location/domain, \
            for example ds1/hq/B/F3/R7/room-7/occupancy.

            Examples:
              livedata subscribe --domain occupancy
              livedata publish --dataset ds1 --venue hq --building B --floor F3 --room R7 \\
                  --location room-7 --domain occupancy nrOfPeople=3 capacity=8
              livedata topic match 'ds1/+/B/#' ds1/hq/B/F3/R7/room-7/occupancy
              livedata rules check config/livedata.yaml
              livedata serve --config config/livedata.yaml
              livedata simulate --rate 50

            Exit codes: 0 ok, 1 runtime failure, 2 usage error, 78 bad configuration.
            """,
        version: "0.6.0",
        subcommands: [
            ServeCommand.self, SubscribeCommand.self, PublishCommand.self, SimulateCommand.self, TopicCommand.self,
            RulesCommand.self, WatchCommand.self,
        ]
    )
}

/// A failure to report on one line and exit with a code.
struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    var exitCode: Int32

    static func usage(_ message: String) -> CommandFailure { CommandFailure(message: message, exitCode: 2) }
    static func runtime(_ message: String) -> CommandFailure { CommandFailure(message: message, exitCode: 1) }

    var description: String { message }
}

@main
enum Main {
    static func main() async {
        do {
            var command = try Livedata.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(Self.report(error))
        }
    }

    /// Prints an error the way a person can act on it and returns the exit code.
    static func report(_ error: any Error) -> Int32 {
        switch error {
        case let failure as CommandFailure:
            printError("error: \(failure.message)")
            return failure.exitCode
        case let error as TopicError:
            printError("error: \(error)")
            return 2
        case let error as MQTTError:
            printError("error: \(error)")
            if case .invalidConfiguration = error { return 2 }
            return 1
        case let code as ExitCode:
            return code.rawValue
        default:
            let code = Livedata.exitCode(for: error)
            let message = Livedata.fullMessage(for: error)
            if code == .success {
                if !message.isEmpty { printLine(message) }
                return 0
            }
            printError(message)
            // Argument errors are usage errors: exit 2, as the command's help promises.
            return code == .validationFailure ? 2 : code.rawValue
        }
    }
}

/// Writes one line to standard output at once (unbuffered, so a pipe sees every update
/// as it arrives).
func printLine(_ line: String) {
    writeOutput(line + "\n")
}

/// Writes `text` to standard output. A reader that went away (`livedata subscribe | head`)
/// ends the command quietly with status 0, as a shell pipeline expects.
func writeOutput(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { buffer in write(STDOUT_FILENO, buffer.baseAddress, buffer.count) }
        if written < 0 {
            if errno == EINTR { continue }
            if errno == EPIPE { exit(0) }
            return
        }
        bytes = bytes.dropFirst(written)
    }
}

/// Writes one line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
