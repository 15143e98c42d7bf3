import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A real mosquitto broker on a free loopback port, started for one test and killed after.
///
/// When mosquitto is not installed this fails (never skips) and says how to install it.
public final class MosquittoBroker: Sendable {
    /// Broker settings beyond the listener.
    public struct Options: Sendable {
        /// Users and passwords; when set, anonymous clients are refused.
        public var users: [String: String] = [:]
        /// The ACL file's text (mosquitto's `acl_file` format).
        public var acl: String?
        /// Serve TLS with this material instead of plain TCP.
        public var tls: TLSMaterial?
        /// Ask clients for a certificate signed by the test CA.
        public var requireClientCertificate = false
        /// Per-client subscribe and publish rules through mosquitto's dynamic security plugin,
        /// which (unlike `acl_file` in mosquitto 2.0) refuses a SUBSCRIBE in its SUBACK.
        public var dynamicSecurity: DynamicSecurity?
        /// Extra configuration lines.
        public var extra: [String] = []
        /// Bridges to other brokers, written after everything else (a bridge's options
        /// follow its `connection` line).
        public var bridges: [Bridge] = []

        public init(
            users: [String: String] = [:], acl: String? = nil, tls: TLSMaterial? = nil,
            requireClientCertificate: Bool = false, dynamicSecurity: DynamicSecurity? = nil, extra: [String] = [],
            bridges: [Bridge] = []
        ) {
            self.dynamicSecurity = dynamicSecurity
            self.users = users
            self.acl = acl
            self.tls = tls
            self.requireClientCertificate = requireClientCertificate
            self.extra = extra
            self.bridges = bridges
        }
    }

    /// A bridge from this broker to another one on loopback: mosquitto's `connection`
    /// section, with persistent sessions on both sides (`cleansession false`), so that a
    /// QoS 1 message published while the link is down waits in the bridge's queue.
    public struct Bridge: Sendable {
        /// The connection's name.
        public var name: String
        /// The other broker's loopback port.
        public var remotePort: Int
        /// The client id at the other broker, which names the bridge's state topic there and
        /// here (`$SYS/broker/connection/{remoteClientID}/state`, `1` or `0`); two bridges
        /// into one broker need two.
        public var remoteClientID: String
        /// `topic` lines' arguments: `pattern [in|out|both [qos]]`.
        public var topics: [String]
        /// More lines of the section.
        public var extra: [String]

        public init(name: String, remotePort: Int, remoteClientID: String, topics: [String], extra: [String] = []) {
            self.name = name
            self.remotePort = remotePort
            self.remoteClientID = remoteClientID
            self.topics = topics
            self.extra = extra
        }

        var lines: [String] {
            [
                "connection \(name)",
                "address 127.0.0.1:\(remotePort)",
                "remote_clientid \(remoteClientID)",
                "cleansession false",
                // A test cannot wait mosquitto's default 5 to 30 s for the link to come back.
                "restart_timeout 1",
            ] + topics.map { "topic \($0)" } + extra
        }

        /// The topic of the bridge's state (`1` connected, `0` not), retained on both brokers.
        public var stateTopic: String { "$SYS/broker/connection/\(remoteClientID)/state" }
    }

    public enum Failure: Error, CustomStringConvertible {
        case notInstalled
        case didNotStart(port: Int, log: String)
        case toolFailed(String)

        public var description: String {
            switch self {
            case .notInstalled:
                return "mosquitto is not installed; install it with `apt-get install mosquitto mosquitto-clients` "
                    + "(scripts/test does this), or set MOSQUITTO to the broker binary"
            case .didNotStart(let port, let log):
                return "mosquitto did not start listening on 127.0.0.1:\(port); its log:\n\(log)"
            case .toolFailed(let message):
                return message
            }
        }
    }

    public let port: Int
    public let directory: URL
    public let options: Options
    private let process = Mutex<ChildProcess?>(nil)
    /// While the broker is down, a socket bound to its port (not listening: a connection is
    /// refused, as with nothing there), so that a broker another test starts meanwhile on a
    /// port it found free cannot be given this one, and this broker's clients reach that one
    /// instead (seen: a subscription refused by another test's access list). -1: none.
    private let portHold = Mutex<Int32>(-1)

    /// Starts a broker and waits until it accepts connections.
    public static func start(_ options: Options = Options()) async throws -> MosquittoBroker {
        let directory = try TestDirectory.make(prefix: "mosquitto")
        // mosquitto drops to its own user and must still write its log here.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        var lastError: (any Error)?
        // A free port can be taken between probing and binding; try a few.
        for _ in 0..<5 {
            let broker = MosquittoBroker(port: try freeLoopbackPort(), directory: directory, options: options)
            do {
                try await broker.writeConfiguration()
                try await broker.launch()
                return broker
            } catch let error as Failure {
                if case .notInstalled = error { throw error }
                lastError = error
            }
        }
        throw lastError!
    }

    private init(port: Int, directory: URL, options: Options) {
        self.port = port
        self.directory = directory
        self.options = options
    }

    deinit {
        // A deinit cannot wait: the kill is enough, the child's task reaps it.
        process.withLock { $0 }?.signal(SIGKILL)
        releasePort()
    }

    /// Holds the port while the broker is down (see `portHold`). With `SO_REUSEADDR`, as
    /// mosquitto binds, so that the connections the kill left closing (`TIME_WAIT`) do not
    /// stop it: a port bound this way is never the one ``freeLoopbackPort()`` is given.
    private func holdPort() {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return }
        var on: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard withLoopbackAddress(port: port, { bind(socket, $0, $1) }) == 0 else {
            close(socket)
            return
        }
        let previous = portHold.withLock { hold in
            defer { hold = socket }
            return hold
        }
        if previous >= 0 { close(previous) }
    }

    /// Lets the port go, for the broker to bind it again.
    private func releasePort() {
        let held = portHold.withLock { hold in
            defer { hold = -1 }
            return hold
        }
        if held >= 0 { close(held) }
    }

    /// The mosquitto binary: `$MOSQUITTO`, or where Debian installs it, or on `PATH`.
    public static func executable() throws -> String {
        if let path = ProcessInfo.processInfo.environment["MOSQUITTO"] { return path }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in ["/usr/sbin", "/usr/local/sbin"] + path.split(separator: ":").map(String.init) {
            let candidate = directory + "/mosquitto"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw Failure.notInstalled
    }

    /// Kills the broker (SIGKILL: what a crash does; it loses what it had not yet saved)
    /// and waits until it is gone (until then, its port is taken).
    public func stop() async {
        let running = process.withLock { process in
            defer { process = nil }
            return process
        }
        guard let running else { return }
        running.signal(SIGKILL)
        _ = try? await running.wait(timeout: .seconds(10))
        holdPort()
    }

    /// Stops the broker with SIGTERM, as systemd would: it saves its persistence file first.
    public func terminate(timeout: Duration = .seconds(10)) async throws {
        let running = process.withLock { process in
            defer { process = nil }
            return process
        }
        guard let running else { return }
        running.signal(SIGTERM)
        try await running.wait(timeout: timeout)
        holdPort()
    }

    /// Makes the broker write its persistence file now (SIGUSR1), as its autosave does, and
    /// waits until its log says it did. What it takes after this, a ``stop()`` loses.
    /// - Returns: whether it saved within `timeout`.
    @discardableResult
    public func save(timeout: Duration = .seconds(10)) async throws -> Bool {
        let saved = { [self] in log.components(separatedBy: "Saving in-memory database").count - 1 }
        let before = saved()
        guard let running = process.withLock({ $0 }) else { return false }
        running.signal(SIGUSR1)
        return try await polling(timeout: timeout, every: .milliseconds(20), { saved() > before }, until: { $0 }).held
    }

    /// Kills the broker and starts it again on the same port.
    public func restart(after delay: Duration = .zero) async throws {
        await stop()
        // The time the broker is away, as the caller asked: the fault, not a wait.
        if delay > .zero { try await Task.sleep(for: delay) }
        try await launch()
    }

    /// Starts the broker again on the same port after ``stop()`` or ``terminate(timeout:)``
    /// (with whatever persistence file it left).
    public func relaunch() async throws {
        try await launch()
    }

    /// The broker's log so far.
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("mosquitto.log"), encoding: .utf8)) ?? ""
    }

    private func writeConfiguration() async throws {
        var lines = [
            "listener \(port) 127.0.0.1",
            "persistence false",
            // Where `persistence true` (in `extra`) saves, rather than the working directory.
            "persistence_location \(directory.path)/",
            "log_dest file \(directory.path)/mosquitto.log",
            "log_type all",
            "max_queued_messages 100000",
        ]
        if options.users.isEmpty {
            lines.append("allow_anonymous true")
        } else {
            let passwords = directory.appendingPathComponent("passwords")
            try "".write(to: passwords, atomically: true, encoding: .utf8)
            for (user, password) in options.users.sorted(by: { $0.key < $1.key }) {
                try await run("/usr/bin/mosquitto_passwd", ["-b", passwords.path, user, password])
            }
            try makeReadable(passwords)
            lines += ["allow_anonymous false", "password_file \(passwords.path)"]
        }
        if let acl = options.acl {
            let file = directory.appendingPathComponent("acl")
            try acl.write(to: file, atomically: true, encoding: .utf8)
            try makeReadable(file)
            lines.append("acl_file \(file.path)")
        }
        if let tls = options.tls {
            lines += ["cafile \(tls.caCertificate)", "certfile \(tls.serverCertificate)", "keyfile \(tls.serverKey)"]
            if options.requireClientCertificate { lines.append("require_certificate true") }
        }
        if let security = options.dynamicSecurity {
            let file = directory.appendingPathComponent("dynamic-security.json")
            try await security.write(to: file)
            lines += [
                "plugin \(try DynamicSecurity.pluginPath())",
                "plugin_opt_config_file \(file.path)",
            ]
        }
        lines += options.extra
        lines += options.bridges.flatMap(\.lines)
        let file = directory.appendingPathComponent("mosquitto.conf")
        try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        try makeReadable(file)
    }

    private func launch() async throws {
        // In the moment between letting the port go and the broker binding it, an outgoing
        // connection of another test can be given it as its local port (the kernel takes
        // ephemeral ports from the same range): the broker then finds it taken and exits.
        // Such a connection is usually short-lived; try again a few times before failing.
        for attempt in 0..<5 {
            if attempt > 0 { try await Task.sleep(for: .milliseconds(200)) }  // the retry's backoff
            releasePort()
            let process = try await ChildProcess.start(try Self.executable(), ["-c", directory.appendingPathComponent("mosquitto.conf").path])
            self.process.withLock { $0 = process }
            // A broker that exits (its port taken) ends the wait at once.
            let port = self.port
            let listening = try await polling(timeout: .seconds(10), every: .milliseconds(20), { process.isRunning && canConnect(port: port) }) {
                $0 || !process.isRunning
            }
            if listening.value { return }
            await stop()
            guard log.contains("Address already in use") else { break }
        }
        throw Failure.didNotStart(port: port, log: log)
    }
}

/// Runs a helper tool and fails with its output if it fails.
@discardableResult
func run(_ tool: String, _ arguments: [String], in directory: URL? = nil) async throws -> String {
    let child: ChildProcess
    do {
        child = try await ChildProcess.start(tool, arguments, in: directory)
    } catch {
        throw MosquittoBroker.Failure.toolFailed(
            "cannot run \(tool): \(error); install it (scripts/test installs mosquitto-clients and openssl)")
    }
    let result = try await child.result(timeout: .seconds(60))
    let text = result.standardOutput + result.standardError
    guard result.status == 0 else {
        throw MosquittoBroker.Failure.toolFailed("\(tool) \(arguments.joined(separator: " ")) failed:\n\(text)")
    }
    return text
}

/// mosquitto drops to its own user before reading its files, so they must be world-readable.
func makeReadable(_ url: URL) throws {
    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: url.path)
}

/// Temporary directories that the broker's user can read, removed when the test process
/// exits (brokers, daemons and sockets may use them until the last test ends).
public enum TestDirectory {
    private static let made = Mutex<[URL]>([])
    private static let removalAtExit: Void = {
        atexit { TestDirectory.removeAll() }
    }()

    public static func make(prefix: String) throws -> URL {
        _ = removalAtExit
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "livedata-\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(
            at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        made.withLock { $0.append(url) }
        return url
    }

    private static func removeAll() {
        for url in made.withLock({ $0 }) { try? FileManager.default.removeItem(at: url) }
    }
}

/// The ports ``freeLoopbackPort()`` has handed out in this process: never handed out again.
/// A broker that restarts lets its port go for a moment before it binds it again (see
/// `MosquittoBroker.portHold`); another test asking for a free port in that moment would
/// otherwise be given it.
private let handedOut = Mutex<Set<Int>>([])

/// A loopback port that nothing listens on right now, and that no earlier call in this
/// process returned.
public func freeLoopbackPort() throws -> Int {
    for _ in 0..<100 {
        let port = try anyFreeLoopbackPort()
        if handedOut.withLock({ $0.insert(port).inserted }) { return port }
    }
    throw MosquittoBroker.Failure.toolFailed("no loopback port that was not handed out before")
}

private func anyFreeLoopbackPort() throws -> Int {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { throw MosquittoBroker.Failure.toolFailed("socket() failed") }
    defer { close(socket) }
    guard withLoopbackAddress(port: 0, { bind(socket, $0, $1) }) == 0 else { throw MosquittoBroker.Failure.toolFailed("bind() failed") }
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts TCP connections on a loopback port.
public func canConnect(port: Int) -> Bool {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return false }
    defer { close(socket) }
    return withLoopbackAddress(port: port, { connect(socket, $0, $1) }) == 0
}

/// One user whose subscriptions and publishes are limited to patterns; everything else is
/// refused (the plugin's default).
public struct DynamicSecurity: Sendable {
    public var username: String
    public var password: String
    public var subscribeAllowed: [String]
    public var publishAllowed: [String]

    public init(username: String, password: String, subscribeAllowed: [String], publishAllowed: [String] = []) {
        self.username = username
        self.password = password
        self.subscribeAllowed = subscribeAllowed
        self.publishAllowed = publishAllowed
    }

    static func pluginPath() throws -> String {
        let candidates = [
            "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so",
            "/usr/lib/aarch64-linux-gnu/mosquitto_dynamic_security.so",
            "/usr/lib/mosquitto_dynamic_security.so",
        ]
        guard let path = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
            throw MosquittoBroker.Failure.toolFailed(
                "mosquitto's dynamic security plugin is missing; install it with `apt-get install mosquitto`")
        }
        return path
    }

    func write(to file: URL) async throws {
        // mosquitto_ctrl hashes the password; the roles are then rewritten to ours.
        try await run("/usr/bin/mosquitto_ctrl", ["dynsec", "init", file.path, username, password])
        let data = try Data(contentsOf: file)
        guard var root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            var roles = root["roles"] as? [[String: Any]], !roles.isEmpty
        else {
            throw MosquittoBroker.Failure.toolFailed("unexpected dynamic security file from mosquitto_ctrl")
        }
        let acls =
            subscribeAllowed.map { ["acltype": "subscribePattern", "topic": $0, "allow": true] as [String: Any] }
            + publishAllowed.map { ["acltype": "publishClientSend", "topic": $0, "allow": true] as [String: Any] }
        roles[0]["acls"] = acls
        root["roles"] = roles
        try JSONSerialization.data(withJSONObject: root).write(to: file)
        try makeReadable(file)
    }
}

/// Calls `body` (`bind`, `connect`) with `127.0.0.1:port` as a socket address and its length.
public func withLoopbackAddress(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}
