import Foundation
import Subprocess
import Synchronization

#if canImport(System)
import System
#else
import SystemPackage
#endif

/// A child process (a broker, a daemon, a tool) started through swift-subprocess, which
/// starts it with a clean signal mask (a child of Foundation's `Process` inherits blocked
/// signals and ignores SIGTERM). Its output is collected as it arrives; it can be signalled
/// by its id and awaited with a time limit.
public final class ChildProcess: Sendable {
    /// How it ended.
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// What the child wrote, and whether it has ended (and been reaped).
    private final class State: Sendable {
        let output = Mutex<[UInt8]>([])
        let errors = Mutex<[UInt8]>([])
        let finished = Mutex(false)
    }

    public let processIdentifier: pid_t
    private let state: State
    private let ended: Task<Termination, any Error>

    private init(processIdentifier: pid_t, state: State, ended: Task<Termination, any Error>) {
        self.processIdentifier = processIdentifier
        self.state = state
        self.ended = ended
    }

    /// Starts `executable` (a path) with `arguments`, in the current environment updated by
    /// `environment`; standard input is the null device.
    /// - Throws: when it cannot be started.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], in directory: URL? = nil
    ) async throws -> ChildProcess {
        let state = State()
        let (started, reportStart) = AsyncStream<pid_t>.makeStream()
        var updates: [Environment.Key: String?] = [:]
        for (key, value) in environment { updates[Environment.Key(rawValue: key)!] = value }
        let ended = Task<Termination, any Error> {
            defer {
                state.finished.withLock { $0 = true }
                reportStart.finish()
            }
            let result = try await Subprocess.run(
                .path(FilePath(executable)), arguments: Arguments(arguments), environment: .inherit.updating(updates),
                workingDirectory: directory.map { FilePath($0.path) }, input: .none, output: .sequence, error: .sequence
            ) { execution in
                reportStart.yield(execution.processIdentifier.value)
                // Drain both pipes at once, so that neither fills up and blocks the child.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await chunk in execution.standardOutput {
                            chunk.withUnsafeBytes { bytes in state.output.withLock { $0.append(contentsOf: bytes) } }
                        }
                    }
                    group.addTask {
                        for try await chunk in execution.standardError {
                            chunk.withUnsafeBytes { bytes in state.errors.withLock { $0.append(contentsOf: bytes) } }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            switch result.terminationStatus {
            case .exited(let code): return .exited(code)
            case .signaled(let signal): return .signalled(signal)
            }
        }
        var iterator = started.makeAsyncIterator()
        guard let pid = await iterator.next() else {
            // It never started: `ended` holds why.
            _ = try await ended.value
            throw MosquittoBroker.Failure.toolFailed("\(executable) did not start")
        }
        return ChildProcess(processIdentifier: pid, state: state, ended: ended)
    }

    /// Standard output so far.
    public var standardOutput: String { state.output.withLock { String(decoding: $0, as: UTF8.self) } }
    /// Standard error so far.
    public var standardError: String { state.errors.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Sends a signal (SIGTERM, SIGHUP, SIGKILL…), unless it has ended: once reaped, its id
    /// may belong to another process.
    public func signal(_ signal: Int32) {
        guard isRunning else { return }
        kill(processIdentifier, signal)
    }

    /// Whether it has not ended yet.
    public var isRunning: Bool { !state.finished.withLock { $0 } }

    /// Waits for it to end; after `timeout`, kills it (SIGKILL) and waits for that.
    @discardableResult
    public func wait(timeout: Duration = .seconds(30)) async throws -> Termination {
        let ended = self.ended
        let pid = processIdentifier
        let killer = Task {
            // The deadline, cancelled when the process ends first.
            try await Task.sleep(for: timeout)
            kill(pid, SIGKILL)
        }
        defer { killer.cancel() }
        return try await ended.value
    }
}
