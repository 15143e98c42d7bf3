/// A live-data topic: `{dataset}/{venue}/{building}/{floor}/{room}/{location}/{domain}`.
///
/// Every level is present and non-empty and contains no `/`, `+`, `#` or NUL.
public struct LiveTopic: Hashable, Sendable, CustomStringConvertible {
    /// The seven components, in topic order.
    public enum Component: String, CaseIterable, Sendable, Codable {
        case dataset, venue, building, floor, room, location, domain
    }

    /// Also called the solution.
    public var dataset: String
    public var venue: String
    public var building: String
    /// A floor id, not an index.
    public var floor: String
    public var room: String
    public var location: String
    public var domain: String

    /// Builds a topic from its components.
    /// - Throws: ``TopicError/invalidComponent(component:value:reason:)`` when a component is
    ///   empty or contains `/`, `+`, `#` or NUL.
    public init(
        dataset: String, venue: String, building: String, floor: String,
        room: String, location: String, domain: String
    ) throws(TopicError) {
        for (component, value) in [
            (Component.dataset, dataset), (.venue, venue), (.building, building), (.floor, floor),
            (.room, room), (.location, location), (.domain, domain),
        ] {
            try Self.validateComponent(value, as: component)
        }
        self.init(levels: dataset, venue, building, floor, room, location, domain)
    }

    /// Parses a topic name into its seven components.
    /// - Throws: ``TopicError`` when the string is not a valid MQTT topic name, does not have
    ///   seven levels, or has an empty level.
    public init(parsing topic: String) throws(TopicError) {
        // A well-formed topic is cut in one pass over its bytes; anything else takes the
        // checks below, which say what is wrong.
        if let parsed = Self.wellFormed(topic) {
            self = parsed
            return
        }
        try TopicName.validate(topic)
        var parts: [String] = []
        parts.reserveCapacity(7)
        for part in topic.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            parts.append(String(Substring(part)))
        }
        guard parts.count == 7 else { throw .wrongLevelCount(topic: topic, count: parts.count) }
        for (index, part) in parts.enumerated() where part.isEmpty {
            throw .emptyComponent(topic: topic, level: index + 1, component: Component.allCases[index])
        }
        dataset = parts[0]
        venue = parts[1]
        building = parts[2]
        floor = parts[3]
        room = parts[4]
        location = parts[5]
        domain = parts[6]
    }

    /// The topic when it is well formed (seven non-empty levels, no `+`, `#` or NUL),
    /// cut at its six slashes in one pass: no array of levels, no second scan.
    private static func wellFormed(_ topic: String) -> LiveTopic? {
        topic.utf8.withContiguousStorageIfAvailable { bytes -> LiveTopic? in
            let count = bytes.count
            guard let slashes = slashes(UnsafeRawBufferPointer(bytes), asciiOnly: false) else { return nil }
            // Cut at ASCII slashes: every level is valid UTF-8 as the topic is.
            func level(_ start: Int, _ end: Int) -> String {
                String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            }
            return LiveTopic(
                levels: level(0, slashes.0), level(slashes.0 + 1, slashes.1), level(slashes.1 + 1, slashes.2),
                level(slashes.2 + 1, slashes.3), level(slashes.3 + 1, slashes.4), level(slashes.4 + 1, slashes.5),
                level(slashes.5 + 1, count))
        } ?? nil
    }

    /// Where a topic's six slashes are, in its bytes.
    package typealias Slashes = (Int, Int, Int, Int, Int, Int)

    /// Where the six slashes are when these bytes are a well-formed topic (see
    /// ``init(parsing:)``) of ASCII characters only, checked in place: one that needs no
    /// string to be made to be read as a location's path and a domain, and a valid MQTT
    /// topic name. A new location's first update takes this, a million times in a venue's
    /// first minute; any other topic takes ``init(parsing:)``.
    package static func slashesOfWellFormedASCII(_ bytes: UnsafeRawBufferPointer) -> Slashes? {
        slashes(bytes, asciiOnly: true)
    }

    /// Where the six slashes of a well-formed topic are (seven non-empty levels, no `+`, `#`
    /// or NUL, no longer than a topic may be; with `asciiOnly`, no byte above 127), in one
    /// pass over its bytes; `nil` for any other.
    private static func slashes(_ bytes: UnsafeRawBufferPointer, asciiOnly: Bool) -> Slashes? {
        let count = bytes.count
        guard count <= TopicName.maximumLength else { return nil }
        var slashes = (0, 0, 0, 0, 0, 0)
        var seen = 0
        let ascii = TopicBytes.scan(bytes) { index in
            switch seen {
            case 0: slashes.0 = index
            case 1: slashes.1 = index
            case 2: slashes.2 = index
            case 3: slashes.3 = index
            case 4: slashes.4 = index
            case 5: slashes.5 = index
            default: return false
            }
            seen += 1
            return true
        }
        guard let ascii, seen == 6, slashes.0 > 0, slashes.1 > slashes.0 + 1, slashes.2 > slashes.1 + 1,
            slashes.3 > slashes.2 + 1, slashes.4 > slashes.3 + 1, slashes.5 > slashes.4 + 1, count > slashes.5 + 1,
            ascii || !asciiOnly
        else { return nil }
        return slashes
    }

    /// Components already checked.
    private init(
        levels dataset: String, _ venue: String, _ building: String, _ floor: String, _ room: String, _ location: String,
        _ domain: String
    ) {
        self.dataset = dataset
        self.venue = venue
        self.building = building
        self.floor = floor
        self.room = room
        self.location = location
        self.domain = domain
    }

    /// The value of one component.
    public subscript(component: Component) -> String {
        switch component {
        case .dataset: dataset
        case .venue: venue
        case .building: building
        case .floor: floor
        case .room: room
        case .location: location
        case .domain: domain
        }
    }

    /// The components in topic order.
    public var components: [String] { [dataset, venue, building, floor, room, location, domain] }

    /// The topic name, `dataset/venue/building/floor/room/location/domain`.
    public var description: String { components.joined(separator: "/") }

    /// The six components that name the location (everything but the domain), joined by `/`.
    public var locationPath: String { LocationAddress(self).description }

    /// Checks one component on its own.
    /// - Throws: ``TopicError/invalidComponent(component:value:reason:)``.
    public static func validateComponent(_ value: String, as component: Component) throws(TopicError) {
        if value.isEmpty {
            throw .invalidComponent(component: component, value: value, reason: "a component cannot be empty")
        }
        for byte in value.utf8 {
            let reason: String? =
                switch byte {
                case UInt8(ascii: "/"): "a component cannot contain '/' (it separates levels)"
                case UInt8(ascii: "+"): "a component cannot contain '+' (leave the component out to match any value)"
                case UInt8(ascii: "#"): "a component cannot contain '#' (leave the component out to match any value)"
                case 0: "a component cannot contain the NUL character"
                default: nil
                }
            if let reason { throw .invalidComponent(component: component, value: value, reason: reason) }
        }
    }
}
