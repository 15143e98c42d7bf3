/// The built-in domains and their properties. Any other domain name is accepted too;
/// these are the ones with typed views.
public enum KnownDomain: String, CaseIterable, Sendable {
    case occupancy, availability, position, temperature, co2, humidity, count

    /// The properties this domain's updates carry.
    public var propertyNames: [String] {
        switch self {
        case .occupancy: ["nrOfPeople", "capacity"]
        case .availability: ["available"]
        case .position: ["latitude", "longitude", "floorIndex"]
        case .temperature: ["temperature"]
        case .co2: ["co2Level"]
        case .humidity: ["relativeHumidity"]
        case .count: ["count"]
        }
    }
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
    public var knownDomain: KnownDomain? { KnownDomain(rawValue: topic.domain) }

    /// Typed view of an `occupancy` update.
    public var occupancy: Occupancy? {
        guard knownDomain == .occupancy else { return nil }
        return Occupancy(nrOfPeople: properties.int("nrOfPeople"), capacity: properties.int("capacity"))
    }

    /// Typed view of an `availability` update.
    public var availability: Availability? {
        guard knownDomain == .availability else { return nil }
        return Availability(available: properties.bool("available"))
    }

    /// Typed view of a `position` update.
    public var position: Position? {
        guard knownDomain == .position else { return nil }
        return Position(
            latitude: properties.double("latitude"), longitude: properties.double("longitude"),
            floorIndex: properties.int("floorIndex"))
    }

    /// Typed view of a `temperature` update.
    public var temperature: Temperature? {
        guard knownDomain == .temperature else { return nil }
        return Temperature(celsius: properties.double("temperature"))
    }

    /// Typed view of a `co2` update.
    public var co2: CO2? {
        guard knownDomain == .co2 else { return nil }
        return CO2(ppm: properties.double("co2Level"))
    }

    /// Typed view of a `humidity` update.
    public var humidity: Humidity? {
        guard knownDomain == .humidity else { return nil }
        return Humidity(percent: properties.double("relativeHumidity"))
    }

    /// Typed view of a `count` update.
    public var count: Count? {
        guard knownDomain == .count else { return nil }
        return Count(count: properties.int("count"))
    }
}
