import Foundation
import LiveTopics

/// The failover replicas' sync markers, as a value: what lets a standby that takes over skip
/// reading back every retained style.
///
/// The active publishes a marker about once a second on the connection that holds its
/// lease, to `{prefix}/sync/{partition}` (not retained, QoS 1), which every replica of the
/// partition subscribes to on its receiving connection. A marker is two things:
/// - a **fence**: the broker puts it in every replica's session in the same place relative
///   to the live updates (it queues each message to all its subscribers as it takes it), so
///   the updates before it are the same for the active and for each standby;
/// - an **acknowledgement** of an earlier fence (`covers`): the active puts it in line only
///   once, after that fence came back in its own stream, nothing waited for the broker (every
///   change of the updates before the fence handed over), and the broker takes a
///   connection's messages in order. So when a standby reads a marker that covers fence `F`,
///   the broker already holds every style the active derived from the updates before `F`.
///
/// A standby keeps the addresses whose style changed in its own state since the fence
/// before the last one covered (one interval more than needed: staleness expires by each
/// replica's clock, not by the stream). It **saw every acknowledgement** when, since that
/// fence, it has read each of the active's markers in sequence (none missed), under the
/// epoch of the lease it replaces and with the same rules as its own, with its receiving
/// connection up throughout, and it has not copied a peer's state or reloaded its rules
/// since. A takeover then publishes those addresses again (under the new epoch), and every
/// summary, and reads back nothing; otherwise (``evidence(replacing:)`` is nil) it reads
/// back every retained style, as a start does.
struct FailoverMarkers {
    static let interval = Duration.seconds(1)
    /// How long the active waits for its last marker to come back before it sends the next
    /// one all the same (the broker may have lost it).
    static let patience = Duration.seconds(10)
    /// The changed addresses a standby keeps at most: past that (no marker covers them,
    /// the active is overloaded or gone), it forgets them and cannot skip the read.
    static let limit = 1_000_000

    /// A marker's payload: `{"instance": "east-1", "epoch": 7, "sequence": 12, "covers": 11,
    /// "rules": "…"}`.
    struct Marker: Codable, Equatable {
        var instance: String
        var epoch: UInt64
        var sequence: UInt64
        /// The fence (an earlier marker's sequence) whose updates' styles the broker holds.
        var covers: UInt64?
        /// The rules' fingerprint: a standby with other rules derives other styles.
        var rules: String

        init(instance: String, epoch: UInt64, sequence: UInt64, covers: UInt64?, rules: String) {
            self.instance = instance
            self.epoch = epoch
            self.sequence = sequence
            self.covers = covers
            self.rules = rules
        }

        init?(payload: UnsafeRawBufferPointer) {
            guard let marker = try? JSONDecoder().decode(Marker.self, from: Data(payload)) else { return nil }
            self = marker
        }

        var payload: [UInt8] { (try? JSONEncoder().encode(self)).map { [UInt8]($0) } ?? [] }
    }

    // MARK: - As the active

    private var sequence: UInt64 = 0
    private var lastSent: ContinuousClock.Instant?
    /// The last marker sent has not come back yet: the next waits for it (two waiting in the
    /// output's line would be one, the newer replacing the older, and the standbys would
    /// see a marker missing).
    private var unread = false
    /// The last of its own markers that came back in its stream, until nothing waits.
    private var fenceSeen: UInt64?
    /// The last fence whose updates' changes were all handed over before what goes next.
    private var coverable: UInt64?

    /// The active's next marker when one is due, at most one an ``interval``.
    mutating func next(instance: String, epoch: UInt64, rules: String, now: ContinuousClock.Instant) -> Marker? {
        if let lastSent, now - lastSent < (unread ? Self.patience : Self.interval) { return nil }
        lastSent = now
        unread = true
        sequence += 1
        return Marker(instance: instance, epoch: epoch, sequence: sequence, covers: coverable, rules: rules)
    }

    /// Nothing waits for the broker: the fence last seen is covered by what goes next.
    mutating func outputIdle() {
        if let fenceSeen {
            coverable = fenceSeen
            self.fenceSeen = nil
        }
    }

    // MARK: - As a standby

    /// The epoch of the markers followed, and the sequence of the last one read.
    private var followed: (epoch: UInt64, sequence: UInt64)?
    /// Fences read, each with the position in ``changed`` from which changes came after it.
    private var fences: [(sequence: UInt64, start: Int)] = []
    /// Addresses whose style changed (and the topics left by a move), since ``base``.
    private var changed: [LocationAddress] = []
    /// The position of `changed[0]` since the markers were followed.
    private var base = 0
    /// The position from which the broker may lack a change, once a marker covered a fence.
    private var uncovered: Int?
    /// Why the last follow was dropped, for the log of a takeover that reads everything.
    private(set) var lastLoss = "the start"
    /// The state was copied from a peer and no takeover has read the broker since: the copy
    /// is as new as the stream, but not the stream (a value cleared while it was being
    /// copied may be in it), so the first takeover reads everything.
    private var joinedByCopy = false

    /// A marker read on the receiving connection, in order with the updates. `own`: this
    /// replica's instance and epoch while it claims or is active (its own markers are fences
    /// for itself); `rules`: its rules' fingerprint.
    mutating func read(_ marker: Marker, own: (instance: String, epoch: UInt64)?, rules: String) {
        if let own {
            if marker.instance == own.instance, marker.epoch == own.epoch, marker.sequence == sequence {
                fenceSeen = marker.sequence
                unread = false
            }
            return
        }
        guard marker.rules == rules else {
            forget("the active's rules were found to differ from this replica's")
            return
        }
        if let followed, followed.epoch == marker.epoch, marker.sequence == followed.sequence + 1 {
            if let covers = marker.covers, let fence = fences.firstIndex(where: { $0.sequence == covers }) {
                // One fence more than the one covered (see the type's comment).
                let from = fences[max(fence - 1, 0)]
                changed.removeFirst(from.start - base)
                base = from.start
                fences.removeFirst(max(fence - 1, 0))
                uncovered = from.start
            }
        } else {
            if let followed { forget(followed.epoch == marker.epoch ? "a marker of the active was missed" : "the markers of another epoch began") }
            // The first marker of an active: a fence, covering nothing known yet.
        }
        followed = (marker.epoch, marker.sequence)
        fences.append((marker.sequence, base + changed.count))
        // No marker has covered anything for a long while: the active cannot keep up.
        if changed.count > Self.limit || fences.count > 600 { forget("no marker of the active covered its changes for \(fences.count) s") }
    }

    /// A change of this replica's state while it does not publish (its style at `address`,
    /// and the topic a move left).
    mutating func standbyChanged(_ address: LocationAddress, left: LocationAddress?) {
        guard !fences.isEmpty else { return }
        changed.append(address)
        if let left { changed.append(left) }
    }

    /// What this replica knows of the active's acknowledgements no longer holds (its
    /// connection came back, it copied a peer's state, its rules changed, it became active
    /// or stood down): it follows the markers anew.
    mutating func forget(_ reason: String) {
        followed = nil
        fences = []
        changed = []
        base = 0
        uncovered = nil
        lastLoss = reason
    }

    /// The state was copied from a peer (see ``joinedByCopy``).
    mutating func copied() {
        forget("this replica copied a peer's state and has not taken over since")
        joinedByCopy = true
    }

    /// Starts a new active's markers (this replica's own, under a new epoch).
    mutating func activated() {
        joinedByCopy = false
        sequence = 0
        lastSent = nil
        unread = false
        fenceSeen = nil
        coverable = nil
    }

    /// The addresses a takeover publishes again, when this replica saw every
    /// acknowledgement of the active of `epoch` (the lease it replaces): nil when it cannot
    /// know what the broker holds, and must read it.
    func evidence(replacing epoch: UInt64?) -> [LocationAddress]? {
        guard !joinedByCopy, let followed, let epoch, followed.epoch == epoch, let uncovered else { return nil }
        return Array(changed[(uncovered - base)...])
    }

    /// Why ``evidence(replacing:)`` is nil, for the log.
    func missing(replacing epoch: UInt64?) -> String {
        if joinedByCopy { return "this replica copied a peer's state and has not taken over since" }
        guard let followed else { return "no marker of the active read since \(lastLoss)" }
        if followed.epoch != epoch { return "the markers read are of epoch \(followed.epoch), the lease replaced is of \(epoch.map { "\($0)" } ?? "none")" }
        return "no marker of the active has covered a fence since \(lastLoss)"
    }
}
