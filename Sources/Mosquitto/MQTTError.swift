import CMosquitto

#if canImport(Glibc)
import Glibc
#endif

/// What went wrong talking to the broker.
public enum MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A libmosquitto call failed; names the function and libmosquitto's reason.
    case library(function: String, code: Int32, reason: String)
    /// The broker could not be reached, or refused or dropped the connection on the first attempt.
    case connectFailed(address: String, cause: String)
    /// An established connection was lost; it is being retried.
    case connectionLost(address: String, cause: String)
    /// The broker refused a subscription (SUBACK reason code of 0x80 or more). It is not retried.
    case subscriptionRefused(filter: String, reasonCode: Int32, reason: String)
    /// The broker refused a publish (MQTT 5 PUBACK/PUBREC reason code of 0x80 or more).
    case publishRefused(topic: String, reasonCode: Int32, reason: String)
    /// The configuration cannot work (a persistent session without a client id, unreadable TLS file…).
    case invalidConfiguration(String)
    /// The client was disconnected before the operation completed.
    case disconnected
    /// The operation did not complete in time.
    case timedOut(operation: String, seconds: Double)

    public var description: String {
        switch self {
        case .library(let function, let code, let reason):
            return "\(function) failed: \(reason) (libmosquitto error \(code))"
        case .connectFailed(let address, let cause):
            return "cannot connect to the MQTT broker at \(address): \(cause)"
        case .connectionLost(let address, let cause):
            return "lost the connection to \(address): \(cause)"
        case .subscriptionRefused(let filter, let code, let reason):
            return "the broker refused the subscription to \"\(filter)\": \(reason) (reason code 0x\(hex(code)))"
        case .publishRefused(let topic, let code, let reason):
            return "the broker refused the message to \"\(topic)\": \(reason) (reason code 0x\(hex(code)))"
        case .invalidConfiguration(let message):
            return message
        case .disconnected:
            return "the client was disconnected before the operation completed"
        case .timedOut(let operation, let seconds):
            return "\(operation) did not complete within \(seconds) s"
        }
    }
}

private func hex(_ code: Int32) -> String {
    let digits = String(code, radix: 16, uppercase: true)
    return digits.count < 2 ? "0" + digits : digits
}

/// The one place a libmosquitto return code becomes an error (cf. swift-nio's `syscall`).
/// `MOSQ_ERR_ERRNO` is resolved with `errno`, read right after the call.
@inline(__always)
func check(_ code: Int32, _ function: StaticString) throws(MQTTError) {
    if code == MOSQ_ERR_SUCCESS.raw { return }
    throw .library(function: "\(function)", code: code, reason: describeResult(code, errno: errno))
}

/// libmosquitto's reason for a return code, with the system's for `MOSQ_ERR_ERRNO`.
func describeResult(_ code: Int32, errno: Int32) -> String {
    if code == MOSQ_ERR_ERRNO.raw { return String(cString: strerror(errno)) }
    return String(cString: mosquitto_strerror(code))
}

extension mosq_err_t {
    /// The code as libmosquitto's functions return it.
    var raw: Int32 { rawValue }
}
