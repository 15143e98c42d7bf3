import Foundation

/// Runs the built `livedata` executable as a subprocess.
public struct CommandRunner: Sendable {
    public struct Result: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String

        public var outputLines: [String] { standardOutput.split(separator: "\n").map(String.init) }
        public var errorLines: [String] { standardError.split(separator: "\n").map(String.init) }
    }

    public let executable: URL

    public init() throws {
        // A given build (the load figures use a release daemon under debug tests).
        if let given = ProcessInfo.processInfo.environment["LIVEDATA_EXECUTABLE"] {
            executable = URL(fileURLWithPath: given)
            return
        }
        // The test bundle is built next to the products: .build/<triple>/debug/.
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
        }
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent("livedata")
            if FileManager.default.isExecutableFile(atPath: url.path) {
                executable = url
                return
            }
        }
        throw MosquittoBroker.Failure.toolFailed(
            "the livedata executable was not found next to the tests in \(directory.path); run `swift build` first")
    }

    /// Starts the command.
    public func start(_ arguments: [String], environment: [String: String] = [:]) async throws -> ChildProcess {
        try await ChildProcess.start(executable.path, arguments, environment: environment)
    }

    /// What the machine takes, now, to start and end the binary at all (`--version`): a
    /// test that bounds a start or a stop bounds what they add to it, so that a machine
    /// loaded by the rest of the suite does not fail it.
    public func startBaseline() async throws -> Duration {
        let started = ContinuousClock.now
        _ = try await run(["--version"])
        return ContinuousClock.now - started
    }

    /// Runs the command to its end (killing it after `timeout`).
    public func run(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> Result {
        try await start(arguments).result(timeout: timeout)
    }
}

extension ChildProcess {
    /// Waits for it to end (killing it after `timeout`): its status (128 + the signal when a
    /// signal ended it, as a shell tells it) and all it wrote.
    public func result(timeout: Duration = .seconds(30)) async throws -> CommandRunner.Result {
        let status: Int32 =
            switch try await wait(timeout: timeout) {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            }
        return CommandRunner.Result(status: status, standardOutput: standardOutput, standardError: standardError)
    }
}
