import DisplayRules
import Foundation
import LiveTopics
import Testing

@testable import LiveState

/// New locations' first styles waiting as their locations (``FirstStyles``), the output's
/// line for a burst of new locations.
@Suite("First styles waiting as locations")
struct FirstStylesTests {
    typealias Fixture = MovingLocationTests

    /// Whether the first style of the location now at `address` waits.
    static func waits(_ store: LiveStore, _ address: LocationAddress) -> Bool {
        store.locations.find(at: address)?.firstStyleWaits ?? false
    }

    @Test("a first style kept waits as its location; later changes are not needed; it leaves as the style the location has then, at its place then, every field changed, under its version")
    func keepAndTake() throws {
        let store = try Fixture.store()
        var waiting = FirstStyles(store: store)
        let first = try #require(Fixture.change(store.apply(try Fixture.occupancy(floor: "F1", people: 2, at: 0), now: Fixture.at(0))))
        #expect(first.isFirst)
        var kept = waiting.takes(first, lineIsLong: true)
        #expect(kept)
        kept = waiting.takes(first, lineIsLong: true)
        #expect(kept, "kept twice, it waits once")
        #expect(waiting.count == 1)
        #expect(Self.waits(store, Fixture.f1))
        // It moves and changes while it waits: its later changes are not needed.
        let moved = try #require(Fixture.change(store.apply(try Fixture.position(floor: "F2", room: "R9", index: 2, at: 1), now: Fixture.at(1))))
        #expect(moved.movedFrom == Fixture.f1)
        #expect(Self.waits(store, Fixture.f2), "found at its new place")
        #expect(!Self.waits(store, Fixture.f1))
        var stray = first
        stray.address = LocationAddress(dataset: "ds1", venue: "v", building: "B", floor: "F1", room: "R1", location: "elsewhere")
        kept = waiting.takes(stray, lineIsLong: true)
        #expect(!kept, "no such location")
        #expect(!Self.waits(store, stray.address))

        let next = waiting.next(now: Fixture.at(5))
        let leaving = try #require(next)
        #expect(leaving.address == Fixture.f2)
        #expect(leaving.isFirst)
        #expect(leaving.version == moved.version, "the version the location has, not below what it made meanwhile")
        let json = try Fixture.json(leaving)
        #expect(json["changed"] as? [String] == ["visible", "icon", "polygonFillColor"])
        #expect(waiting.isEmpty)
        #expect(!Self.waits(store, Fixture.f2), "no longer waiting")
        let none = waiting.next(now: Fixture.at(6))
        #expect(none == nil)
        // Waiting no more, it is kept again as a new one would be.
        kept = waiting.takes(leaving, lineIsLong: true)
        #expect(kept)
        #expect(waiting.count == 1)
    }

    @Test("the output's one question: a change needs no place in line when its location's first style waits, or when it is a first style and the line is long")
    func takes() throws {
        let store = try Fixture.store()
        var waiting = FirstStyles(store: store)
        let first = try #require(Fixture.change(store.apply(try Fixture.occupancy(floor: "F1", people: 2, at: 0), now: Fixture.at(0))))
        var taken = waiting.takes(first, lineIsLong: false)
        #expect(!taken, "a short line takes a first style")
        taken = waiting.takes(first, lineIsLong: true)
        #expect(taken && waiting.count == 1)
        let later = try #require(Fixture.change(store.apply(try Fixture.occupancy(floor: "F1", people: 0, at: 1), now: Fixture.at(1))))
        #expect(!later.isFirst)
        taken = waiting.takes(later, lineIsLong: false)
        #expect(taken, "its first style waits: the later change is not needed")
        #expect(waiting.count == 1)
        _ = waiting.next(now: Fixture.at(2))
        let third = try #require(Fixture.change(store.apply(try Fixture.occupancy(floor: "F1", people: 5, at: 3), now: Fixture.at(3))))
        taken = waiting.takes(third, lineIsLong: true)
        #expect(!taken, "not a first style, and none waits: it goes in line")
    }

    @Test("many wait and leave in the order they came; forgetting them all leaves none marked")
    func orderAndForget() throws {
        let store = try Fixture.store()
        var waiting = FirstStyles(store: store)
        var addresses: [LocationAddress] = []
        for index in 0..<10_000 {
            let update = LiveUpdate(
                topic: try LiveTopic(parsing: "ds1/v/B/F1/R\(index % 50)/desk-\(index)/occupancy"), timestamp: Fixture.at(Int64(index)),
                properties: ["nrOfPeople": "\(index % 3)"])
            let change = try #require(Fixture.change(store.apply(update, now: Fixture.at(Int64(index)))))
            let kept = waiting.takes(change, lineIsLong: true)
            #expect(kept)
            addresses.append(change.address)
        }
        var taken: [LocationAddress] = []
        for _ in 0..<6_000 {
            let next = waiting.next(now: Fixture.at(20_000))
            taken.append(try #require(next).address)
        }
        #expect(taken == Array(addresses.prefix(6_000)))
        #expect(waiting.count == 4_000)
        waiting.removeAll()
        #expect(waiting.isEmpty)
        #expect(!addresses.contains { Self.waits(store, $0) })
    }
}
