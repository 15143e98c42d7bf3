import Foundation

/// The repository the tests are built from: its root, for the files the tests read
/// (README.md, config/…), and a way to run its check scripts.
public enum Repository {
    /// The package's root directory (this file is `Tests/LiveDataTestSupport/Repository.swift`).
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A file or folder of the repository, by its path from the root.
    public static func url(_ path: String) -> URL { root.appendingPathComponent(path) }

    /// Runs one of the repository's scripts (`scripts/…`) from the root, with no arguments,
    /// to its end (killed after `timeout`).
    public static func runScript(_ path: String, timeout: Duration = .seconds(50)) async throws -> CommandRunner.Result {
        try await ChildProcess.start(url(path).path, [], in: root).result(timeout: timeout)
    }
}
