import Foundation
import LiveState
import LiveTopics
import Logging

/// The partition stage, which exists only with a partition: the hand-over of locations that
/// move between partitions' buildings, and the watched bridge to a central broker.
///
/// A location that moves from one partition's building into another's: the daemon that
/// takes it announces the arrival, non-retained, at `{prefix}/arrival/{dataset}/{id}`, and
/// the daemon that held it clears its old style and lets it go (it stays in that daemon's
/// state, placed where it went, and no longer counts in its summaries). Every partitioned
/// daemon subscribes to the arrivals of its datasets, in its persistent session: one that
/// is down learns of the move when it comes back. Announced: a location new to this daemon
/// that has a value of a domain that moves locations (an asset, which may have been
/// elsewhere; a room never moves), and one that moved here from outside the partition.
final class PartitionStage {
    /// The arrival payload: who took the location, and where it is now.
    struct Arrival: Codable {
        var partition: String
        var instance: String
        /// The location's address: `dataset/venue/building/floor/room/location`.
        var location: String
        /// The payloads' layout (``WireFormat``); absent in an arrival of a daemon before it was written.
        var format: Int? = WireFormat.version
    }

    let partition: Partition
    /// `{prefix}/arrival/`.
    let arrivalPrefix: String
    /// `$SYS/broker/connection/{partition.bridge}/state`, when a bridge is watched.
    let bridgeStateTopic: String?
    private var bridgeUp: Bool?
    /// Locations handed over to another partition's daemon.
    private(set) var handOvers = 0
    /// Times the watched bridge came back and the recent clears went out again.
    private(set) var bridgeRecoveries = 0
    /// Stored locations the start left out, outside the partition (see ``dropped(_:path:)``).
    private(set) var droppedAtStart = 0
    private let instance: String
    private let core: LiveCore
    private let output: OutputStage
    private let logger: Logger

    init(
        partition: Partition, prefix: String, bridge: String?, instance: String, core: LiveCore,
        output: OutputStage, logger: Logger
    ) {
        self.partition = partition
        arrivalPrefix = "\(prefix)/arrival/"
        bridgeStateTopic = bridge.map { "$SYS/broker/connection/\($0)/state" }
        self.instance = instance
        self.core = core
        self.output = output
        self.logger = logger
    }

    /// Which stored locations a start keeps: the partition's own. A location stored by a run
    /// whose `partition.owns` was wider is never updated here again (its updates are refused
    /// as `outside_partition`), so it is not kept.
    var keeps: (LocationAddress) -> Bool { { [partition] in partition.owns($0) } }

    /// The start left `count` stored locations out (see ``keeps``). Their retained styles
    /// are not cleared: they lie in another partition's scope, where the daemon that owns
    /// them now publishes their styles, and its convergence clears those it does not hold.
    /// A clear from here could erase the style that daemon has just published.
    func dropped(_ count: Int, path: String) {
        droppedAtStart = count
        guard count > 0 else { return }
        logger.notice(
            "dropped \(count) stored locations outside partition \(partition.name) (partition.owns changed): their styles are the owning daemon's to publish or clear",
            metadata: ["store.path": "\(path)", "partition.name": "\(partition.name)"])
    }

    /// `{prefix}/arrival/{dataset}/+` for each dataset of the partition.
    var arrivalFilters: [String] { partition.datasets.sorted().map { "\(arrivalPrefix)\($0)/+" } }

    /// What the owner does with a change, as far as the partition decides.
    enum Routing {
        /// Another partition's: only its old topic was this one's, cleared here.
        case handedOver
        /// This partition's; `announce` when it arrives from elsewhere; `clearing`: the old
        /// topic of a location that moved within the partition (one that came from another
        /// partition's is that daemon's to clear, told by the arrival).
        case owned(announce: Bool, clearing: LocationAddress?)
    }

    func route(_ change: DerivedChange) -> Routing {
        guard partition.owns(change.address) else {
            if let old = change.movedFrom, partition.owns(old) { output.clearHandedOver(old) }
            return .handedOver
        }
        guard let old = change.movedFrom else {
            return .owned(announce: change.isFirst && change.hasValue(ofDomain: output.ruleSet.moves), clearing: nil)
        }
        return partition.owns(old) ? .owned(announce: false, clearing: old) : .owned(announce: true, clearing: nil)
    }

    /// Announces that this daemon took a location.
    func announceArrival(_ change: DerivedChange) {
        let arrival = Arrival(partition: partition.name, instance: instance, location: change.address.path)
        guard let payload = try? JSONEncoder().encode(arrival) else { return }
        output.send(
            Publication(topic: "\(arrivalPrefix)\(change.address.dataset)/\(change.address.location)", payload: Array(payload), retain: false))
    }

    /// Another partition's daemon took a location: when this daemon holds it in its own
    /// partition, it is handed over.
    /// - Returns: the change to route (the location placed where it went).
    func arrival(_ payload: UnsafeRawBufferPointer) -> DerivedChange? {
        guard let arrival = try? JSONDecoder().decode(Arrival.self, from: Data(payload)),
            arrival.partition != partition.name, (try? LiveTopic(parsing: arrival.location + "/arrival")) != nil,
            let address = LocationAddress(path: arrival.location), !partition.owns(address),
            let change = core.handOver(dataset: address.dataset, id: address.location, to: address, now: .now, from: { self.partition.owns($0) }),
            let from = change.movedFrom
        else { return nil }
        logger.info(
            "a location moved to another partition's building: handed over to \(arrival.instance)",
            metadata: ["location.from": "\(from)", "location.to": "\(address)"])
        handOvers += 1
        return change
    }

    /// The watched bridge's state (`1` up, `0` down): whether to publish the recorded clears
    /// again now (``republishClears(checkpoints:)``, a job). A bridge that was down may have
    /// lost clears made meanwhile (mosquitto drops what finds its queue full, an edge
    /// restarted without persistence forgets its queue, and a reconnection sends only what
    /// the edge still retains); so may one that was down while this daemon was: the first
    /// state a start sees up counts as a return too. Only this daemon, publishing, does it.
    func bridgeState(_ payload: UnsafeRawBufferPointer, publishing: Bool) -> Bool {
        let up = payload.count == 1 && payload[0] == UInt8(ascii: "1")
        defer { bridgeUp = up }
        guard up, bridgeUp != true, publishing else { return false }
        guard !recovering else {
            recoverAgain = true
            return false
        }
        recovering = true
        return true
    }

    /// A walk of the recorded clears is under way; another return of the bridge meanwhile
    /// asks for one more after it.
    private var recovering = false
    private var recoverAgain = false
    /// Clears published again after the bridge came back.
    private(set) var clearsRepublished = 0
    /// How many recorded clears one batch of the walk reads and puts in line; the next
    /// batch waits until the output's line is down to one batch.
    static let recoveryBatch = 1_024

    /// Publishes again every recorded clear still right (nothing held at its topic now, and
    /// the topic this partition's), in batches, each once the output's line has room; and
    /// forgets the others (a location came back there, or the partition changed) and those
    /// past `partition.bridgeHorizon`.
    /// - Returns: whether another walk is asked for (the bridge came back again meanwhile).
    nonisolated(nonsending) func republishClears(checkpoints: CheckpointStage, publishing: () -> Bool) async -> Bool {
        defer { recovering = false }
        bridgeRecoveries += 1
        let started = ContinuousClock.now
        let inFile = checkpoints.isOpen
        // What the last snapshot did not write goes in first, and what passed the horizon out.
        guard await checkpoints.writeClears(pruning: true) else { return false }
        let inMemory = inFile ? [] : output.clearsInMemory()
        var after: String?
        var memoryIndex = 0
        var published = 0
        var forgotten = 0
        while !Task.isCancelled, publishing() {
            let batch: [String]
            if inFile {
                guard let read = await checkpoints.clearedTopics(after: after, limit: Self.recoveryBatch) else { break }
                batch = read
            } else {
                batch = Array(inMemory[memoryIndex..<min(memoryIndex + Self.recoveryBatch, inMemory.count)])
                memoryIndex += batch.count
            }
            guard let last = batch.last else { break }
            after = last
            var forget: [String] = []
            for topic in batch {
                if stillRight(topic) {
                    output.sendClearAgain(topic)
                    published += 1
                } else {
                    forget.append(topic)
                }
            }
            output.drain()
            forgotten += forget.count
            if inFile { await checkpoints.forgetCleared(forget) } else { output.forgetClearsInMemory(forget) }
            // The line holds one entry per topic: a batch at a time keeps it short.
            while output.waiting > Self.recoveryBatch, !Task.isCancelled, publishing() {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        clearsRepublished += published
        logger.notice(
            "the bridge to the central broker is up: \(published) recorded clears published again (a bridge may lose them while down), \(forgotten) forgotten (published again since, or outside the partition), in \(String(format: "%.2f", (ContinuousClock.now - started) / .seconds(1))) s",
            metadata: ["mqtt.topic": "\(bridgeStateTopic ?? "")"])
        defer { recoverAgain = false }
        return recoverAgain
    }

    /// Whether a recorded clear is still right: nothing is held at its topic now, and the
    /// topic is in this partition (a building that went to another partition is that
    /// daemon's to publish or clear).
    private func stillRight(_ topic: String) -> Bool {
        let topics = output.topics
        if let address = topics.address(ofStyleTopic: topic) {
            return partition.owns(address) && !core.holds(address)
        }
        if let place = topics.place(ofSummaryTopic: topic) {
            return partition.owns(place) && core.summaryLocations(place) == 0
        }
        return false
    }
}
