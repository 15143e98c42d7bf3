import CMosquitto
import CMosquittoIO
import Foundation
import LiveTopics
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// One connection's part of the network loop (``NetworkLoop``): its attempts, its passes.
extension ClientCore {
    /// Starts an attempt: the state says connecting. `false` when a stop was asked for.
    func beginAttempt() -> Bool {
        state.withLock { state -> Bool in
            if state.stopRequested { return false }
            state.attemptConnected = false
            state.refusal = nil
            state.libraryError = nil
            setConnection(&state, .connecting)
            return true
        }
    }

    /// Opens the connection and sends the CONNECT (the CONNACK is read by a pass).
    /// - Returns: why it failed, or `nil`.
    func connect() -> String? {
        // Nothing may be queued between the socket's opening and the CONNECT.
        setGate(false)
        // A DISCONNECT asked for on the last connection is not the new one's.
        disconnectRequested.store(false, ordering: .relaxed)
        connectionCut.store(false, ordering: .relaxed)
        setLibraryLog(on: true)
        logger.debug("connecting to the MQTT broker")
        let keepalive = Int32(clamping: max(configuration.keepalive.components.seconds, 5))
        let code = mosquitto_connect_bind_v5(mosq, configuration.host, Int32(configuration.port), keepalive, nil, handle.connectProperties)
        guard code == MOSQ_ERR_SUCCESS.raw else {
            let savedErrno = errno
            return state.withLock { $0.libraryError } ?? describeResult(code, errno: savedErrno)
        }
        // libmosquitto drops the buffers when it closes the socket.
        let socket = mosquitto_socket(mosq)
        let buffered = handle.buffered && socket >= 0 && livedata_io_attach(socket) == 0
        let mode = buffered ? 2 : 1
        if socketMode.exchange(mode, ordering: .relaxed) != mode {
            logger.info(
                buffered ? "socket calls buffered" : "libmosquitto's own socket calls",
                metadata: ["mqtt.bufferedSocket": "\(buffered)"])
        }
        return nil
    }

    /// Closes a connection that is still open (another of its loop's ended): cut, as a
    /// network failure would, and closed by libmosquitto.
    func drop() {
        setGate(false)
        guard mosquitto_socket(mosq) >= 0 else { return }
        cutConnection()
        // The cut socket reads as ended: libmosquitto closes it (after what was buffered).
        for _ in 0..<Self.readCallsPerPass where mosquitto_socket(mosq) >= 0 {
            if mosquitto_loop_read(mosq, 1) != MOSQ_ERR_SUCCESS.raw { break }
        }
    }

    /// Why the connection ended, for the log: the broker's refusal, libmosquitto's last
    /// error line, or its code.
    func endCause(_ code: Int32, errno: Int32) -> String {
        let (refusal, libraryError) = state.withLock { ($0.refusal, $0.libraryError) }
        if let reason = refusal ?? libraryError { return reason }
        if code == MOSQ_ERR_CONN_LOST.raw || code == MOSQ_ERR_NO_CONN.raw || code == MOSQ_ERR_SUCCESS.raw {
            return "the broker closed the connection"
        }
        return describeResult(code, errno: errno)
    }

    /// What the pass that just ended saw (see ``PassPace``): the messages it read, the
    /// acknowledgements of ours it read, and how many of ours are in flight. Starts the
    /// next pass's counts.
    func takePassCounts() -> PassPace.Counts {
        let acknowledged = acknowledgedCount.load(ordering: .relaxed)
        return PassPace.Counts(
            read: readInPass.exchange(0, ordering: .relaxed),
            acknowledged: acknowledged - acknowledgedAtPass.exchange(acknowledged, ordering: .relaxed),
            inFlight: inFlight.load(ordering: .relaxed),
            readWindow: configuration.readWindow,
            sendWindow: state.withLock { $0.session.sendWindow })
    }

    /// Whether the connection's current attempt reached the broker's acceptance.
    var attemptConnected: Bool { state.withLock { $0.attemptConnected } }

    /// Whether the socket's calls go through the buffers on this connection.
    var buffered: Bool { socketMode.load(ordering: .relaxed) == 2 }

    /// Bytes wait in the read buffer: poll would not wake for them.
    func buffersInput(_ socket: Int32) -> Bool { buffered && livedata_io_buffered_input(socket) > 0 }

    /// Queued in libmosquitto, or collected and not yet taken by a full socket.
    func wantsWrite(_ socket: Int32) -> Bool {
        mosquitto_want_write(mosq) || (buffered && livedata_io_pending_output(socket) > 0) || outboxWaits || commandsWait
            || (disconnectRequested.load(ordering: .sequentiallyConsistent) && signals.stopFlag.load(ordering: .acquiring))
    }

    /// The write phase of a pass (see ``NetworkLoop``): the subscriptions and
    /// unsubscriptions asked for, then what the outbox holds go to libmosquitto, then a
    /// DISCONNECT a stop asked for, then everything is written.
    func writePass(_ socket: Int32) -> Int32 {
        runCommands()
        publishOutbox()
        // Once the loop is told to stop: the end of this connection is then a stop, not a loss.
        if signals.stopFlag.load(ordering: .acquiring), disconnectRequested.exchange(false, ordering: .sequentiallyConsistent),
            gateOpen.load(ordering: .relaxed)
        {
            _ = mosquitto_disconnect_v5(mosq, 0, nil)
        }
        return buffered ? bufferedWritePass(socket) : plainWritePass()
    }

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
    func readPass() -> Int32 {
        let buffered = self.buffered
        outboxDrain.readAt = .now
        // Subscriptions asked for since the last pass are queued ahead of this pass's
        // acknowledgements, as they were asked for before them.
        runCommands()
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

    /// Calls the read-end handler, keeping errno as the pass's last read left it: the
    /// caller reports it when the read failed.
    private func finishReadPass() {
        guard let readEnd else { return }
        let savedErrno = errno
        if case .refused = readEnd() { cutConnection() }
        errno = savedErrno
    }

    /// Writes everything queued, corked: the packets leave together when the cork comes off.
    private func plainWritePass() -> Int32 {
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
