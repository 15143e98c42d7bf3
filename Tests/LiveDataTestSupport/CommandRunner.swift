import Foundation
import Synchronization

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

    /// Starts the command; returns the running process and a way to collect its result.
    public func start(_ arguments: [String], environment: [String: String] = [:]) throws -> Running {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        process.environment = merged
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return Running(process: process, output: output, error: error)
    }

    /// Runs the command to its end (killing it after `timeout`).
    public func run(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> Result {
        try await start(arguments).result(timeout: timeout)
    }

    public final class Running: Sendable {
        public let process: Process
        private let outputData = DataCollector()
        private let errorData = DataCollector()

        init(process: Process, output: Pipe, error: Pipe) {
            self.process = process
            outputData.collect(output.fileHandleForReading)
            errorData.collect(error.fileHandleForReading)
        }

        /// Standard output so far.
        public var standardOutput: String { outputData.text }
        public var standardError: String { errorData.text }

        /// Waits for the process to end; kills it after `timeout`.
        public func result(timeout: Duration = .seconds(30)) async throws -> Result {
            let deadline = ContinuousClock.now + timeout
            while process.isRunning && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
            outputData.waitForEnd()
            errorData.waitForEnd()
            return Result(
                status: process.terminationStatus, standardOutput: outputData.text, standardError: errorData.text)
        }
    }
}

/// Reads a pipe to its end on a background thread.
final class DataCollector: Sendable {
    private let data = Mutex(Data())
    private let done = DispatchSemaphore(value: 0)

    func collect(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                data.withLock { $0.append(chunk) }
            }
            done.signal()
        }
    }

    func waitForEnd() {
        _ = done.wait(timeout: .now() + 5)
    }

    var text: String {
        data.withLock { String(decoding: $0, as: UTF8.self) }
    }
}
