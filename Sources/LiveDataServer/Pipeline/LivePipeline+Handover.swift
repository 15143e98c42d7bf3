import Foundation
import LiveState
import LiveTopics

/// A location that moves from one partition's building into another's: the daemon that
/// takes it announces the arrival, non-retained, at `{prefix}/arrival/{dataset}/{id}`, and the
/// daemon that held it clears its old style and lets it go (it stays in that daemon's state,
/// placed where it went, and no longer counts in its summaries). Every partitioned daemon
/// subscribes to the arrivals of its datasets, in its persistent session: one that is down
/// learns of the move when it comes back.
///
/// Announced: a location new to this daemon that has a value of a domain that moves
/// locations (an asset, which may have been elsewhere; a room never moves), and one that
/// moved here from outside the partition.
extension LivePipeline {
    /// The arrival payload: who took the location, and where it is now.
    struct Arrival: Codable {
        var partition: String
        var instance: String
        /// The location's address: `dataset/venue/building/floor/room/location`.
        var location: String
    }

    /// `{prefix}/arrival/{dataset}/+` for each dataset of the partition.
    var arrivalFilters: [String] {
        guard let partition = config.partition, let arrivalPrefix else { return [] }
        return partition.datasets.sorted().map { "\(arrivalPrefix)\($0)/+" }
    }

    /// Whether this daemon publishes for `address`: its partition's, or everything.
    func owns(_ address: LocationAddress) -> Bool { config.partition?.owns(address) ?? true }

    func arrivesFromElsewhere(_ change: DerivedChange) -> Bool {
        if let old = change.movedFrom { return !owns(old) }
        return change.isFirst && change.hasValue(ofDomain: config.ruleSet.moves)
    }

    func announceArrival(_ change: DerivedChange) {
        guard let partition = config.partition, let arrivalPrefix else { return }
        let arrival = Arrival(partition: partition.name, instance: config.instanceName, location: change.address.path)
        guard let payload = try? JSONEncoder().encode(arrival) else { return }
        publisher.send(
            Publication(topic: "\(arrivalPrefix)\(change.address.dataset)/\(change.address.location)", payload: Array(payload), retain: false))
    }

    /// Another partition's daemon took a location: when this daemon holds it in its own
    /// partition, it is handed over.
    func arrival(_ payload: UnsafeRawBufferPointer) {
        guard let partition = config.partition,
            let arrival = try? JSONDecoder().decode(Arrival.self, from: Data(payload)),
            arrival.partition != partition.name, (try? LiveTopic(parsing: arrival.location + "/arrival")) != nil,
            let address = LocationAddress(path: arrival.location), !partition.owns(address),
            let change = core.handOver(dataset: address.dataset, id: address.location, to: address, now: .now, from: { partition.owns($0) }),
            let from = change.movedFrom
        else { return }
        logger.info(
            "a location moved to another partition's building: handed over to \(arrival.instance)",
            metadata: ["location.from": "\(from)", "location.to": "\(address)"])
        handOvers += 1
        queue(change, arrived: nil)
    }

    /// Clears the old topic of a location handed over to another partition.
    func handedOver(_ old: LocationAddress) {
        if case .inDoubt = versions {
            held?.put(topics.clearing(styleOf: old), under: .style(old), since: nil)
            return
        }
        clear(old)
    }

    /// The watched bridge's state (`1` up, `0` down). A bridge that was down may have lost
    /// the clears made meanwhile (mosquitto's drops what finds its queue full, and a
    /// reconnection sends only what the broker still retains): when it is back, the recent
    /// clears that are still right go out again.
    func bridgeState(_ payload: UnsafeRawBufferPointer) {
        let up = payload.count == 1 && payload[0] == UInt8(ascii: "1")
        defer { bridgeUp = up }
        guard up, bridgeUp == false, !publisher.clears.isEmpty, publishes else { return }
        bridgeRecoveries += 1
        // What is retained at the edge the bridge sends by itself on reconnecting: only the
        // clears still right (nothing there now) go out again.
        var count = 0
        for topic in Set(publisher.clears) {
            if let address = topics.address(ofStyleTopic: topic) {
                guard core.store[address] == nil else { continue }
            } else if let place = topics.place(ofSummaryTopic: topic) {
                guard (core.store.summaries.summary(place)?.locations ?? 0) == 0 else { continue }
            } else {
                continue
            }
            publisher.send(Publication(topic: topic, payload: [], retain: true))
            count += 1
        }
        logger.notice(
            "the bridge to the central broker is back: \(count) recent clears published again (a bridge may lose them while down)",
            metadata: ["mqtt.topic": "\(bridgeStateTopic ?? "")"])
        drainOutput()
    }
}
