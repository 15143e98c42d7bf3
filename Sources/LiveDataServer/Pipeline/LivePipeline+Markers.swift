import Mosquitto

/// The sync markers and the stop's checkpoint (see ``SyncMarkers``): what lets a start after
/// a clean stop, or a reconnection the broker resumed, skip reading back every style.
extension LivePipeline {
    /// `{prefix}/checkpoint/{client id}`: where the markers and a clean stop's checkpoint go.
    var checkpointTopic: String { "\(topics.prefix)/checkpoint/\(client.configuration.clientID ?? "livedata")" }

    /// What the markers' counts are of: the partition's shares, or everything.
    var markerScope: String { config.partition.map { $0.shares.map(\.description).joined(separator: ",") } ?? "*" }

    /// Publishes a marker when one is due (``SyncMarkers/isDue(now:handedOver:)``), only
    /// while the versions are known and the output is connected.
    func publishMarkerIfDue() {
        // A failover replica's lease connection ends with its epoch: the one that takes over
        // converges in full, so markers would vouch for nothing.
        guard failover == nil, hasConverged, output.state == .connected else { return }
        if markers.barrier == nil {
            guard markers.isDue(now: .now, handedOver: publisher.handedOver) else { return }
            drainOutput()
            guard output.connectionCount > 1 else {
                sendMarker()
                return
            }
            markers.barrier = SyncMarkers.Barrier(
                position: publisher.handedOver, targets: (1..<output.connectionCount).map { output.handedOver(connection: $0).sent },
                locations: markedLocations)
        }
        if let barrier = markers.barrier,
            barrier.targets.indices.allSatisfy({ output.handedOver(connection: $0 + 1).acknowledged >= barrier.targets[$0] })
        {
            markers.barrier = nil
            sendMarker(position: barrier.position, locations: barrier.locations)
        }
    }

    /// Locations with a style handed over: every waiting publication may be a location's
    /// first style, and those are not counted.
    private var markedLocations: Int { core.store.count - publisher.waiting }

    /// Publishes the next marker after everything handed over so far (or, with `position`,
    /// after the first `position` publications, which the broker has already stored but for
    /// those on the marker's own connection); ``markerDone(_:position:acknowledged:)``
    /// follows its acknowledgement.
    /// - Returns: its payload.
    @discardableResult
    func sendMarker(position: Int? = nil, locations: Int? = nil) -> String {
        let payload = markers.next(locations: locations ?? markedLocations, scope: markerScope)
        let position = position ?? publisher.handedOver
        let client = output
        let topic = checkpointTopic
        Task {
            let acknowledged = (try? await client.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)) != nil
            self.markerDone(payload, position: position, acknowledged: acknowledged)
        }
        return payload
    }

    private func markerDone(_ payload: String, position: Int, acknowledged: Bool) {
        if markers.done(payload, position: position, acknowledged: acknowledged) {
            publisher.forgetRecent(before: position)
        }
    }

    /// At a clean stop, while still connected: waits (at most `timeout`) until everything
    /// put in line has left and been acknowledged by the broker, then publishes a retained
    /// checkpoint (a fresh token) at ``checkpointTopic`` and waits for its acknowledgement.
    /// If nothing is put in line after it, the state file records it with the last snapshot
    /// (``recordCheckpoint()``); the next start, finding the same checkpoint retained at a
    /// broker that resumed its session, knows the broker holds every style the state file
    /// holds, and skips reading them all back (see ``connected()``).
    public func checkpoint(timeout: Duration = .seconds(5)) async {
        guard failover == nil, snapshots.writer != nil, hasConverged, output.state == .connected else { return }
        let deadline = ContinuousClock.now + timeout
        while publisher.waiting > 0 || output.inFlight > 0 || markers.inFlight {
            guard ContinuousClock.now < deadline, output.state == .connected else {
                logger.notice(
                    "stopping with \(publisher.waiting + output.inFlight) publications not yet acknowledged: the next start converges with the broker")
                return
            }
            drainOutput()
            try? await Task.sleep(for: .milliseconds(10))
        }
        let puts = publisher.puts
        // Nothing is in flight on any connection: the marker covers everything handed over.
        markers.barrier = nil
        let payload = sendMarker()
        // Bounded: a stop does not wait long for an acknowledgement that may not come.
        let acknowledgedBy = ContinuousClock.now + .seconds(2)
        while markers.inFlight && ContinuousClock.now < acknowledgedBy { try? await Task.sleep(for: .milliseconds(5)) }
        if markers.acknowledged == payload {
            markers.stopCheckpoint = (payload, puts)
        } else {
            logger.notice("the broker did not acknowledge the stop's marker: the next start converges with the broker")
        }
    }

    /// Writes the checkpoint into the state file when it still holds: nothing was put in
    /// line after it (the last snapshot is written before this).
    func recordCheckpoint() async {
        guard let writer = snapshots.writer, let stop = markers.stopCheckpoint, publisher.puts == stop.puts, snapshots.fault == nil
        else { return }
        await writer.setCheckpoint(stop.payload)
    }
}
