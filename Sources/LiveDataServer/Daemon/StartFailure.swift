import Glibc

/// Why the daemon cannot start: each ends the process with one error line naming the address
/// or file and the cause, and a non-zero exit (`livedata serve`), rather than a daemon that
/// waits for something that cannot come.
public enum StartFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// An address the daemon listens on (`key`, such as `http.listen`) cannot be bound.
    case cannotListen(address: String, key: String, cause: String)
    /// The state file, or the journal directory beside it, cannot be opened or created.
    case stateFile(path: String, cause: String)
    /// The intake journal beside the state file cannot be created or opened.
    case journal(path: String, cause: String)
    /// A file the config names (`key`: a TLS file, the password file) cannot be read.
    case unreadableFile(path: String, key: String, cause: String)
    /// The broker's host name does not resolve (a temporary failure of the resolver is retried instead).
    case brokerHost(host: String, cause: String)

    public var description: String {
        switch self {
        case .cannotListen(let address, let key, let cause): "cannot listen on \(address) (\(key)): \(cause)"
        case .stateFile(let path, let cause): "cannot open the state file \(path): \(cause)"
        case .journal(let path, let cause): "cannot open the intake journal \(path) (beside store.path): \(cause)"
        case .unreadableFile(let path, let key, let cause): "cannot read \(path) (\(key)): \(cause)"
        case .brokerHost(let host, let cause): "cannot resolve the broker host \(host) (broker.host): \(cause)"
        }
    }

    /// The process's exit code: 78 (EX_CONFIG) for a file the config names, which only a
    /// change of the config or of that file mends; 1 otherwise.
    public var exitCode: Int32 {
        if case .unreadableFile = self { 78 } else { 1 }
    }

    /// Throws ``unreadableFile(path:key:cause:)`` unless `path` is a file this process can
    /// read. Files read when the daemon connects are checked at the start, so that one that
    /// cannot be read ends the start instead of failing every connection attempt.
    static func checkReadable(_ path: String, key: String) throws(StartFailure) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw .unreadableFile(path: path, key: key, cause: String(cString: strerror(errno)))
        }
        if (info.st_mode & S_IFMT) == S_IFDIR { throw .unreadableFile(path: path, key: key, cause: "it is a directory") }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadableFile(path: path, key: key, cause: String(cString: strerror(errno))) }
        close(descriptor)
    }
}
