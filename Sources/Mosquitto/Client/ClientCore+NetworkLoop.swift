import CMosquitto
import CMosquittoIO
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

extension ClientCore {
    /// The network thread: connect, pump the socket, and on failure wait and connect again,
    /// until asked to stop. Connecting goes through the blocking `mosquitto_connect_bind_v5`
    /// every time, because `mosquitto_reconnect` would drop the CONNECT properties (the
    /// session expiry that keeps a persistent session alive).
    func runNetworkLoop() {
        var backoff = ReconnectBackoff(configuration.reconnect)
        var random = SystemRandomNumberGenerator()
        let keepalive = Int32(clamping: max(configuration.keepalive.components.seconds, 5))
        while true {
            let proceed = state.withLock { state -> Bool in
                if state.stopRequested { return false }
                state.attemptConnected = false
                state.refusal = nil
                state.libraryError = nil
                setConnection(&state, .connecting)
                return true
            }
            guard proceed else { break }
            // Nothing may be queued between the socket's opening and the CONNECT.
            sendGate.withLock { $0 = false }
            connectionCut.store(false, ordering: .relaxed)
            setLibraryLog(on: true)
            logger.debug("connecting to the MQTT broker")
            let code = mosquitto_connect_bind_v5(
                mosq, configuration.host, Int32(configuration.port), keepalive, nil, handle.connectProperties)
            let failure: String
            if code != MOSQ_ERR_SUCCESS.raw {
                let savedErrno = errno
                failure = state.withLock { $0.libraryError } ?? describeResult(code, errno: savedErrno)
            } else {
                // libmosquitto drops the buffers when it closes the socket.
                let socket = mosquitto_socket(mosq)
                let buffered = handle.buffered && socket >= 0 && livedata_io_attach(socket) == 0
                let mode = buffered ? 2 : 1
                if socketMode.exchange(mode, ordering: .relaxed) != mode {
                    logger.info(
                        buffered ? "socket calls buffered" : "libmosquitto's own socket calls",
                        metadata: ["mqtt.bufferedSocket": "\(buffered)"])
                }
                let (loopCode, loopErrno) = pump(buffered: buffered)
                sendGate.withLock { $0 = false }
                if stopFlag.load(ordering: .acquiring) { break }
                let (connected, refusal, libraryError) = state.withLock {
                    ($0.attemptConnected, $0.refusal, $0.libraryError)
                }
                let cause = refusal ?? libraryError ?? describeLoopEnd(loopCode, errno: loopErrno)
                if connected {
                    // It worked for a while: try again soon.
                    backoff.reset()
                    let error = MQTTError.connectionLost(address: configuration.address, cause: cause)
                    guard configuration.reconnects else {
                        logger.warning("\(error); not reconnecting (this connection is used once)")
                        eventContinuation.yield(.error(error))
                        break
                    }
                    logger.warning("\(error); reconnecting")
                    state.withLock { state in
                        eventContinuation.yield(.error(error))
                        setConnection(&state, .connecting)
                    }
                    sleep(backoff.next(using: &random))
                    continue
                }
                failure = cause
            }
            let error = MQTTError.connectFailed(address: configuration.address, cause: failure)
            let firstConnect = state.withLock { state -> Waiter? in
                guard state.failFast && !state.hasConnected else {
                    eventContinuation.yield(.error(error))
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
            logger.warning("\(error); retrying in \(delay.formattedSeconds)")
            sleep(delay)
        }
        finish()
    }

    /// Runs the socket until the connection ends; after a stop request, for at most two
    /// more seconds so that the DISCONNECT gets out.
    ///
    /// The loop is libmosquitto's own parts (`mosquitto_loop_read`, `_write`, `_misc`) in
    /// passes, rather than `mosquitto_loop`, which selects for every packet and writes each
    /// one as a TCP segment of its own. A pass:
    /// 1. waits in `poll` for the socket, or for the wake-up descriptor that other threads
    ///    signal when they queue a packet while the loop sleeps;
    /// 2. reads every packet that has arrived (bounded), handing each to the message
    ///    handler, then calls the read-end handler once (see ``ReadEndHandler``);
    /// 3. writes everything queued (acknowledgements of step 2, publishes of other
    ///    threads) with the socket corked, so that the pass leaves in as few segments as
    ///    fit: one write phase per pass instead of one segment per packet;
    /// 4. lets libmosquitto send a PINGREQ or notice a silent broker.
    ///
    /// No acknowledgement is written before step 3, so the read-end handler still runs
    /// before the broker hears of any message of its pass.
    ///
    /// With `buffered` sockets (see ``MQTTSocketBuffering``) step 2 reads the socket into a
    /// buffer in one call, libmosquitto taking its packets from there, and step 3 collects
    /// what libmosquitto writes and sends it in one call: a pass then costs a few system
    /// calls, whatever the number of packets in it.
    ///
    /// While passes find work, the next one starts no sooner than `passInterval` after the
    /// last one started: under a steady stream a pass then carries all that came meanwhile,
    /// rather than one message per pass and a TCP segment per acknowledgement.
    private func pump(buffered: Bool) -> (Int32, Int32) {
        var deadline: ContinuousClock.Instant?
        var busySince: ContinuousClock.Instant?
        let interval = configuration.passInterval
        while true {
            if let busySince, interval > .zero {
                let wait = busySince + interval - .now
                if wait > .zero { pause(wait) }
            }
            let socket = mosquitto_socket(mosq)
            guard socket >= 0 else { return (MOSQ_ERR_NO_CONN.raw, 0) }
            // Armed before looking for queued packets: a thread that queues one after the
            // look sees the loop armed and wakes it (see `wakeNetworkLoop()`).
            _ = loopArmed.exchange(true, ordering: .sequentiallyConsistent)
            // Queued in libmosquitto, or collected and not yet taken by a full socket.
            func wantsWrite() -> Bool { mosquitto_want_write(mosq) || (buffered && livedata_io_pending_output(socket) > 0) }
            // Bytes already in the buffer are invisible to poll: do not wait for them.
            let buffersInput = buffered && livedata_io_buffered_input(socket) > 0
            var descriptors = [
                pollfd(fd: socket, events: Int16(POLLIN) | (wantsWrite() ? Int16(POLLOUT) : 0), revents: 0),
                pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, buffersInput ? 0 : Self.pollTimeoutMilliseconds)
            loopArmed.store(false, ordering: .relaxed)
            if ready < 0 && errno != EINTR { return (MOSQ_ERR_ERRNO.raw, errno) }
            let passStart = ContinuousClock.now
            busySince = nil
            if descriptors[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(wakeDescriptor, &count, MemoryLayout<UInt64>.size)
            }
            if descriptors[0].revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 || buffersInput {
                busySince = passStart
                let code = readPass(buffered: buffered)
                if code != MOSQ_ERR_SUCCESS.raw { return (code, errno) }
            }
            // Past the write deadline nothing more goes out, not even a ping: the connection
            // is cut (the broker publishes the will).
            if let writeDeadline = configuration.writeDeadline, writeDeadline.hasPassed {
                cutConnection()
                return (MOSQ_ERR_CONN_LOST.raw, 0)
            }
            if wantsWrite() {
                busySince = passStart
                let code = buffered ? bufferedWritePass(socket) : writePass()
                if code != MOSQ_ERR_SUCCESS.raw { return (code, errno) }
            }
            let code = mosquitto_loop_misc(mosq)
            if code != MOSQ_ERR_SUCCESS.raw { return (code, errno) }
            if stopFlag.load(ordering: .acquiring) {
                let now = ContinuousClock.now
                if let deadline {
                    if now > deadline { return (code, 0) }
                } else {
                    deadline = now + .seconds(2)
                }
            }
        }
    }

    /// Long enough to cost nothing when idle, short enough for keepalive (at least 5 s).
    static let pollTimeoutMilliseconds: Int32 = 1000
    /// At most this many `mosquitto_loop_read` calls in one pass (each reads one packet,
    /// or, while errno stays clear, as many as there are messages in flight), so that
    /// acknowledgements and publishes go out at least that often under a flood.
    static let readCallsPerPass = 1024

    /// Reads what has arrived, until the socket has no more or the pass's bound, then
    /// calls the read-end handler.
    ///
    /// libmosquitto stops reading when errno is EAGAIN: that is how it learns the socket
    /// is empty. Queueing an acknowledgement leaves EAGAIN too when its write to the full
    /// wake-up pair fails (buffered sockets leave that write out), so on EAGAIN the pass
    /// asks the buffer and the socket whether anything is left.
    private func readPass(buffered: Bool) -> Int32 {
        defer { finishReadPass() }
        for _ in 0..<Self.readCallsPerPass {
            errno = 0
            let code = mosquitto_loop_read(mosq, 1)
            if code != MOSQ_ERR_SUCCESS.raw { return code }
            let socket = mosquitto_socket(mosq)
            if socket < 0 || connectionCut.load(ordering: .relaxed) { break }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                if buffered && livedata_io_buffered_input(socket) > 0 { continue }
                var waiting: Int32 = 0
                if ioctl(socket, UInt(FIONREAD), &waiting) != 0 || waiting == 0 {
                    // Over TLS, records the library already read from the socket wait
                    // decrypted in the session: the socket shows nothing and poll would not
                    // wake for them until more bytes come.
                    if let ssl = mosquitto_ssl_get(mosq), let sslPending = Self.sslPending, sslPending(ssl) > 0 { continue }
                    break
                }
            }
        }
        return MOSQ_ERR_SUCCESS.raw
    }

    /// OpenSSL's `SSL_pending`, from the libssl that libmosquitto loaded (the package does
    /// not link OpenSSL itself): how many decrypted bytes wait in a TLS session.
    private static let sslPending: (@convention(c) (UnsafeMutableRawPointer) -> Int32)? = {
        guard let symbol = dlsym(nil, "SSL_pending") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutableRawPointer) -> Int32).self)
    }()

    private func finishReadPass() {
        guard let readEnd else { return }
        if case .refused = readEnd() { cutConnection() }
    }

    /// Writes everything queued, corked: the packets leave together when the cork comes off.
    private func writePass() -> Int32 {
        let socket = mosquitto_socket(mosq)
        var on: Int32 = 1
        let corked = socket >= 0 && setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
        let code = mosquitto_loop_write(mosq, 1)
        let savedErrno = errno
        // A DISCONNECT closes the socket as it goes: uncork only the socket still in use.
        if corked && mosquitto_socket(mosq) == socket {
            var off: Int32 = 0
            _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &off, socklen_t(MemoryLayout<Int32>.size))
        }
        errno = savedErrno
        return code
    }

    /// Writes everything queued into the socket's buffer, then sends the buffer in one
    /// call (what the socket does not take now goes in a later pass, before anything newer).
    ///
    /// While earlier output still waits for the socket, libmosquitto writes nothing more:
    /// its packets stay queued, as they would with its own calls on a full socket, and the
    /// buffer does not grow behind a peer that reads slowly. A DISCONNECT then comes after
    /// the rest is out, and the close it brings finds little or nothing to send (a close
    /// never waits for the socket; see `buffered_close`).
    private func bufferedWritePass(_ socket: Int32) -> Int32 {
        if livedata_io_pending_output(socket) > 0 {
            let flushed = livedata_io_flush(socket)
            if flushed < 0 {
                // The socket failed: the next read finds out, and libmosquitto closes it.
                shutdown(socket, Int32(SHUT_RDWR))
            }
            if flushed != 0 { return MOSQ_ERR_SUCCESS.raw }
        }
        livedata_io_collect(socket)
        let code = mosquitto_loop_write(mosq, 1)
        let savedErrno = errno
        // A DISCONNECT closes the socket as it goes, and the close sends what the socket
        // takes of what was collected.
        if mosquitto_socket(mosq) == socket && livedata_io_flush(socket) < 0 {
            shutdown(socket, Int32(SHUT_RDWR))
        }
        errno = savedErrno
        return code
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

    private func describeLoopEnd(_ code: Int32, errno: Int32) -> String {
        if code == MOSQ_ERR_CONN_LOST.raw || code == MOSQ_ERR_NO_CONN.raw {
            return "the broker closed the connection"
        }
        return describeResult(code, errno: errno)
    }

    /// Sleeps a pass interval's rest (a millisecond or so: not cut short by a stop).
    private func pause(_ delay: Duration) {
        var time = timespec(tv_sec: Int(delay.components.seconds), tv_nsec: Int(delay.components.attoseconds / 1_000_000_000))
        _ = nanosleep(&time, nil)
    }

    /// Waits for `delay`, or less when a stop is requested.
    private func sleep(_ delay: Duration) {
        if stopFlag.load(ordering: .acquiring) { return }
        let nanoseconds = max(0, Int(delay.components.seconds) * 1_000_000_000 + Int(delay.components.attoseconds / 1_000_000_000))
        _ = wakeup.wait(timeout: .now() + .nanoseconds(nanoseconds))
    }
}

extension ClientCore {
    /// Cuts the TCP connection under libmosquitto, as a network failure would: no DISCONNECT
    /// is sent (the broker publishes the will), and what libmosquitto has queued but not
    /// written (a PUBACK) is discarded by the reconnection. For a refused message, and for
    /// tests of reconnection.
    ///
    /// What the socket still holds is not handed to the message handler any more: the
    /// broker sends it again after the refused one, in order, on the next connection.
    func cutConnection() {
        connectionCut.store(true, ordering: .relaxed)
        let socket = mosquitto_socket(mosq)
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
    }
}

extension Duration {
    /// `0.5 s`, `30 s`.
    var formattedSeconds: String {
        let seconds = Double(components.seconds) + Double(components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : String(format: "%.1f s", seconds)
    }
}
