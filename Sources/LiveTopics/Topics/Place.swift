/// A floor (`floor` set) or a whole building (`floor` nil) of a venue: what summaries are
/// kept for, what the floor view's events are scoped by, and what a partition owns.
public struct Place: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var dataset: String
    public var venue: String
    public var building: String
    public var floor: String?

    public init(dataset: String, venue: String, building: String, floor: String? = nil) {
        self.dataset = dataset
        self.venue = venue
        self.building = building
        self.floor = floor
    }

    /// The building this place is in (itself when it is one).
    public var wholeBuilding: Place { Place(dataset: dataset, venue: venue, building: building) }

    /// `dataset/venue/building[/floor]`.
    public var description: String { [dataset, venue, building, floor].compactMap { $0 }.joined(separator: "/") }

    public static func < (a: Place, b: Place) -> Bool {
        (a.dataset, a.venue, a.building, a.floor ?? "") < (b.dataset, b.venue, b.building, b.floor ?? "")
    }
}

/// The places someone asks about: each level given, or any (`nil`). A floor view's viewer
/// scopes its events by one.
public struct PlaceScope: Sendable, Equatable {
    public var dataset: String?
    public var venue: String?
    public var building: String?
    public var floor: String?

    public init(dataset: String? = nil, venue: String? = nil, building: String? = nil, floor: String? = nil) {
        self.dataset = dataset
        self.venue = venue
        self.building = building
        self.floor = floor
    }

    /// Whether a place is in this scope; a building is in the scope of any of its floors.
    public func holds(_ place: Place) -> Bool {
        (dataset == nil || dataset == place.dataset) && (venue == nil || venue == place.venue)
            && (building == nil || building == place.building) && (floor == nil || place.floor == nil || floor == place.floor)
    }
}

extension LocationAddress {
    /// The floor the location is on.
    public var place: Place { Place(dataset: dataset, venue: venue, building: building, floor: floor) }
}
