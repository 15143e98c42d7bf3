import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The broker's host name, resolved once before the start: a name that does not resolve
/// cannot come right by retrying, so the start fails (``StartFailure/brokerHost(host:cause:)``).
/// A temporary failure of the resolver (`EAI_AGAIN`: DNS not up yet) is left to the
/// connection, which retries it like a broker that is down.
enum BrokerHostCheck {
    /// Resolves `host` on a thread of its own, so that a resolver that takes its time
    /// (seconds per attempt when DNS does not answer) holds no thread of the pool, and a stop
    /// meanwhile (SIGTERM, or the group's cancellation) does not wait for it.
    /// - Throws: ``StartFailure/brokerHost(host:cause:)``.
    static func check(_ host: String, logger: Logger) async throws(StartFailure) {
        let outcome = Outcome()
        let code = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { continuation in
                    outcome.waiting(continuation)
                    Thread { outcome.finish(resolve(host)) }.start()
                }
            } onGracefulShutdown: {
                outcome.finish(nil)
            }
        } onCancel: {
            outcome.finish(nil)
        }
        switch code {
        case nil, 0?: return
        case EAI_AGAIN?:
            logger.warning(
                "cannot resolve the broker host \(host) (broker.host) for now: \(String(cString: gai_strerror(EAI_AGAIN))); retrying",
                metadata: ["mqtt.broker": "\(host)"])
        case let code?:
            throw .brokerHost(host: host, cause: String(cString: gai_strerror(code)))
        }
    }

    /// `getaddrinfo`'s result for `host`: 0, or its `EAI_*` code.
    private static func resolve(_ host: String) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, nil, &hints, &result)
        if let result { freeaddrinfo(result) }
        return code
    }

    /// The resolution's code, or nil when the stop came first: whichever comes first resumes
    /// the wait, once.
    private final class Outcome: Sendable {
        private struct State {
            var continuation: CheckedContinuation<Int32?, Never>?
            var result: Int32??
        }
        private let state = Mutex(State())

        func waiting(_ continuation: CheckedContinuation<Int32?, Never>) {
            let done: Int32?? = state.withLock { state in
                if let result = state.result { return result }
                state.continuation = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }

        func finish(_ code: Int32?) {
            let continuation = state.withLock { state -> CheckedContinuation<Int32?, Never>? in
                guard state.result == nil else { return nil }
                state.result = .some(code)
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(returning: code)
        }
    }
}
