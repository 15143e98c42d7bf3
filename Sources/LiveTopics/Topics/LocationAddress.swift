#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// Passes `dataset/venue/building/floor/room/location` as bytes to `body`, without
    /// building a string (addresses are keyed by these bytes, as topics arrive with them).
    public func withPathBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let count =
            dataset.utf8.count + venue.utf8.count + building.utf8.count + floor.utf8.count + room.utf8.count
            + location.utf8.count + 5
        return withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { buffer in
            var offset = 0
            Self.append(dataset, to: buffer, at: &offset)
            Self.append(venue, to: buffer, at: &offset)
            Self.append(building, to: buffer, at: &offset)
            Self.append(floor, to: buffer, at: &offset)
            Self.append(room, to: buffer, at: &offset)
            Self.append(location, to: buffer, at: &offset, last: true)
            return body(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Whether `path` is this address's `dataset/venue/building/floor/room/location`,
    /// byte for byte (as MQTT compares topics).
    public func hasPath(_ path: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        return Self.match(dataset, path, at: &offset) && Self.match(venue, path, at: &offset)
            && Self.match(building, path, at: &offset) && Self.match(floor, path, at: &offset)
            && Self.match(room, path, at: &offset) && Self.match(location, path, at: &offset, last: true)
    }

    // Static with the offset passed in, rather than nested functions capturing it: a
    // captured variable is boxed and every use of it checked for exclusive access.
    private static func append(
        _ component: String, to buffer: UnsafeMutableRawBufferPointer, at offset: inout Int, last: Bool = false
    ) {
        for byte in component.utf8 {
            buffer[offset] = byte
            offset += 1
        }
        if !last {
            buffer[offset] = UInt8(ascii: "/")
            offset += 1
        }
    }

    private static func match(_ component: String, _ path: UnsafeRawBufferPointer, at offset: inout Int, last: Bool = false) -> Bool {
        let count = component.utf8.count
        let start = offset
        guard start + count + (last ? 0 : 1) <= path.count else { return false }
        let equal = component.utf8.withContiguousStorageIfAvailable { bytes in
            count == 0 || memcmp(bytes.baseAddress!, path.baseAddress! + start, count) == 0
        } ?? component.utf8.elementsEqual(path[start..<start + count])
        guard equal else { return false }
        offset = start + count
        if last { return offset == path.count }
        guard path[offset] == UInt8(ascii: "/") else { return false }
        offset += 1
        return true
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
            for (component, value) in values where !Self.component(component, of: address, domain: domain, is: value) {
                return false
            }
            return true
        }
    }

    /// Whether `component` of a location's topic for `domain` has the value `value`: the
    /// one comparison behind ``matches(_:domain:)`` for criteria given as components.
    public static func component(
        _ component: LiveTopic.Component, of address: LocationAddress, domain: String, is value: String
    ) -> Bool {
        (component == .domain ? domain : address[component]!) == value
    }
}
