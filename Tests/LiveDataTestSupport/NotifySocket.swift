import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A Unix datagram socket standing in for systemd's `$NOTIFY_SOCKET`: collects what the
/// daemon sends (`READY=1`, `STATUS=…`, `STOPPING=1`…).
public final class NotifySocket: Sendable {
    public let path: String
    private let descriptor: Int32
    private let received = Mutex<[String]>([])

    /// - Parameter abstract: bind an abstract socket name (`@…`, as systemd may use) instead of a file.
    public init(abstract: Bool = false) throws {
        if abstract {
            path = "@livedata-test-\(UUID().uuidString.prefix(8))"
        } else {
            path = try TestDirectory.make(prefix: "notify").appendingPathComponent("notify.sock").path
        }
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard descriptor >= 0, bound == 0 else {
            throw MosquittoBroker.Failure.toolFailed("cannot bind the notify socket at \(path)")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    deinit {
        close(descriptor)
        if !path.hasPrefix("@") { unlink(path) }
    }

    /// Every message so far (each may hold several `KEY=value` lines).
    public var messages: [String] {
        drain()
        return received.withLock { $0 }
    }

    /// Waits until a message contains `line`.
    @discardableResult
    public func wait(for line: String, timeout: Duration = .seconds(15)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if messages.contains(where: { $0.split(separator: "\n").contains(Substring(line)) }) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            let message = String(decoding: buffer[0..<count], as: UTF8.self)
            received.withLock { $0.append(message) }
        }
    }
}
