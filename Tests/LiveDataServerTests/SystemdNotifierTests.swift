import Foundation
import LiveDataServer
import LiveDataTestSupport
import Testing

@Suite("systemd notify protocol")
struct SystemdNotifierTests {
    @Test("messages reach a socket given by path or by abstract name", arguments: [false, true])
    func delivery(abstract: Bool) async throws {
        let socket = try NotifySocket(abstract: abstract)
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path])
        #expect(notifier.send("STATUS=hello"))
        notifier.ready(status: "42 locations")
        notifier.reloading()
        notifier.stopping()
        #expect(await socket.wait(for: "STOPPING=1"))
        let messages = socket.messages
        #expect(messages.first == "STATUS=hello")
        #expect(messages.contains("READY=1\nSTATUS=42 locations"))
        #expect(messages.contains { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") })
    }

    @Test("a manager that does not read: status lines are dropped at once, a state change waits a little, nothing blocks")
    func unreadSocket() async throws {
        let socket = try NotifySocket(abstract: false, reads: false)
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": socket.path])
        let started = ContinuousClock.now
        var sent = 0
        for number in 0..<200 where notifier.send("STATUS=line \(number)") { sent += 1 }
        // The queue holds net.unix.max_dgram_qlen datagrams (10 by default); the rest are refused.
        #expect(sent > 0 && sent < 200, "\(sent) of 200 sent")
        #expect(ContinuousClock.now - started < .seconds(1))
        let beforeStop = ContinuousClock.now
        notifier.stopping()
        let waited = ContinuousClock.now - beforeStop
        #expect(waited >= SystemdNotifier.stateChangeWait && waited < SystemdNotifier.stateChangeWait + .seconds(1), "\(waited)")
        // Once the manager reads again, messages arrive.
        #expect(socket.messages.count == sent)
        notifier.ready(status: "back")
        #expect(await socket.wait(for: "STATUS=back"))
    }

    @Test("the watchdog interval is half of WATCHDOG_USEC, and nothing is sent without NOTIFY_SOCKET")
    func environment() {
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000"])
        #expect(notifier.watchdogInterval == .seconds(15))
        let otherProcess = SystemdNotifier(environment: ["NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"])
        #expect(otherProcess.watchdogInterval == nil)
        let outside = SystemdNotifier(environment: [:])
        #expect(outside.socketPath == nil && outside.watchdogInterval == nil)
        #expect(!outside.send("READY=1"))
    }
}
