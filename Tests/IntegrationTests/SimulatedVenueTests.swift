import DisplayRules
import Foundation
import LiveDataConfiguration
import LiveState
import LiveTopics
import Testing

@testable import livedata

@Suite("Simulated venue")
struct SimulatedVenueTests {
    @Test("over a simulated day assets change floors and buildings, and the venue keeps its number of locations")
    func assetsMove() throws {
        var venue = SimulatedVenue(dataset: "demo", venue: "hq", locations: 600, floors: 3)
        #expect(venue.buildingCount == 10)
        let core = LiveCore(ruleSet: RuleSet(), subscriptions: [try TopicCriteria(dataset: "demo")])
        let startOfDay = Calendar(identifier: .gregorian).startOfDay(for: Date())
        let steps = 60_000
        var movedFloor = 0
        var movedBuilding = 0
        var checked = 0
        for step in 0..<steps {
            let date = startOfDay.addingTimeInterval(86_400 * Double(step) / Double(steps))
            let (topic, payload) = venue.nextUpdate(at: date)
            switch core.process(topic: topic, payload: Array(payload.utf8), receivedAt: .now) {
            case .changed(let change):
                if let from = change.movedFrom {
                    if from.building == change.address.building { movedFloor += 1 } else { movedBuilding += 1 }
                }
            case .rejected(let reason, let message): Issue.record("step \(step): \(reason) \(message)")
            default: break
            }
            // Once every location has been seen, every hour of the day.
            if step >= steps / 4, step % (steps / 24) == 0 {
                checked += 1
                #expect(core.store.count == 600)
                let buildings = (1...10).compactMap { core.store.summaries.summary(Place(dataset: "demo", venue: "hq", building: "B\($0)"))?.locations }
                #expect(buildings.reduce(0, +) == 600)
            }
        }
        #expect(checked >= 18)
        #expect(movedFloor > 50, "assets changed floors \(movedFloor) times")
        #expect(movedBuilding > 10, "assets changed buildings \(movedBuilding) times")
        #expect(core.store.counters.moves == movedFloor + movedBuilding)
    }

    @Test("an asset that crosses to the next building lands on the floor at the elevation it left, at a position inside that building")
    func crossingKeepsTheElevation() throws {
        var venue = SimulatedVenue(dataset: "demo", venue: "hq", locations: 120, floors: 3)
        let geometry = venue.geometry()
        let outlines = Dictionary(uniqueKeysWithValues: geometry.buildings.map { ($0.place.building, $0) })
        func elevation(_ building: String, _ floor: String) -> Double? {
            outlines[building]?.floors.first { $0.floor == floor }?.elevation ?? nil
        }
        // Every other building stands a storey lower: B1's F2 is B2's F3.
        #expect(elevation("B1", "F2") == 4 && elevation("B2", "F3") == 4 && elevation("B2", "F2") == 0)
        var places: [String: LocationAddress] = [:]
        for location in venue.locations where location.address.location.hasPrefix("asset-") { places[location.address.location] = location.address }
        var crossings = 0
        for _ in 0..<40_000 {
            let (topic, payload) = venue.nextUpdate(at: Date())
            guard let update = try? LiveTopic(parsing: topic), update.location.hasPrefix("asset-") else { continue }
            let before = try #require(places[update.location])
            let json = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
            let properties = try #require(json["properties"] as? [String: String])
            let longitude = try #require(Double(properties["longitude"] ?? "")), latitude = try #require(Double(properties["latitude"] ?? ""))
            let footprint = try #require(outlines[update.building]?.footprint.first)
            let xs = footprint.map { $0[0] }, ys = footprint.map { $0[1] }
            #expect((xs.min()!...xs.max()!).contains(longitude) && (ys.min()!...ys.max()!).contains(latitude), "\(update.location) outside \(update.building)")
            if before.building != update.building {
                crossings += 1
                let left = try #require(elevation(before.building, before.floor))
                let reached = try #require(elevation(update.building, update.floor))
                // Clamped to the building's floors when it has none at that elevation.
                #expect(reached == left || update.floor == "F1" || update.floor == "F3", "\(before) -> \(topic)")
            }
            places[update.location] = LocationAddress(
                dataset: update.dataset, venue: update.venue, building: update.building, floor: update.floor, room: update.room,
                location: update.location)
        }
        #expect(crossings > 5)
    }
}
