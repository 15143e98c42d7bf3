import CMosquitto
import CMosquittoIO
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What the threads that queue packets share with the network thread of their connections:
/// the descriptor that wakes it, whether it sleeps, open batches, the stop request.
final class NetworkSignals: Sendable {
    /// An eventfd the network loop polls beside the sockets: written to wake it when a
    /// packet is queued while it sleeps.
    let wakeDescriptor: Int32
    /// Set while the network loop is about to sleep or sleeps in `poll`.
    let loopArmed = Atomic<Bool>(false)
    /// Open ``MQTTClient/withBatchedSends(_:)`` scopes: their sends wake the loop once, at the end.
    let batchDepth = Atomic<Int>(0)
    /// Read by the network loop on every turn; cheaper than a state lock.
    let stopFlag = Atomic<Bool>(false)
    /// Signalled to cut a backoff sleep short when stopping.
    let wakeup = DispatchSemaphore(value: 0)

    init() {
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }

    deinit {
        if wakeDescriptor >= 0 { close(wakeDescriptor) }
    }

    /// Called by a thread that has just queued a packet: wakes the loop if it sleeps in
    /// `poll` (a running loop writes the packet in its next pass anyway). Inside
    /// ``MQTTClient/withBatchedSends(_:)`` the wake-up waits for the batch's end.
    func wakeNetworkLoop() {
        guard batchDepth.load(ordering: .relaxed) == 0 else { return }
        if loopArmed.exchange(false, ordering: .sequentiallyConsistent) { signalWake() }
    }

    /// Wakes the loop whatever it is doing.
    func signalWake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)
    }

    /// Asks the loop to end, and wakes it.
    func stop() {
        stopFlag.store(true, ordering: .releasing)
        wakeup.signal()
        signalWake()
    }
}

/// The network thread of a client's connections: one connection, or several that publish
/// together (``MQTTConfiguration/connections``). It connects them, pumps their sockets in
/// passes, and on a failure of any of them drops them all, waits and connects them all
/// again, until asked to stop: the connections are up together or not at all, so that the
/// client's owner sees one connection state.
///
/// Connecting goes through the blocking `mosquitto_connect_bind_v5` every time, because
/// `mosquitto_reconnect` would drop the CONNECT properties (the session expiry that keeps a
/// persistent session alive).
final class NetworkLoop: Sendable {
    let members: [ClientCore]
    let signals: NetworkSignals

    init(members: [ClientCore], signals: NetworkSignals) {
        self.members = members
        self.signals = signals
    }

    private var first: ClientCore { members[0] }

    /// Starts the network thread.
    func launch() {
        let thread = Thread { [self] in run() }
        thread.name = "mqtt \(first.configuration.address)"
        thread.start()
    }

    private func run() {
        var backoff = ReconnectBackoff(first.configuration.reconnect)
        var random = SystemRandomNumberGenerator()
        while true {
            // Every member asked, so that all of them report that they are connecting.
            let proceed = members.map { $0.beginAttempt() }.allSatisfy { $0 }
            guard proceed else { break }
            var failure: String?
            for (index, member) in members.enumerated() {
                if let cause = member.connect() {
                    failure = cause
                    for connected in members[..<index] { connected.drop() }
                    break
                }
            }
            if failure == nil {
                let (ended, loopCode, loopErrno) = pump()
                for member in members { member.setGate(false) }
                if signals.stopFlag.load(ordering: .acquiring) { break }
                // The others go too: they come back together.
                for member in members where member !== ended { member.drop() }
                let cause = ended.endCause(loopCode, errno: loopErrno)
                if ended.attemptConnected {
                    // It worked for a while: try again soon.
                    backoff.reset()
                    let error = MQTTError.connectionLost(address: first.configuration.address, cause: cause)
                    guard first.configuration.reconnects else {
                        first.logger.warning("\(error); not reconnecting (this connection is used once)")
                        first.eventContinuation.yield(.error(error))
                        break
                    }
                    first.logger.warning("\(error); reconnecting")
                    first.eventContinuation.yield(.error(error))
                    for member in members { member.state.withLock { member.setConnection(&$0, .connecting) } }
                    sleep(backoff.next(using: &random))
                    continue
                }
                failure = cause
            }
            let error = MQTTError.connectFailed(address: first.configuration.address, cause: failure ?? "unknown")
            let firstConnect = first.state.withLock { state -> ClientCore.Waiter? in
                guard state.failFast && !state.hasConnected else {
                    first.eventContinuation.yield(.error(error))
                    return nil
                }
                state.stopRequested = true
                defer { state.firstConnect = nil }
                return state.firstConnect
            }
            if let firstConnect {
                firstConnect.resume(throwing: error)
                break
            }
            let delay = backoff.next(using: &random)
            first.logger.warning("\(error); retrying in \(delay.formattedSeconds)")
            sleep(delay)
        }
        for member in members { member.finish() }
    }

    /// Runs the sockets until a connection ends; after a stop request, for at most two
    /// more seconds so that the DISCONNECTs get out. Returns the member whose connection
    /// ended, with libmosquitto's code and errno.
    ///
    /// The loop is libmosquitto's own parts (`mosquitto_loop_read`, `_write`, `_misc`) in
    /// passes, rather than `mosquitto_loop`, which selects for every packet and writes each
    /// one as a TCP segment of its own. A pass:
    /// 1. waits in `poll` for the sockets, or for the wake-up descriptor that other threads
    ///    signal when they hand over a publication or a command while the loop sleeps;
    /// 2. reads every packet that has arrived on each (bounded), handing each to the message
    ///    handler, then calls the read-end handler once (see ``ReadEndHandler``);
    /// 3. gives libmosquitto what other threads handed over (each connection's commands,
    ///    then its ``Outbox``), then writes everything queued (those, and the acknowledgements of step 2), so that
    ///    the pass leaves in as few segments as fit: one write phase per pass instead of one
    ///    segment per packet;
    /// 4. lets libmosquitto send a PINGREQ or notice a silent broker.
    ///
    /// No acknowledgement is written before step 3, so the read-end handler still runs
    /// before the broker hears of any message of its pass.
    ///
    /// With buffered sockets (see ``MQTTSocketBuffering``) step 2 reads a socket into a
    /// buffer in one call, libmosquitto taking its packets from there, and step 3 collects
    /// what libmosquitto writes and sends it in one call: a pass then costs a few system
    /// calls per connection, whatever the number of packets in it. Several connections in
    /// one thread cost one `poll` a pass, not one wake-up of a thread each.
    ///
    /// While passes find work, the next one starts no sooner than `passInterval` after the
    /// last one started: under a steady stream a pass then carries all that came meanwhile,
    /// rather than one message per pass and a TCP segment per acknowledgement. While the
    /// windows would have room at the pace of the last pass (``PassPace``),
    /// `relaxedPassInterval` after: fewer passes carry the same packets, for fewer context
    /// switches and system calls per message. Where a window would fill halfway in a
    /// relaxed pass, it would cap the rate at a window a pass (20 a pass at mosquitto's
    /// default), so the short interval stays.
    private func pump() -> (ClientCore, Int32, Int32) {
        var deadline: ContinuousClock.Instant?
        var busySince: ContinuousClock.Instant?
        let shortInterval = first.configuration.passInterval
        let relaxedInterval = shortInterval > .zero ? max(shortInterval, first.configuration.relaxedPassInterval) : .zero
        var interval = shortInterval
        var lastPassStart = ContinuousClock.now
        var paces = [PassPace](repeating: PassPace(), count: members.count)
        let count = members.count
        var descriptors = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: count + 1)
        var buffersInput = [Bool](repeating: false, count: count)
        while true {
            var relaxedPause = false
            if let busySince, interval > .zero {
                relaxedPause = interval > shortInterval
                let wait = busySince + interval - .now
                if wait > .zero { pause(wait) }
            }
            // Armed before looking for queued packets: a thread that queues one after the
            // look sees the loop armed and wakes it (see `wakeNetworkLoop()`).
            _ = signals.loopArmed.exchange(true, ordering: .sequentiallyConsistent)
            var anyBuffered = false
            for (index, member) in members.enumerated() {
                let socket = mosquitto_socket(member.mosq)
                guard socket >= 0 else {
                    signals.loopArmed.store(false, ordering: .relaxed)
                    return (member, MOSQ_ERR_NO_CONN.raw, 0)
                }
                // Bytes already in the buffer are invisible to poll: do not wait for them.
                buffersInput[index] = member.buffersInput(socket)
                anyBuffered = anyBuffered || buffersInput[index]
                descriptors[index] = pollfd(
                    fd: socket, events: Int16(POLLIN) | (member.wantsWrite(socket) ? Int16(POLLOUT) : 0), revents: 0)
            }
            descriptors[count] = pollfd(fd: signals.wakeDescriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptors, nfds_t(count + 1), anyBuffered ? 0 : Self.pollTimeoutMilliseconds)
            signals.loopArmed.store(false, ordering: .relaxed)
            if ready < 0 && errno != EINTR { return (first, MOSQ_ERR_ERRNO.raw, errno) }
            let passStart = ContinuousClock.now
            busySince = nil
            if descriptors[count].revents != 0 {
                var drained: UInt64 = 0
                _ = read(signals.wakeDescriptor, &drained, MemoryLayout<UInt64>.size)
            }
            for (index, member) in members.enumerated()
            where descriptors[index].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 || buffersInput[index] {
                busySince = passStart
                let code = member.readPass()
                if code != MOSQ_ERR_SUCCESS.raw { return (member, code, errno) }
            }
            for member in members {
                // Past the write deadline nothing more goes out, not even a ping: the
                // connection is cut (the broker publishes the will).
                if let writeDeadline = member.configuration.writeDeadline, writeDeadline.hasPassed {
                    member.cutConnection()
                    return (member, MOSQ_ERR_CONN_LOST.raw, 0)
                }
                let socket = mosquitto_socket(member.mosq)
                if socket >= 0 && member.wantsWrite(socket) {
                    busySince = passStart
                    let code = member.writePass(socket)
                    if code != MOSQ_ERR_SUCCESS.raw { return (member, code, errno) }
                }
            }
            // What came in since the last pass began, over the relaxed interval instead.
            let scale = relaxedInterval / max(passStart - lastPassStart, shortInterval, .microseconds(1))
            lastPassStart = passStart
            var keepShort = false
            for (index, member) in members.enumerated() {
                let code = mosquitto_loop_misc(member.mosq)
                if code != MOSQ_ERR_SUCCESS.raw { return (member, code, errno) }
                // Every member's count starts again: no short cut.
                if paces[index].keepsShort(member.takePassCounts(), scale: scale, afterRelaxedPause: relaxedPause) { keepShort = true }
            }
            interval = keepShort ? shortInterval : relaxedInterval
            if signals.stopFlag.load(ordering: .acquiring) {
                let now = ContinuousClock.now
                if let deadline {
                    if now > deadline { return (first, MOSQ_ERR_SUCCESS.raw, 0) }
                } else {
                    deadline = now + .seconds(2)
                }
            }
        }
    }

    /// Long enough to cost nothing when idle, short enough for keepalive (at least 5 s).
    static let pollTimeoutMilliseconds: Int32 = 1000

    /// Sleeps a pass interval's rest (a millisecond or so: not cut short by a stop).
    private func pause(_ delay: Duration) {
        var time = timespec(tv_sec: Int(delay.components.seconds), tv_nsec: Int(delay.components.attoseconds / 1_000_000_000))
        _ = nanosleep(&time, nil)
    }

    /// Waits for `delay`, or less when a stop is requested.
    private func sleep(_ delay: Duration) {
        if signals.stopFlag.load(ordering: .acquiring) { return }
        let nanoseconds = max(0, Int(delay.components.seconds) * 1_000_000_000 + Int(delay.components.attoseconds / 1_000_000_000))
        _ = signals.wakeup.wait(timeout: .now() + .nanoseconds(nanoseconds))
    }
}

/// The connection state of a client's connections together (``MQTTConfiguration/connections``):
/// connected when all are, and reported as one stream of state changes.
final class ConnectionGroup: Sendable {
    private struct States {
        var each: [MQTTConnectionState]
        var reported: MQTTConnectionState = .closed
    }

    private let states: Mutex<States>
    private let events: AsyncStream<MQTTEvent>.Continuation
    /// Called when all have come up (the first connection's ``MQTTClient/connect()`` waits for it).
    private let whenConnected = Mutex<(@Sendable () -> Void)?>(nil)

    init(count: Int, events: AsyncStream<MQTTEvent>.Continuation) {
        states = Mutex(States(each: Array(repeating: .closed, count: count)))
        self.events = events
    }

    /// What to call each time all have come up.
    func onConnected(_ body: @escaping @Sendable () -> Void) { whenConnected.withLock { $0 = body } }

    /// All have come up (called by the last to come up, on the network thread).
    func allConnected() { whenConnected.withLock { $0 }?() }

    /// The state of them together.
    var state: MQTTConnectionState { states.withLock { $0.reported } }

    /// Member `index` is in `state` now: reports the group's state when that changes.
    func changed(_ index: Int, to state: MQTTConnectionState) {
        states.withLock { states in
            states.each[index] = state
            let together = Self.together(states.each)
            guard together != states.reported else { return }
            states.reported = together
            events.yield(.state(together))
        }
    }

    /// Closed while any is (the group cannot publish), closing while any closes, connected
    /// when all are, else connecting.
    static func together(_ each: [MQTTConnectionState]) -> MQTTConnectionState {
        if each.contains(.closed) { return .closed }
        if each.contains(.disconnecting) { return .disconnecting }
        if each.allSatisfy({ $0 == .connected }) { return .connected }
        return .connecting
    }
}

/// Whether a connection's next pass comes after the short interval or the relaxed one (see
/// ``MQTTConfiguration/passInterval``). The network thread keeps one for each connection.
struct PassPace {
    /// What a pass saw (``ClientCore/takePassCounts()``).
    struct Counts {
        var read: Int
        var acknowledged: Int
        var inFlight: Int
        var readWindow: Int
        var sendWindow: Int

        /// The messages and acknowledgements of ours that the pass read.
        var traffic: Int { read + acknowledged }
    }

    /// What the last pass after a short pause read (``Counts/traffic``); `nil` until one
    /// has read any: a connection with traffic takes a short pass first, so that a relaxed
    /// one has something to be compared with.
    private var trafficAfterShortPause: Int?
    /// Passes still to come after the short interval, whatever the counts say.
    private var heldShort = 0

    /// How many passes a stream paced by our acknowledgements keeps the short interval
    /// before a relaxed pass tries again: about a tenth of a second at 1 ms.
    static let heldPasses = 100

    /// Whether the next pass comes after the short interval.
    ///
    /// When a window would set the pace at the relaxed interval: at the pace of the pass
    /// that just ended, `scale` times as long a pass would read at least half the messages
    /// the broker may send before our acknowledgements, or have at least half of the send
    /// window acknowledged; or half of it is in flight now. (A window that a pass empties
    /// is refilled by the publisher's thread right after it: only its acknowledgements tell
    /// how fast it turns.)
    ///
    /// And when the traffic goes at the pace of our own passes whatever the windows say: a
    /// broker with a window smaller than ours that it does not tell (an MQTT 3.1.1 session,
    /// or ejabberd's one message in flight a subscriber), or a publisher that waits for
    /// each acknowledgement, has a relaxed pass read no more than a short one did. That
    /// keeps the short interval for ``heldPasses`` passes, then a relaxed pass looks again.
    mutating func keepsShort(_ counts: Counts, scale: Double, afterRelaxedPause: Bool) -> Bool {
        if counts.traffic > 0 {
            if !afterRelaxedPause {
                trafficAfterShortPause = counts.traffic
            } else if let trafficAfterShortPause {
                if counts.traffic <= trafficAfterShortPause { heldShort = Self.heldPasses }
            } else {
                return true
            }
        }
        if heldShort > 0 {
            heldShort -= 1
            return true
        }
        if Double(counts.read) * scale * 2 >= Double(counts.readWindow) { return true }
        return max(Double(counts.inFlight), Double(counts.acknowledged) * scale) * 2 >= Double(counts.sendWindow)
    }
}
