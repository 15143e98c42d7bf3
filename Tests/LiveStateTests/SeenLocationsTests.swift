import Testing

@testable import LiveState

/// What a convergence saw at the broker, stamped in the locations (``SeenLocations``).
@Suite("Locations a convergence saw")
struct SeenLocationsTests {
    typealias Fixture = MovingLocationTests

    @Test("a convergence sees only what it stamped; a later one starts with nothing seen; a wrap of the numbers wipes every stamp first")
    func stamps() throws {
        let (store, state) = try Fixture.oneLocation()
        let first = SeenLocations(store: store)
        #expect(!first.contains(state))
        first.insert(state)
        #expect(first.contains(state))
        let second = SeenLocations(store: store)
        #expect(!second.contains(state), "an earlier convergence's stamp")
        second.remove(state)
        #expect(first.contains(state), "removed only where this one stamped it")
        first.remove(state)
        #expect(!first.contains(state))

        // The numbers wrap: a stamp left from long ago must not read as the new one's.
        first.insert(state)
        store.seenGeneration = .max
        let wrapped = SeenLocations(store: store)
        #expect(store.seenGeneration == 1)
        #expect(state.seenBy == 0)
        #expect(!wrapped.contains(state))
    }
}
