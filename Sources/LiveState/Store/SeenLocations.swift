/// The locations a convergence has seen at the broker (their retained style read back, or a
/// change published since the read began), kept as a stamp in each location rather than as
/// a set, which would hold an entry for nearly every location for as long as the read and
/// the walk after it (``Republication``) last, on top of the state.
///
/// Each convergence stamps with a number of its own, so that what an earlier one saw counts
/// for nothing in a later one. When the numbers wrap, every stamp is wiped first.
struct SeenLocations {
    private let generation: UInt16

    /// A new convergence's, which has seen nothing yet.
    init(store: LiveStore) {
        store.seenGeneration &+= 1
        if store.seenGeneration == 0 {
            for state in store.locations.locations { state.seenBy = 0 }
            store.seenGeneration = 1
        }
        generation = store.seenGeneration
    }

    func contains(_ state: LocationState) -> Bool { state.seenBy == generation }

    func insert(_ state: LocationState) { state.seenBy = generation }

    func remove(_ state: LocationState) {
        if state.seenBy == generation { state.seenBy = 0 }
    }
}
