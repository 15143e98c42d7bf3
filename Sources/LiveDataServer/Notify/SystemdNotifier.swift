import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The systemd notify protocol, without libsystemd: each message is one datagram to the
/// Unix socket named by `$NOTIFY_SOCKET` (a path, or an abstract name starting with `@`).
/// Without that variable (not under systemd) every call does nothing.
///
/// Sending never blocks for long: a manager that does not read its socket (the queue of a
/// Unix datagram socket holds `net.unix.max_dgram_qlen` messages, 10 by default) must not
/// stall the pipeline or the shutdown. `STATUS=` and `WATCHDOG=1` are dropped when the queue
/// is full (the next tick sends them again); the state changes (`READY=1`, `RELOADING=1`,
/// `STOPPING=1`, `EXTEND_TIMEOUT_USEC=`) wait up to ``stateChangeWait`` for room.
public struct SystemdNotifier: Sendable {
    /// Where messages go, or `nil` when not under systemd.
    public let socketPath: String?
    /// Half of `$WATCHDOG_USEC`, when systemd watches us.
    public let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        var interval: Duration?
        if let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 {
            // WATCHDOG_PID, when set, names the process that must ping.
            if let pid = environment["WATCHDOG_PID"].flatMap(Int32.init), pid != getpid() {
                interval = nil
            } else {
                interval = .microseconds(microseconds / 2)
            }
        }
        watchdogInterval = path == nil ? nil : interval
    }

    /// How long a state change waits for room in a full notify socket before it is given up.
    public static let stateChangeWait: Duration = .milliseconds(500)

    /// `READY=1`: restored and connected.
    public func ready(status: String? = nil) {
        send("READY=1" + (status.map { "\nSTATUS=\($0)" } ?? ""), waitingUpTo: Self.stateChangeWait)
    }
    /// `STATUS=…`: one line for `systemctl status`.
    public func status(_ text: String) { send("STATUS=\(text)") }
    /// `WATCHDOG=1`, when systemd watches us.
    public func watchdog() {
        if watchdogInterval != nil { send("WATCHDOG=1") }
    }
    /// `RELOADING=1`, with the monotonic time systemd asks for.
    public func reloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(monotonicMicroseconds())", waitingUpTo: Self.stateChangeWait)
    }
    /// `EXTEND_TIMEOUT_USEC=…`: the start (or stop) takes up to `duration` more from now,
    /// whatever `TimeoutStartSec=` says; sent while restoring and while the broker is away.
    public func extendTimeout(_ duration: Duration) {
        send("EXTEND_TIMEOUT_USEC=\(duration.nanoseconds / 1000)", waitingUpTo: Self.stateChangeWait)
    }
    /// `STOPPING=1`.
    public func stopping() { send("STOPPING=1", waitingUpTo: Self.stateChangeWait) }

    /// Sends one message without blocking; while the manager's queue is full, tries again
    /// every millisecond for up to `patience`.
    /// - Returns: whether it was sent (`false` when not under systemd, on error, or when the
    ///   queue stayed full).
    @discardableResult
    public func send(_ message: String, waitingUpTo patience: Duration = .zero) -> Bool {
        guard let socketPath, !socketPath.isEmpty else { return false }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        // An abstract socket name is written with a leading '@' and starts with NUL.
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: path)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path.first == 0 ? 0 : 1))
        let bytes = Array(message.utf8)
        let deadline = ContinuousClock.now + patience
        while true {
            let sent = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    sendto(descriptor, bytes, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), socketAddress, length)
                }
            }
            if sent == bytes.count { return true }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK, ContinuousClock.now < deadline else { return false }
            usleep(1000)
        }
    }

    private func monotonicMicroseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000 + UInt64(spec.tv_nsec) / 1000
    }
}
