import LiveTopics

/// The store's locations by id and by floor, kept up to date as locations are added, so
/// that a query (the HTTP interface's) finds them without scanning every location. Off the
/// update path: only a new location touches it.
struct ReadIndex {
    /// By id, the one location with that id; ids held by several locations (in different
    /// places or datasets) are in `sharedIDs` instead, so the common case costs no array.
    private var byID: [String: LocationState] = [:]
    private var sharedIDs: [String: [LocationState]] = [:]
    private var byFloor: [SummaryTracker.Key: [LocationState]] = [:]

    mutating func insert(_ state: LocationState) {
        let id = state.address.location
        if var shared = sharedIDs[id] {
            shared.append(state)
            sharedIDs[id] = shared
        } else if let other = byID.removeValue(forKey: id) {
            sharedIDs[id] = [other, state]
        } else {
            byID[id] = state
        }
        byFloor[state.floorSummary.key, default: []].append(state)
    }

    /// Takes a location out of its floor's list (before it moves; its id stays).
    mutating func remove(_ state: LocationState) {
        let key = state.floorSummary.key
        byFloor[key]?.removeAll { $0 === state }
        let id = state.address.location
        if byID[id] === state {
            byID[id] = nil
        } else if var shared = sharedIDs[id] {
            shared.removeAll { $0 === state }
            if shared.count == 1 {
                sharedIDs[id] = nil
                byID[id] = shared[0]
            } else {
                sharedIDs[id] = shared
            }
        }
    }

    func locations(id: String) -> [LocationState] {
        if let one = byID[id] { return [one] }
        return sharedIDs[id] ?? []
    }

    func locations(floor: SummaryTracker.Key) -> [LocationState] { byFloor[floor] ?? [] }
}
