import Synchronization

/// How far the daemon's start has come (restore, journal replay), readable without the
/// pipeline's actor, which a long restore keeps busy: `/readyz`, `STATUS=` and the start's
/// `EXTEND_TIMEOUT_USEC=` read it. Also carries a stop asked for during the start.
public final class StartProgress: Sendable {
    public enum Phase: Sendable, Equatable, CustomStringConvertible {
        /// Nothing read yet.
        case pending
        /// Locations read from the state file so far, of how many it holds.
        case restoring(done: Int, of: Int)
        /// Journal records replayed so far.
        case replaying(records: Int)
        /// Restored and replayed: the pipeline takes updates.
        case started

        public var description: String {
            switch self {
            case .pending: "starting"
            case .restoring(let done, let total): "restoring \(done.grouped) of \(total.grouped) locations"
            case .replaying(let records): "replaying the journal: \(records.grouped) updates"
            case .started: "started"
            }
        }

        /// A number that grows while the start moves.
        var steps: Int {
            switch self {
            case .pending: 0
            case .restoring(let done, _): 1 + done
            case .replaying(let records): 1 << 40 + records
            case .started: 1 << 62
            }
        }
    }

    private let state = Mutex(Phase.pending)
    private let stop = Atomic(false)

    public init() {}

    public var phase: Phase { state.withLock { $0 } }

    func set(_ phase: Phase) { state.withLock { $0 = phase } }

    /// Asks the start to stop at its next step (SIGTERM during the start).
    public func requestStop() { stop.store(true, ordering: .relaxed) }
    var isStopRequested: Bool { stop.load(ordering: .relaxed) }
}

extension Int {
    /// `1,000,000`: a count as a person reads it in a status line.
    var grouped: String {
        let digits = String(magnitude)
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return self < 0 ? "-" + text : text
    }
}
