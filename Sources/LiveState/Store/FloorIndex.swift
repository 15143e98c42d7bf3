/// The store's locations by floor, kept up to date as locations are added and move, so
/// that a floor's query (the HTTP interface's floor view) finds them without scanning every
/// location. Off the update path: only a new location or a move touches it. (By identity,
/// the location table finds them: see ``LocationTable/find(dataset:id:)``.)
struct FloorIndex {
    /// By floor aggregate (one per floor, see ``SummaryTracker``), the floor's locations.
    private var byFloor: [ObjectIdentifier: [LocationState]] = [:]

    mutating func insert(_ state: LocationState) {
        byFloor[ObjectIdentifier(state.floorSummary), default: []].append(state)
    }

    /// Takes a location out (before it moves; it is inserted again at its new place).
    mutating func remove(_ state: LocationState) {
        byFloor[ObjectIdentifier(state.floorSummary)]?.removeAll { $0 === state }
    }

    /// The locations of the floor whose summary aggregate this is.
    func locations(floor: SummaryTracker.Aggregate) -> [LocationState] { byFloor[ObjectIdentifier(floor)] ?? [] }
}
