import DisplayRules
import LiveTopics
import Testing

@testable import LiveState

/// What a snapshot takes to write: the locations changed since the last one, listed, or
/// every location when so many changed at once that a list would cost a reference each.
@Suite("A snapshot's changed locations")
struct ChangedLocationsTests {
    static func update(_ index: Int, people: Int, at offset: Int64) throws -> LiveUpdate {
        LiveUpdate(
            topic: try LiveTopic(parsing: "ds1/v/B/F\(index % 10)/R\(index % 50)/loc-\(index)/occupancy"),
            timestamp: MovingLocationTests.at(offset), properties: ["nrOfPeople": "\(people)"])
    }

    /// A store of `count` locations whose first snapshot was taken.
    static func store(_ count: Int) throws -> LiveStore {
        let store = try MovingLocationTests.store()
        for index in 0..<count { _ = store.apply(try update(index, people: 1, at: 0), now: MovingLocationTests.at(0)) }
        _ = store.takeChangedLocations()
        return store
    }

    @Test("a few changes are listed, each once, in the order of their rows")
    func fewAreListed() throws {
        let store = try Self.store(100)
        for index in [70, 3, 70, 41] { _ = store.apply(try Self.update(index, people: 2, at: 1), now: MovingLocationTests.at(1)) }
        #expect(store.dirty.count == 3)
        #expect(!store.allDirty)
        let changed = store.takeChangedLocations()
        #expect(store.records(changed, in: 0..<changed.count).map(\.record.address.location) == ["loc-3", "loc-41", "loc-70"])
        #expect(store.dirty.isEmpty)
        #expect(store.takeChangedLocations().count == 0)
    }

    @Test(
        "once a quarter of the locations (and at least 65,536) changed, the list is let go and the next snapshot takes every location; what changes after it is listed again"
    )
    func manyTakeTheWholeTable() throws {
        let count = LiveStore.wholeTableDirty(of: 0) + 4_000
        let store = try Self.store(count)
        let threshold = LiveStore.wholeTableDirty(of: count)
        for index in 0..<threshold - 1 { _ = store.apply(try Self.update(index, people: 2, at: 1), now: MovingLocationTests.at(1)) }
        #expect(store.dirty.count == threshold - 1)
        #expect(!store.allDirty)
        _ = store.apply(try Self.update(threshold - 1, people: 2, at: 1), now: MovingLocationTests.at(1))
        #expect(store.allDirty)
        #expect(store.dirty.isEmpty)
        #expect(store.locations.locations.allSatisfy { !$0.dirty })
        // More changes while every location is to be written list nothing.
        _ = store.apply(try Self.update(count - 1, people: 3, at: 2), now: MovingLocationTests.at(2))
        #expect(store.dirty.isEmpty)

        let changed = store.takeChangedLocations()
        #expect(changed.count == count)
        #expect(!store.allDirty)
        let records = store.records(changed, in: 0..<count)
        #expect(Set(records.map(\.row)).count == count)
        #expect(records.last?.record.values.first?.properties["nrOfPeople"] == "3")
        // A location that changes while the snapshot is written is taken again by the next.
        _ = store.apply(try Self.update(5, people: 4, at: 3), now: MovingLocationTests.at(3))
        let next = store.takeChangedLocations()
        #expect(store.records(next, in: 0..<next.count).map(\.record.address.location) == ["loc-5"])
    }

    @Test("a part whose write failed is marked again from either form")
    func failedPartIsMarkedAgain() throws {
        let count = LiveStore.wholeTableDirty(of: 0) + 10
        let store = try Self.store(count)
        store.markAllDirty()
        let changed = store.takeChangedLocations()
        store.markDirty(changed, in: 10..<20)
        let again = store.takeChangedLocations()
        #expect(store.records(again, in: 0..<again.count).map(\.row) == Array(11...20).map(Int64.init))
    }

    @Test("a clock step that moves every value lists none of them: the next snapshot takes every location")
    func clockStepListsNothing() throws {
        let count = LiveStore.wholeTableDirty(of: 0) + 1
        let store = try MovingLocationTests.store()
        for index in 0..<count {
            _ = store.apply(try Self.update(index, people: 1, at: 0), now: MovingLocationTests.at(0), stampedOnReceipt: true)
        }
        _ = store.takeChangedLocations()
        #expect(store.clockStepped(by: 3_600_000) == count)
        #expect(store.allDirty)
        #expect(store.dirty.isEmpty)
        #expect(store.takeChangedLocations().count == count)
    }
}
