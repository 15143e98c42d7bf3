import LiveState
import LiveTopics

/// The events stage: what the floor view's viewers are told (``EventHub``), as the broker
/// is: a change, a location that left a place, a summary; and a heartbeat that keeps idle
/// streams open.
final class ViewerFeed {
    let hub: EventHub
    private var lastHeartbeat = ContinuousClock.now
    static let heartbeatInterval = Duration.seconds(15)

    init(hub: EventHub) { self.hub = hub }

    var hasViewers: Bool { hub.hasViewers }

    /// Tells the viewers in scope of a change (and of the place it left); returns its JSON,
    /// written once for the viewers and the broker. Nil without viewers.
    func change(_ change: DerivedChange, topics: OutputFormat) -> [UInt8]? {
        guard hub.hasViewers else { return nil }
        let payload = topics.payload(change)
        if let old = change.movedFrom { removal(old) }
        hub.publish("change", address: change.address, json: payload)
        return payload
    }

    /// Tells the viewers in scope that a location left `address`.
    func removal(_ address: LocationAddress) {
        guard hub.hasViewers else { return }
        var stream = JSONStream(capacity: 160)
        stream.beginObject()
        stream.add("location", address.location)
        stream.key("topic")
        address.write(to: &stream)
        stream.endObject()
        hub.publish("remove", address: address, json: stream.bytes)
    }

    func summary(_ place: Place, json: [UInt8]) {
        if hub.hasViewers { hub.publish("summary", place: place, json: json) }
    }

    func heartbeatIfDue() {
        guard ContinuousClock.now - lastHeartbeat >= Self.heartbeatInterval else { return }
        lastHeartbeat = .now
        hub.heartbeat()
    }
}
