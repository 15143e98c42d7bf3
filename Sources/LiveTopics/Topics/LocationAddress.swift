/// Where a location is: the first six components of its live topics
/// (`dataset/venue/building/floor/room/location`).
///
/// Kept as that one path string: copying an address (every derived change carries one)
/// costs one reference, comparing it with a topic's bytes is one `memcmp`, and the
/// components are read out of it when asked for.
public struct LocationAddress: Hashable, Sendable, CustomStringConvertible {
    /// `dataset/venue/building/floor/room/location`.
    public let path: String

    public init(dataset: String, venue: String, building: String, floor: String, room: String, location: String) {
        path = "\(dataset)/\(venue)/\(building)/\(floor)/\(room)/\(location)"
    }

    /// The address of a topic's location.
    public init(_ topic: LiveTopic) {
        self.init(
            dataset: topic.dataset, venue: topic.venue, building: topic.building, floor: topic.floor, room: topic.room,
            location: topic.location)
    }

    /// The address of a valid seven-level topic whose bytes are `topic` and whose last `/`
    /// is at byte `slash`: the bytes before it are the path ``init(_:)`` would join from the
    /// topic's components, taken in one copy.
    package init(topicBytes topic: UnsafeRawBufferPointer, lastSlash slash: Int) {
        path = String(decoding: UnsafeRawBufferPointer(rebasing: topic[..<slash]), as: UTF8.self)
    }

    /// The address with this path, which the caller made of six components, none empty and
    /// none with a `/` (a stored record's): nothing to check again.
    package init(joinedPath path: String) {
        self.path = path
    }

    /// The address with this path, if it has six components (five `/`). The components
    /// are not checked further: use it for paths that were valid topics' (stored ones).
    public init?(path: String) {
        var path = path
        guard path.withUTF8({ Self.isPath(UnsafeRawBufferPointer($0)) }) else { return nil }
        path.makeContiguousUTF8()
        self.path = path
    }

    /// Whether bytes have the shape ``init(path:)`` takes: six components (five `/`).
    public static func isPath(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var slashes = 0
        for byte in bytes where byte == UInt8(ascii: "/") { slashes += 1 }
        return slashes == 5
    }

    public var dataset: String { component(0) }
    public var venue: String { component(1) }
    public var building: String { component(2) }
    public var floor: String { component(3) }
    public var room: String { component(4) }
    public var location: String { component(5) }

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
        component.position.map { self.component($0) }
    }

    /// Whether `component` is `value`, byte for byte, read in place (`false` for `.domain`).
    public func has(_ component: LiveTopic.Component, _ value: String) -> Bool {
        guard let position = component.position else { return false }
        // Asked for every change (is this the dataset of the last one?): both read in place
        // and compared a word at a time, without a call to compare them.
        var value = value
        return value.withUTF8 { value in
            withPathBytes { path in
                let range = Self.range(of: position, in: path)
                guard range.count == value.count, let base = path.baseAddress else { return range.count == value.count }
                return bytesEqual(base + range.lowerBound, UnsafeRawPointer(value.baseAddress), value.count)
            }
        }
    }

    /// Passes `dataset/venue/building/floor/room/location` as bytes to `body`, without
    /// copying them (addresses are keyed by these bytes, as topics arrive with them).
    @inlinable
    public func withPathBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        if let result = path.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
        var path = path
        return path.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    /// Whether `path` is this address's `dataset/venue/building/floor/room/location`,
    /// byte for byte (as MQTT compares topics).
    public func hasPath(_ other: UnsafeRawBufferPointer) -> Bool {
        path.isSameIdentifier(asBytes: other)
    }

    /// A path's identity: its dataset and its location id (the first and last components).
    /// A location is its identity; the components between are its placement, which a
    /// moving location changes.
    public static func identity(ofPath path: UnsafeRawBufferPointer) -> (dataset: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer) {
        var first = 0
        while first < path.count, path[first] != UInt8(ascii: "/") { first += 1 }
        var last = path.count - 1
        while last > first, path[last] != UInt8(ascii: "/") { last -= 1 }
        let idStart = min(last + 1, path.count)
        return (UnsafeRawBufferPointer(rebasing: path[..<first]), UnsafeRawBufferPointer(rebasing: path[idStart...]))
    }

    /// Whether `other` (a path's bytes) names the same location: the same dataset and id,
    /// byte for byte, wherever it is placed.
    public func hasIdentity(ofPath other: UnsafeRawBufferPointer) -> Bool {
        withPathBytes { mine in
            let (dataset, id) = Self.identity(ofPath: mine)
            let (otherDataset, otherID) = Self.identity(ofPath: other)
            return dataset.elementsEqual(otherDataset) && id.elementsEqual(otherID)
        }
    }

    /// Whether another address names the same location (see ``hasIdentity(ofPath:)``).
    public func hasIdentity(of other: LocationAddress) -> Bool {
        other.withPathBytes { hasIdentity(ofPath: $0) }
    }

    /// The byte range of component `position` (0 for the dataset … 5 for the location) in a
    /// path's bytes. Inlinable: a restore asks it for every location.
    @inlinable
    public static func range(of position: Int, in path: UnsafeRawBufferPointer) -> Range<Int> {
        var start = 0
        var seen = 0
        var index = 0
        while index < path.count {
            if path[index] == UInt8(ascii: "/") {
                if seen == position { return start..<index }
                seen += 1
                start = index + 1
            }
            index += 1
        }
        return start..<path.count
    }

    private func component(_ position: Int) -> String {
        withPathBytes { path in
            let range = Self.range(of: position, in: path)
            return String(decoding: UnsafeRawBufferPointer(rebasing: path[range]), as: UTF8.self)
        }
    }

    /// `dataset/venue/building/floor/room/location`.
    public var description: String { path }

    /// The components as a JSON object, in topic order.
    public var json: String {
        var stream = JSONStream(capacity: 128)
        write(to: &stream)
        return stream.text
    }

    /// Writes the components as a JSON object, in topic order, from the path's bytes.
    public func write(to stream: inout JSONStream) {
        withPathBytes { path in
            stream.object(parts: path, separatedBy: UInt8(ascii: "/"), name: Self.componentName)
        }
    }

    /// ``write(to:)`` as a piece of a run (``JSONStream/write(maximum:_:)``), which takes at
    /// most ``jsonMaximum`` bytes.
    public func write(to json: inout JSONStream.Cursor) {
        withPathBytes { path in
            json.object(parts: path, separatedBy: UInt8(ascii: "/"), name: Self.componentName)
        }
    }

    /// The most bytes the components take as a piece of a run: an object of six parts named
    /// in at most 8 bytes (``JSONStream/Cursor/object(parts:separatedBy:name:)``).
    public var jsonMaximum: Int { 4 + 6 * (8 + 8) + 6 * path.utf8.count }

    /// The name of component `position`: literals, which a key reads without a reference
    /// count or a look-up of a global array.
    private static func componentName(_ position: Int) -> StaticString {
        switch position {
        case 0: "dataset"
        case 1: "venue"
        case 2: "building"
        case 3: "floor"
        case 4: "room"
        default: "location"
        }
    }
}

extension LiveTopic.Component {
    /// Its position among a location's components (`nil` for the domain, not one of them).
    var position: Int? {
        switch self {
        case .dataset: 0
        case .venue: 1
        case .building: 2
        case .floor: 3
        case .room: 4
        case .location: 5
        case .domain: nil
        }
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

    /// Whether `component` of a location's topic for `domain` has the value `value`, byte
    /// for byte as MQTT compares topics: the one comparison behind ``matches(_:domain:)``
    /// for criteria given as components.
    public static func component(
        _ component: LiveTopic.Component, of address: LocationAddress, domain: String, is value: String
    ) -> Bool {
        component == .domain ? domain.utf8.elementsEqual(value.utf8) : address.has(component, value)
    }
}
