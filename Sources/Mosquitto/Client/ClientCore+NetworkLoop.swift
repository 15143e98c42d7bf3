import CMosquitto
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
            logger.debug("connecting to the MQTT broker")
            let code = mosquitto_connect_bind_v5(
                mosq, configuration.host, Int32(configuration.port), keepalive, nil, handle.connectProperties)
            let failure: String
            if code != MOSQ_ERR_SUCCESS.raw {
                let savedErrno = errno
                failure = state.withLock { $0.libraryError } ?? describeResult(code, errno: savedErrno)
            } else {
                let (loopCode, loopErrno) = pump()
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
    private func pump() -> (Int32, Int32) {
        var deadline: ContinuousClock.Instant?
        while true {
            let code = mosquitto_loop(mosq, 100, 1)
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

    private func describeLoopEnd(_ code: Int32, errno: Int32) -> String {
        if code == MOSQ_ERR_CONN_LOST.raw || code == MOSQ_ERR_NO_CONN.raw {
            return "the broker closed the connection"
        }
        return describeResult(code, errno: errno)
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
    func cutConnection() {
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
