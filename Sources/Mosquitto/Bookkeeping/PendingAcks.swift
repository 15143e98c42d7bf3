/// Matches acknowledgements to the requests that wait for them, by message id.
///
/// libmosquitto can deliver an ack (SUBACK, PUBACK…) on its network thread before the call
/// that sent the request has returned the message id. Such an early ack is kept until the
/// sender registers, and is then handed straight back.
struct PendingAcks<Waiter, Ack> {
    private var waiting: [Int32: Waiter] = [:]
    private var early: [Int32: Ack] = [:]

    var isEmpty: Bool { waiting.isEmpty && early.isEmpty }
    var count: Int { waiting.count }

    /// The sender registers after the send call returned `mid`.
    /// - Returns: the ack if it already arrived; the caller completes `waiter` with it now.
    mutating func sent(mid: Int32, waiter: Waiter) -> Ack? {
        if let ack = early.removeValue(forKey: mid) { return ack }
        waiting[mid] = waiter
        return nil
    }

    /// An ack arrived for `mid`.
    /// - Returns: the waiter to complete, or `nil` if the sender has not registered yet.
    mutating func acknowledged(mid: Int32, ack: Ack) -> Waiter? {
        if let waiter = waiting.removeValue(forKey: mid) { return waiter }
        early[mid] = ack
        return nil
    }

    /// Removes every waiter (the connection is gone for good, or its ids are void).
    mutating func removeAll() -> [Waiter] {
        let waiters = Array(waiting.values)
        waiting.removeAll()
        early.removeAll()
        return waiters
    }
}
