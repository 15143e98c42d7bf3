import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A Unix datagram socket standing in for systemd's `$NOTIFY_SOCKET`: collects what the
/// daemon sends (`READY=1`, `STATUS=…`, `STOPPING=1`…). Like systemd, it reads as messages
/// arrive (a thread of its own), unless told not to, to stand in for a manager that stalls.
public final class NotifySocket: Sendable {
    public let path: String
    private let inbox: Inbox

    /// The socket and what it received; the reading thread holds it, and closes it once
    /// the ``NotifySocket`` is gone.
    private final class Inbox: Sendable {
        let descriptor: Int32
        let received = Mutex<[String]>([])
        let closing = Atomic<Bool>(false)
        let reading: Bool

        init(descriptor: Int32, reading: Bool) {
            self.descriptor = descriptor
            self.reading = reading
        }

        deinit { close(descriptor) }

        func drain() {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                let message = String(decoding: buffer[0..<count], as: UTF8.self)
                received.withLock { $0.append(message) }
            }
        }
    }

    /// - Parameters:
    ///   - abstract: bind an abstract socket name (`@…`, as systemd may use) instead of a file.
    ///   - reads: read messages as they arrive; when `false`, only ``messages`` reads them.
    public init(abstract: Bool = false, reads: Bool = true) throws {
        if abstract {
            path = "@livedata-test-\(UUID().uuidString.prefix(8))"
        } else {
            path = try TestDirectory.make(prefix: "notify").appendingPathComponent("notify.sock").path
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
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
            if descriptor >= 0 { close(descriptor) }
            throw MosquittoBroker.Failure.toolFailed("cannot bind the notify socket at \(path)")
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        let inbox = Inbox(descriptor: descriptor, reading: reads)
        self.inbox = inbox
        guard reads else { return }
        Thread {
            var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            while !inbox.closing.load(ordering: .acquiring) {
                inbox.drain()
                _ = poll(&ready, 1, 50)
            }
        }.start()
    }

    deinit {
        inbox.closing.store(true, ordering: .releasing)
        if !path.hasPrefix("@") { unlink(path) }
    }

    /// Every message so far (each may hold several `KEY=value` lines).
    public var messages: [String] {
        if !inbox.reading { inbox.drain() }
        return inbox.received.withLock { $0 }
    }

    /// Waits until a message contains `line`.
    @discardableResult
    public func wait(for line: String, timeout: Duration = .seconds(15)) async -> Bool {
        let held = { (messages: [String]) in messages.contains { $0.split(separator: "\n").contains(Substring(line)) } }
        return (try? await polling(timeout: timeout, every: .milliseconds(20), { messages }, until: held).held) ?? false
    }
}
