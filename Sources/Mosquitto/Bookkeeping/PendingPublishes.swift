/// ``PendingAcks`` for publications, the one kind a busy client has hundreds of in flight:
/// the same answers, from a table indexed by the message id's low bits instead of a
/// dictionary (a hash, an insertion and a removal per publication).
///
/// libmosquitto numbers its messages in sequence, so the ids in flight at once fall in
/// distinct slots while fewer than ``slotCount`` are in flight. An id whose slot is taken,
/// and every id while any is, goes to a ``PendingAcks`` beside the table: an entry is then
/// always where the next call for its id looks first.
struct PendingPublishes<Waiter, Ack> {
    private enum Kind: UInt8 { case empty, waiting, early }

    static var slotCount: Int { 1024 }
    // One array per field, so that looking at a slot copies (retains) nothing: the
    // table is made at the first publication (a client that only receives never needs it).
    private var kinds: [Kind] = []
    private var mids: [Int32] = []
    private var waiters: [Waiter?] = []
    private var acks: [Ack?] = []
    private var overflow = PendingAcks<Waiter, Ack>()

    var isEmpty: Bool { overflow.isEmpty && !kinds.contains { $0 != .empty } }

    private mutating func slot(_ mid: Int32) -> Int {
        if kinds.isEmpty {
            kinds = Array(repeating: .empty, count: Self.slotCount)
            mids = Array(repeating: 0, count: Self.slotCount)
            waiters = Array(repeating: nil, count: Self.slotCount)
            acks = Array(repeating: nil, count: Self.slotCount)
        }
        return Int(truncatingIfNeeded: mid) & (Self.slotCount - 1)
    }

    /// The sender registers after the send call returned `mid`.
    /// - Returns: the ack if it already arrived; the caller completes `waiter` with it now.
    mutating func sent(mid: Int32, waiter: consuming Waiter) -> Ack? {
        let index = slot(mid)
        switch kinds[index] {
        case .early where mids[index] == mid:
            kinds[index] = .empty
            defer { acks[index] = nil }
            return acks[index]
        case .empty where overflow.isEmpty:
            kinds[index] = .waiting
            mids[index] = mid
            waiters[index] = waiter
            return nil
        default:
            return overflow.sent(mid: mid, waiter: waiter)
        }
    }

    /// An ack arrived for `mid`.
    /// - Returns: the waiter to complete, or `nil` if the sender has not registered yet.
    mutating func acknowledged(mid: Int32, ack: Ack) -> Waiter? {
        let index = slot(mid)
        switch kinds[index] {
        case .waiting where mids[index] == mid:
            kinds[index] = .empty
            return waiters[index].take()
        case .early where mids[index] == mid:
            acks[index] = ack
            return nil
        case .empty where overflow.isEmpty:
            kinds[index] = .early
            mids[index] = mid
            acks[index] = ack
            return nil
        default:
            return overflow.acknowledged(mid: mid, ack: ack)
        }
    }

    /// Removes every waiter (the connection is gone for good, or its ids are void).
    mutating func removeAll() -> [Waiter] {
        var removed: [Waiter] = []
        for index in kinds.indices {
            if kinds[index] == .waiting, let waiter = waiters[index].take() { removed.append(waiter) }
            kinds[index] = .empty
            acks[index] = nil
        }
        return removed + overflow.removeAll()
    }
}
