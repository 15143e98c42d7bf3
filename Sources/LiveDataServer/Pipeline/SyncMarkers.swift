import LiveTopics

/// The daemon's sync markers, as a value: about once a second while it publishes, a
/// retained `{"token": …, "sequence": N}` at the checkpoint topic, handed to the client
/// after everything before it. The broker handles a connection's messages in order, so once
/// it acknowledges a marker it has stored every publication handed over before it. A broker
/// that resumes the session and still holds the last acknowledged marker lacks at most what
/// was handed over after it (``Publisher/recent``); one that holds another (it restored an
/// older save) or none calls for a full convergence. A clean stop ends with a marker once
/// everything is acknowledged, at both topics (see below), and the state file records it
/// (see ``LivePipeline/checkpoint(timeout:)``).
///
/// That order holds within one run of the broker, and a broker's save is one moment of it
/// (mosquitto writes its store from its one thread): a save that holds a marker holds
/// everything the broker took before it. It does not hold across a restart. A broker
/// restored from a save has lost what it acknowledged after the save, and a marker that
/// reaches it after the reconnection (a new one, or the one in flight that libmosquitto
/// sends again) would vouch for all of that. So a marker vouches only when the output's
/// connections stayed up from the moment it fell due to its acknowledgement, and markers go
/// out only once what the broker holds has been verified since the output's last
/// reconnection (``verified(since:now:)``): by a check of the last marker acknowledged
/// before it, or by a convergence. Both are counted in the output client's accepted
/// connections (``MQTTClient/acceptedConnections``), which a reconnection of any of them
/// raises before it reads an acknowledgement.
///
/// Markers take turns between two retained topics (``slot``): the marker in flight when a
/// connection drops, which libmosquitto sends again after the reconnection, never
/// overwrites the last one acknowledged before it. A broker that holds that one holds what
/// came before it, whether it kept running (a network cut) or restored a save made after
/// it, whatever it did with the one in flight.
///
/// The pipeline asks it what to do (``isDue(now:handedOver:connections:)``,
/// ``next(locations:scope:connections:)``) and tells it what happened
/// (``done(_:position:acknowledged:connections:)``); it does no I/O.
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

    /// The topic a marker of this sequence goes to: 0, the checkpoint topic, for odd
    /// sequences, 1, its alternate, for even ones.
    static func slot(ofSequence sequence: Int) -> Int { sequence % 2 == 1 ? 0 : 1 }

    /// The topic of the last marker made (``next(locations:scope:connections:)``).
    var slot: Int { Self.slot(ofSequence: sequence) }

    /// This run's token: a marker of another run (or another daemon) never matches.
    let token: String = {
        var random = SystemRandomNumberGenerator()
        return String(random.next(), radix: 16, uppercase: false)
    }()
    private var sequence = 0
    /// A marker is published and not yet acknowledged (or refused).
    var inFlight: Bool { inFlightUnder != nil }
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
        /// Locations with a style handed over then (see ``next(locations:scope:connections:)``).
        var locations: Int
        /// The output's accepted connections then: a reconnection since voids the barrier.
        var connections: Int
    }
    private var lastSent = ContinuousClock.now
    /// The last marker the broker acknowledged, as published.
    private(set) var acknowledged: String?
    /// Publications handed over before the last marker acknowledged.
    private(set) var markedPosition = 0
    /// The output's accepted connections when what the broker holds was last verified (see
    /// ``verified(since:now:)``); `nil` before the first time. No marker goes out under
    /// other connections than these.
    private(set) var verifiedUnder: Int?
    /// The accepted connections the marker in flight was handed over under; nil when none is.
    private var inFlightUnder: Int?
    var check: Check?
    /// What the last clean stop left: the payload of the retained checkpoint it published,
    /// when nothing changed since (from the state file).
    var restoredCheckpoint: String?
    /// The checkpoint this run published while stopping, and the publications put in line
    /// by then: it holds for the state file only if nothing was put in line after it.
    var stopCheckpoint: (payload: String, puts: Int)?

    /// Whether a marker should go out now: something was handed over since the last one,
    /// at most once an ``interval``, one at a time, none while a marker is checked, and
    /// none before what the broker holds is verified under the output's `connections`
    /// (its accepted connections now).
    func isDue(now: ContinuousClock.Instant, handedOver: Int, connections: Int) -> Bool {
        isVerified(under: connections) && check == nil && !inFlight && barrier == nil && now - lastSent >= Self.interval
            && handedOver > markedPosition
    }

    /// What the broker holds was verified since the output's last reconnection: its
    /// accepted connections are still `connections`.
    func isVerified(under connections: Int) -> Bool { verifiedUnder == connections }

    /// A check of the last marker, or a convergence, that began while the output's accepted
    /// connections were `connections` has found what the broker holds, or made it agree; it
    /// holds now unless the output reconnected meanwhile (`now` differs), when the run
    /// that follows the reconnection verifies it again.
    mutating func verified(since connections: Int, now: Int) {
        if connections == now { verifiedUnder = now }
    }

    /// The next marker's payload; it is in flight until ``done(_:position:acknowledged:connections:)``.
    /// - Parameters:
    ///   - locations: how many locations have a style handed over before it (at least):
    ///     once the broker acknowledges the marker it holds that many styles (see
    ///     ``locations(in:scope:)``).
    ///   - scope: what the daemon owns (its partition's shares, or `*`).
    ///   - connections: the output's accepted connections when it fell due: it vouches only
    ///     if they are the same when it is acknowledged.
    mutating func next(locations: Int, scope: String = "*", connections: Int) -> String {
        sequence += 1
        inFlightUnder = connections
        lastSent = .now
        return #"{"token": "\#(token)", "sequence": \#(sequence), "locations": \#(max(locations, 0)), "scope": \#(jsonQuoted(scope))}"#
    }

    /// The broker acknowledged (or not) the marker published after `position` publications,
    /// while the output's accepted connections were `connections`.
    /// - Returns: whether the publications before `position` are now known to be stored:
    ///   never for an acknowledgement that came after a reconnection, which may be a
    ///   restarted broker's, that lost what its previous run acknowledged.
    mutating func done(_ payload: String, position: Int, acknowledged: Bool, connections: Int) -> Bool {
        let sentUnder = inFlightUnder
        inFlightUnder = nil
        guard acknowledged, sentUnder == connections else { return false }
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
