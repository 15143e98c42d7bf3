import LiveTopics

/// What one event-stream viewer is told: the seven-part criteria without the domain (a
/// style belongs to a location, not to one of its domains), each part left out matching any,
/// and the building given as one or several. A summaries-only scope is told the buildings'
/// summaries and nothing else: what the venue page needs for the facades in view.
public struct EventScope: Sendable, Equatable {
    public var dataset: String?
    public var venue: String?
    /// The buildings; empty: any.
    public var buildings: Set<String>
    public var floor: String?
    public var room: String?
    public var location: String?
    /// Only the summaries of whole buildings (no changes, no floor summaries).
    public var summariesOnly: Bool

    public init(
        dataset: String? = nil, venue: String? = nil, buildings: Set<String> = [], floor: String? = nil, room: String? = nil,
        location: String? = nil, summariesOnly: Bool = false
    ) {
        self.dataset = dataset
        self.venue = venue
        self.buildings = buildings
        self.floor = floor
        self.room = room
        self.location = location
        self.summariesOnly = summariesOnly
    }

    /// A floor view's scope: a place and everything in it.
    public init(_ place: PlaceScope) {
        self.init(dataset: place.dataset, venue: place.venue, buildings: place.building.map { [$0] } ?? [], floor: place.floor)
    }

    /// What an event is about.
    public enum Subject: Sendable, Equatable {
        /// A location's change, or its leaving this address.
        case location(LocationAddress)
        /// A floor's or a building's summary (or anything else known only by its place).
        case place(Place)
    }

    /// Whether a viewer of this scope is told of an event about `subject`.
    public func holds(_ subject: Subject) -> Bool {
        switch subject {
        case .location(let address):
            return !summariesOnly && holdsBuilding(address.dataset, address.venue, address.building)
                && (floor == nil || floor == address.floor) && (room == nil || room == address.room)
                && (location == nil || location == address.location)
        case .place(let place):
            if summariesOnly { return place.floor == nil && holdsBuilding(place.dataset, place.venue, place.building) }
            // A floor's viewer sees its building's summary too; a room's or a location's none.
            return room == nil && location == nil && holdsBuilding(place.dataset, place.venue, place.building)
                && (floor == nil || place.floor == nil || floor == place.floor)
        }
    }

    private func holdsBuilding(_ dataset: String, _ venue: String, _ building: String) -> Bool {
        (self.dataset == nil || self.dataset == dataset) && (self.venue == nil || self.venue == venue)
            && (buildings.isEmpty || buildings.contains(building))
    }

    /// The one floor whose every change this scope holds and nothing else's (the hub finds
    /// such viewers by the floor, without asking each); nil for any other scope.
    var oneFloor: Place? {
        guard !summariesOnly, room == nil, location == nil, let dataset, let venue, buildings.count == 1, let floor else { return nil }
        return Place(dataset: dataset, venue: venue, building: buildings.first!, floor: floor)
    }
}
