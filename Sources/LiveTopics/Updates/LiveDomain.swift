/// A property of a built-in domain: its name in payloads and rules, and what its value
/// (a string, as every property's) holds.
public struct DomainProperty: Hashable, Sendable {
    public enum ValueType: Sendable {
        case integer, number, boolean
    }

    public let name: String
    public let type: ValueType

    public init(_ name: String, _ type: ValueType) {
        self.name = name
        self.type = type
    }

    public static let nrOfPeople = DomainProperty("nrOfPeople", .integer)
    public static let capacity = DomainProperty("capacity", .integer)
    public static let available = DomainProperty("available", .boolean)
    public static let latitude = DomainProperty("latitude", .number)
    public static let longitude = DomainProperty("longitude", .number)
    public static let floorIndex = DomainProperty("floorIndex", .integer)
    public static let temperature = DomainProperty("temperature", .number)
    public static let co2Level = DomainProperty("co2Level", .number)
    public static let relativeHumidity = DomainProperty("relativeHumidity", .number)
    public static let count = DomainProperty("count", .integer)
}

/// The registry of built-in domains: their names, their typed properties, and the parts
/// some of them play (whose values count people and capacity in summaries, which moves a
/// location). Any other domain name is accepted too; code that needs a domain's or a
/// property's name asks here rather than spelling it.
public enum BuiltInDomain: String, CaseIterable, Sendable {
    case occupancy, availability, position, temperature, co2, humidity, count

    /// The properties this domain's updates carry.
    public var properties: [DomainProperty] {
        switch self {
        case .occupancy: [.nrOfPeople, .capacity]
        case .availability: [.available]
        case .position: [.latitude, .longitude, .floorIndex]
        case .temperature: [.temperature]
        case .co2: [.co2Level]
        case .humidity: [.relativeHumidity]
        case .count: [.count]
        }
    }

    /// The properties' names.
    public var propertyNames: [String] { properties.map(\.name) }

    /// Whether its updates move a location by default: an update naming another venue,
    /// building, floor or room places the location there (`domains.X.moves` overrides it).
    public var movesLocations: Bool { self == .position }

    /// The domain whose fresh value places a location's marker: a derived change carries
    /// its latitude, longitude and floor index.
    public static let placement = BuiltInDomain.position

    /// The domain whose values the summaries count people and capacity from, and whose
    /// capacity falls back on the catalog's.
    public static let headcount = BuiltInDomain.occupancy
    /// In ``headcount``: how many people are in a location.
    public static let people = DomainProperty.nrOfPeople
    /// In ``headcount``: how many it holds.
    public static let capacity = DomainProperty.capacity
}

/// How many people are in a location, and how many it holds.
public struct Occupancy: Hashable, Sendable {
    public var nrOfPeople: Int?
    public var capacity: Int?

    public init(nrOfPeople: Int? = nil, capacity: Int? = nil) {
        self.nrOfPeople = nrOfPeople
        self.capacity = capacity
    }
}

/// Whether a desk or room can be booked.
public struct Availability: Hashable, Sendable {
    public var available: Bool?

    public init(available: Bool? = nil) {
        self.available = available
    }
}

/// Where an asset is.
public struct Position: Hashable, Sendable {
    public var latitude: Double?
    public var longitude: Double?
    public var floorIndex: Int?

    public init(latitude: Double? = nil, longitude: Double? = nil, floorIndex: Int? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.floorIndex = floorIndex
    }
}

/// A temperature in °C.
public struct Temperature: Hashable, Sendable {
    public var celsius: Double?

    public init(celsius: Double? = nil) {
        self.celsius = celsius
    }
}

/// A CO2 level in ppm.
public struct CO2: Hashable, Sendable {
    public var ppm: Double?

    public init(ppm: Double? = nil) {
        self.ppm = ppm
    }
}

/// Relative humidity in %.
public struct Humidity: Hashable, Sendable {
    public var percent: Double?

    public init(percent: Double? = nil) {
        self.percent = percent
    }
}

/// A counter.
public struct Count: Hashable, Sendable {
    public var count: Int?

    public init(count: Int? = nil) {
        self.count = count
    }
}

extension LiveUpdate {
    /// The built-in domain of this update, if it is one.
    public var knownDomain: BuiltInDomain? { BuiltInDomain(rawValue: topic.domain) }

    /// Typed view of an `occupancy` update.
    public var occupancy: Occupancy? {
        guard knownDomain == .occupancy else { return nil }
        return Occupancy(nrOfPeople: properties.int(.nrOfPeople), capacity: properties.int(.capacity))
    }

    /// Typed view of an `availability` update.
    public var availability: Availability? {
        guard knownDomain == .availability else { return nil }
        return Availability(available: properties.bool(.available))
    }

    /// Typed view of a `position` update.
    public var position: Position? {
        guard knownDomain == .position else { return nil }
        return Position(
            latitude: properties.double(.latitude), longitude: properties.double(.longitude),
            floorIndex: properties.int(.floorIndex))
    }

    /// Typed view of a `temperature` update.
    public var temperature: Temperature? {
        guard knownDomain == .temperature else { return nil }
        return Temperature(celsius: properties.double(.temperature))
    }

    /// Typed view of a `co2` update.
    public var co2: CO2? {
        guard knownDomain == .co2 else { return nil }
        return CO2(ppm: properties.double(.co2Level))
    }

    /// Typed view of a `humidity` update.
    public var humidity: Humidity? {
        guard knownDomain == .humidity else { return nil }
        return Humidity(percent: properties.double(.relativeHumidity))
    }

    /// Typed view of a `count` update.
    public var count: Count? {
        guard knownDomain == .count else { return nil }
        return Count(count: properties.int(.count))
    }
}

extension LiveProperties {
    /// A built-in property's value (see ``subscript(_:)-(String)``).
    public subscript(property: DomainProperty) -> String? {
        get { self[property.name] }
        set { self[property.name] = newValue }
    }

    /// A built-in property's value as a whole number, if it is one.
    public func int(_ property: DomainProperty) -> Int? { int(property.name) }

    /// A built-in property's value as a number, if it is one.
    public func double(_ property: DomainProperty) -> Double? { double(property.name) }

    /// A built-in property's value as `true` or `false`, if it is one.
    public func bool(_ property: DomainProperty) -> Bool? { bool(property.name) }
}
