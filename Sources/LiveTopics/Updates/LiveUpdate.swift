/// One live update: a live-data topic and what its payload said.
public struct LiveUpdate: Hashable, Sendable {
    public var topic: LiveTopic
    /// The payload's `id`, or the topic's location when the payload has none.
    public var id: String
    /// The payload's `timestamp`, or the time it was received.
    public var timestamp: LiveTimestamp
    /// Which system sent it (`originSourceId`), if it said.
    public var originSourceId: String?
    /// Property values as strings; numbers and booleans are normalised to their text.
    public var properties: LiveProperties
    /// An empty payload: the domain's value for this location is removed.
    public var isRemoval: Bool

    public init(
        topic: LiveTopic, id: String? = nil, timestamp: LiveTimestamp, originSourceId: String? = nil,
        properties: LiveProperties, isRemoval: Bool = false
    ) {
        self.topic = topic
        self.id = id ?? topic.location
        self.timestamp = timestamp
        self.originSourceId = originSourceId
        self.properties = properties
        self.isRemoval = isRemoval
    }

    /// The payload that carries this update, in the format `LiveUpdate(topic:payload:)` reads;
    /// empty for a removal.
    public var payload: String {
        if isRemoval { return "" }
        var object = JSONObjectWriter()
        object.add("id", id)
        object.add("timestamp", timestamp.description)
        if let originSourceId { object.add("originSourceId", originSourceId) }
        object.add("properties", json: properties.json)
        return object.json
    }
}

extension LiveProperties {
    /// The properties as a JSON object of strings.
    public var json: String {
        var object = JSONObjectWriter()
        for property in self { object.add(property.name, property.value) }
        return object.json
    }
}
