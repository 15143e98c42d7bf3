/// Where a location is: the first six components of its live topics
/// (`dataset/venue/building/floor/room/location`).
public struct LocationAddress: Hashable, Sendable, CustomStringConvertible {
    public var dataset: String
    public var venue: String
    public var building: String
    public var floor: String
    public var room: String
    public var location: String

    public init(dataset: String, venue: String, building: String, floor: String, room: String, location: String) {
        self.dataset = dataset
        self.venue = venue
        self.building = building
        self.floor = floor
        self.room = room
        self.location = location
    }

    /// The address of a topic's location.
    public init(_ topic: LiveTopic) {
        self.init(
            dataset: topic.dataset, venue: topic.venue, building: topic.building, floor: topic.floor, room: topic.room,
            location: topic.location)
    }

    /// The topic of one of this location's domains.
    public func topic(domain: String) -> LiveTopic {
        // Components came from a valid topic or were validated; the domain is checked here.
        (try? LiveTopic(
            dataset: dataset, venue: venue, building: building, floor: floor, room: room, location: location,
            domain: domain))
            ?? LiveTopic(unchecked: [dataset, venue, building, floor, room, location, domain])
    }

    /// The value of one component (`nil` for `.domain`).
    public subscript(component: LiveTopic.Component) -> String? {
        switch component {
        case .dataset: dataset
        case .venue: venue
        case .building: building
        case .floor: floor
        case .room: room
        case .location: location
        case .domain: nil
        }
    }

    /// `dataset/venue/building/floor/room/location`.
    public var description: String { "\(dataset)/\(venue)/\(building)/\(floor)/\(room)/\(location)" }

    /// The components as a JSON object, in topic order.
    public var json: String {
        var object = JSONObjectWriter()
        for component in LiveTopic.Component.allCases {
            if let value = self[component] { object.add(component.rawValue, value) }
        }
        return object.json
    }
}

extension LiveTopic {
    /// Builds a topic from components known to be valid.
    init(unchecked parts: [String]) {
        dataset = parts[0]
        venue = parts[1]
        building = parts[2]
        floor = parts[3]
        room = parts[4]
        location = parts[5]
        domain = parts[6]
    }
}

extension TopicCriteria {
    /// Whether a location's topic for `domain` meets these criteria.
    public func matches(_ address: LocationAddress, domain: String) -> Bool {
        switch form {
        case .filter(let filter):
            return filter.matches(address.description + "/" + domain)
        case .components(let values):
            for (component, value) in values {
                let actual = component == .domain ? domain : address[component]
                if actual != value { return false }
            }
            return true
        }
    }
}
