import Foundation
import LiveDataTestSupport
import Testing

/// A start that cannot succeed ends the process: one error line at the default log level
/// naming the address or file and the cause, and a non-zero exit, within 5 s. A broker that
/// refuses connections is the exception the README documents: the daemon retries, says so
/// at the default level each time, and a SIGTERM ends it at once.
@Suite("A start that fails ends the process", .serialized, .timeLimit(.minutes(3)))
struct StartFailureTests {
    /// The bound on the time from the start to the exit.
    static let bound = Duration.seconds(5)

    struct Setup {
        var brokerHost = "127.0.0.1"
        var brokerPort = 1883
        var listen = "127.0.0.1:0"
        var store: String
        var tls: [String] = []
    }

    static func yaml(_ setup: Setup) -> String {
        var file = DaemonConfigFile(brokerPort: setup.brokerPort, clientId: "start-failure-test", store: setup.store)
        file.brokerHost = setup.brokerHost
        file.brokerMembers = setup.tls
        file.listen = setup.listen
        return file.yaml
    }

    /// Runs `livedata serve` with `yaml` (or on `configPath` as it is) to its end.
    /// - Returns: what it wrote and its status, and how long it ran beyond what `livedata
    ///   --version` takes at the same moment.
    static func serve(yaml: String? = nil, configPath: String? = nil) async throws -> (CommandRunner.Result, Duration) {
        let path: String
        if let configPath {
            path = configPath
        } else {
            path = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("livedata.yaml").path
            try (yaml ?? "").write(toFile: path, atomically: true, encoding: .utf8)
        }
        let baseline = try await CommandRunner().startBaseline()
        let started = ContinuousClock.now
        let running = try await CommandRunner().start(["serve", "--config", path])
        let result = try await running.result(timeout: .seconds(30))
        return (result, max(.zero, ContinuousClock.now - started - baseline))
    }

    /// The lines logged at error level or above (`error [livedata] …`), or printed as an
    /// error by the command (`error: …`).
    static func errorLines(_ result: CommandRunner.Result) -> [String] { errorLines(result.standardError) }

    static func errorLines(_ standardError: String) -> [String] {
        standardError.split(separator: "\n").map(String.init).filter {
            $0.hasPrefix("error ") || $0.hasPrefix("error:") || $0.hasPrefix("critical ")
        }
    }

    /// Checks the exit: `status`, within the bound, and exactly one error line, naming each
    /// of `naming`.
    static func expectFailure(
        _ result: CommandRunner.Result, took: Duration, status: Int32, naming: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == status, "exit \(result.status):\n\(result.standardError.suffix(3000))", sourceLocation: sourceLocation)
        #expect(took <= bound, "exited after \(took)", sourceLocation: sourceLocation)
        let lines = errorLines(result)
        #expect(lines.count == 1, "error lines: \(lines)\n\(result.standardError.suffix(3000))", sourceLocation: sourceLocation)
        let line = lines.first ?? ""
        for part in naming {
            #expect(line.contains(part), "\"\(line)\" does not name \(part)", sourceLocation: sourceLocation)
        }
        print("start failure: exit \(result.status) after \(took): \(line)")
    }

    @Test("http.listen already taken (another program on the port): exit 1 naming the address and the cause")
    func listenAddressTaken() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let held = try HeldPort()
        defer { held.close() }
        let store = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("state.db").path
        let (result, took) = try await Self.serve(
            yaml: Self.yaml(Setup(brokerPort: broker.port, listen: "127.0.0.1:\(held.port)", store: store)))
        Self.expectFailure(result, took: took, status: 1, naming: ["127.0.0.1:\(held.port)", "http.listen", "Address already in use"])
    }

    @Test("http.listen on an address this machine does not have: exit 1 naming the address and the cause")
    func listenAddressNotHere() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let store = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("state.db").path
        // 192.0.2.0/24 is for documentation (RFC 5737): no interface has it.
        let (result, took) = try await Self.serve(yaml: Self.yaml(Setup(brokerPort: broker.port, listen: "192.0.2.1:8080", store: store)))
        Self.expectFailure(result, took: took, status: 1, naming: ["192.0.2.1:8080", "Cannot assign requested address"])
    }

    @Test("the state file's directory cannot be written: exit 1 naming the file and the cause")
    func stateDirectoryNotWritable() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        // sysfs takes no new files, not even from root.
        let store = "/sys/livedata-start-failure-\(UUID().uuidString).db"
        let (result, took) = try await Self.serve(yaml: Self.yaml(Setup(brokerPort: broker.port, store: store)))
        let cause = getuid() == 0 ? "Operation not permitted" : "Permission denied"
        Self.expectFailure(result, took: took, status: 1, naming: [store, cause])
    }

    @Test("a directory in the state file's place: exit 1 naming the file and the cause; the directory is left as it is")
    func directoryInPlaceOfStateFile() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let store = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("state.db")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: false)
        let (result, took) = try await Self.serve(yaml: Self.yaml(Setup(brokerPort: broker.port, store: store.path)))
        Self.expectFailure(result, took: took, status: 1, naming: [store.path, "a directory is in its place"])
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: store.path, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    @Test("a config file that cannot be read: exit 78 naming the file and the cause")
    func unreadableConfig() async throws {
        let path = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("livedata.yaml")
        try FileManager.default.createDirectory(at: path, withIntermediateDirectories: false)
        let (result, took) = try await Self.serve(configPath: path.path)
        #expect(result.status == 78, "\(result.standardError)")
        #expect(took <= Self.bound, "exited after \(took)")
        let naming = Self.errorLines(result).filter { $0.contains(path.path) && $0.contains("cannot be read") }
        #expect(naming.count == 1, "\(result.standardError)")
    }

    @Test("a keepalive under 5 s: exit 78 with the reason, before anything starts")
    func keepaliveTooShort() async throws {
        let store = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("state.db").path
        let yaml = Self.yaml(Setup(store: store)).replacingOccurrences(of: "keepalive: 5s", with: "keepalive: 2s")
        let (result, took) = try await Self.serve(yaml: yaml)
        #expect(result.status == 78, "\(result.standardError)")
        #expect(took <= Self.bound, "exited after \(took)")
        let naming = Self.errorLines(result).filter { $0.contains("broker.keepalive must be at least 5s") && $0.contains("found 2s") }
        #expect(naming.count == 1, "\(result.standardError)")
        #expect(!result.standardError.contains("starting"), "refused at load, before the daemon starts")
    }

    @Test("a TLS file that cannot be read: exit 78 naming the file, its key and the cause")
    func unreadableTLSFile() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "start-failure")
        let ca = directory.appendingPathComponent("ca.pem").path
        let setup = Setup(brokerPort: broker.port, store: directory.appendingPathComponent("state.db").path, tls: ["tls: {caFile: \(ca)}"])
        let (result, took) = try await Self.serve(yaml: Self.yaml(setup))
        Self.expectFailure(result, took: took, status: 78, naming: [ca, "broker.tls.caFile", "No such file or directory"])
    }

    @Test("a broker host name that does not resolve: exit 1 naming the host and the cause")
    func brokerHostUnresolvable() async throws {
        let store = try TestDirectory.make(prefix: "start-failure").appendingPathComponent("state.db").path
        // .invalid never resolves (RFC 2606).
        let (result, took) = try await Self.serve(yaml: Self.yaml(Setup(brokerHost: "no-such-broker.invalid", store: store)))
        Self.expectFailure(result, took: took, status: 1, naming: ["no-such-broker.invalid", "broker.host", "not known"])
    }

    @Test("a broker that refuses connections: retried, a warning naming the address at each attempt; SIGTERM ends it with exit 0")
    func brokerRefuses() async throws {
        let port = try freeLoopbackPort()
        let directory = try TestDirectory.make(prefix: "start-failure")
        let path = directory.appendingPathComponent("livedata.yaml").path
        try Self.yaml(Setup(brokerPort: port, store: directory.appendingPathComponent("state.db").path))
            .write(toFile: path, atomically: true, encoding: .utf8)
        let running = try await CommandRunner().start(["serve", "--config", path])
        func refusals() -> [Substring] {
            running.standardError.split(separator: "\n").filter {
                $0.hasPrefix("warning ") && $0.contains("127.0.0.1:\(port)") && $0.contains("refused")
            }
        }
        try await eventually("two refused attempts logged", timeout: .seconds(10), every: .milliseconds(100)) { refusals().count >= 2 }
        #expect(running.isRunning, "the daemon keeps retrying a broker that refuses")
        #expect(Self.errorLines(running.standardError).isEmpty, "retrying is no error")
        let stoppedAt = ContinuousClock.now
        running.signal(SIGTERM)
        let result = try await running.result(timeout: .seconds(30))
        let took = ContinuousClock.now - stoppedAt
        #expect(result.status == 0, "\(result.standardError.suffix(2000))")
        #expect(took <= Self.bound, "stopped \(took) after SIGTERM")
        print("start failure: broker refusing, \(refusals().count) attempts logged, SIGTERM to exit \(took): \(refusals().first ?? "")")
    }
}
