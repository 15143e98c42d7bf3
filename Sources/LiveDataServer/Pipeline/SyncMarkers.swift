import LiveTopics

/// The daemon's sync markers, as a value: about once a second while it publishes, a
/// retained `{"token": …, "sequence": N}` at the checkpoint topic, handed to the client
/// after everything before it. The broker handles a connection's messages in order, so once
/// it acknowledges a marker it has stored every publication handed over before it. A broker
/// that resumes the session and still holds the last acknowledged marker lacks at most what
/// was handed over after it (``Publisher/recent``); one that holds another (it restored an
/// older save) or none calls for a full convergence. A clean stop ends with a marker once
/// everything is acknowledged, and the state file records it (see
/// ``LivePipeline/checkpoint(timeout:)``).
///
/// The pipeline asks it what to do (``isDue(now:handedOver:)``, ``next(handedOver:locations:)``)
/// and tells it what happened (``done(_:position:acknowledged:)``); it does no I/O.
struct SyncMarkers {
    static let interval = Duration.seconds(1)

    /// What the next convergence checks first: a marker that, held by the broker, makes the
    /// full read needless.
    enum Check {
        /// A start: the marker the last clean stop recorded.
        case start(String)
        /// A reconnection that resumed the session: the last marker acknowledged.
        case resumed(String)
    }

    /// This run's token: a marker of another run (or another daemon) never matches.
    let token: String = {
        var random = SystemRandomNumberGenerator()
        return String(random.next(), radix: 16, uppercase: false)
    }()
    private var sequence = 0
    /// A marker is published and not yet acknowledged (or refused).
    private(set) var inFlight = false
    /// A marker waits for the output's other connections (see ``Barrier``).
    var barrier: Barrier?

    /// A marker of an output of several connections: the broker handles each connection's
    /// messages in order, but not one connection's against another's. So the marker, which
    /// goes on the first, is handed over only once the broker has acknowledged everything
    /// handed over on the others before it (their counts at `targets`): whatever holds the
    /// marker, a save the broker restored included, holds every publication before
    /// `position`.
    struct Barrier {
        /// Publications handed over, on all connections, when the marker fell due.
        var position: Int
        /// Publications handed over on connections 2, 3… then.
        var targets: [Int]
        /// Locations with a style handed over then (see ``next(locations:scope:)``).
        var locations: Int
    }
    private var lastSent = ContinuousClock.now
    /// The last marker the broker acknowledged, as published.
    private(set) var acknowledged: String?
    /// Publications handed over before the last marker acknowledged.
    private(set) var markedPosition = 0
    var check: Check?
    /// What the last clean stop left: the payload of the retained checkpoint it published,
    /// when nothing changed since (from the state file).
    var restoredCheckpoint: String?
    /// The checkpoint this run published while stopping, and the publications put in line
    /// by then: it holds for the state file only if nothing was put in line after it.
    var stopCheckpoint: (payload: String, puts: Int)?

    /// Whether a marker should go out now: something was handed over since the last one,
    /// at most once an ``interval``, one at a time, and none while a marker is checked.
    func isDue(now: ContinuousClock.Instant, handedOver: Int) -> Bool {
        check == nil && !inFlight && barrier == nil && now - lastSent >= Self.interval && handedOver > markedPosition
    }

    /// The next marker's payload; it is in flight until ``done(_:position:acknowledged:)``.
    /// - Parameters:
    ///   - locations: how many locations have a style handed over before it (at least):
    ///     once the broker acknowledges the marker it holds that many styles (see
    ///     ``locations(in:scope:)``).
    ///   - scope: what the daemon owns (its partition's shares, or `*`).
    mutating func next(locations: Int, scope: String = "*") -> String {
        sequence += 1
        inFlight = true
        lastSent = .now
        return #"{"token": "\#(token)", "sequence": \#(sequence), "locations": \#(max(locations, 0)), "scope": \#(jsonQuoted(scope))}"#
    }

    /// The broker acknowledged (or not) the marker published after `position` publications.
    /// - Returns: whether the publications before `position` are now known to be stored.
    mutating func done(_ payload: String, position: Int, acknowledged: Bool) -> Bool {
        inFlight = false
        guard acknowledged else { return false }
        markedPosition = max(markedPosition, position)
        self.acknowledged = payload
        return true
    }

    /// The `locations` a marker's payload counts, when it was published for `scope` (a
    /// marker of another partition's config says nothing of what this one reads back).
    static func locations(in payload: [UInt8], scope: String) -> Int? {
        let text = String(decoding: payload, as: UTF8.self)
        guard text.contains(#""scope": \#(jsonQuoted(scope))"#), let range = text.range(of: #""locations": "#) else { return nil }
        return Int(text[range.upperBound...].prefix { $0.isNumber })
    }

    /// A checked marker held: `payload` is the broker's, and everything handed over so far
    /// counts as marked.
    mutating func adopt(_ payload: String, position: Int) {
        acknowledged = payload
        markedPosition = position
    }
}
