import DisplayRules
import Foundation
import LiveState
import LiveTopics
import Testing

@testable import livedata

@Suite("Simulated venue")
struct SimulatedVenueTests {
    @Test("over a simulated day assets change floors, and every building keeps its number of locations")
    func assetsMoveWithinTheirBuildings() throws {
        var venue = SimulatedVenue(dataset: "demo", venue: "hq", locations: 600)
        var expected: [String: Int] = [:]
        for location in venue.locations { expected[location.address.building, default: 0] += 1 }
        let core = LiveCore(ruleSet: RuleSet(), subscriptions: [try TopicCriteria(dataset: "demo")])
        let startOfDay = Calendar(identifier: .gregorian).startOfDay(for: Date())
        let steps = 60_000
        var moved = 0
        var checked = 0
        for step in 0..<steps {
            let date = startOfDay.addingTimeInterval(86_400 * Double(step) / Double(steps))
            let (topic, payload) = venue.nextUpdate(at: date)
            switch core.process(topic: topic, payload: Array(payload.utf8), receivedAt: .now) {
            case .changed(let change) where change.movedFrom != nil: moved += 1
            case .rejected(let reason, let message): Issue.record("step \(step): \(reason) \(message)")
            default: break
            }
            // Once every location has been seen, every hour of the day.
            if step >= steps / 4, step % (steps / 24) == 0 {
                checked += 1
                #expect(core.store.count == 600)
                for (building, count) in expected {
                    let key = Place(dataset: "demo", venue: "hq", building: building)
                    #expect(core.store.summaries.summary(key)?.locations == count, "\(building) at step \(step)")
                }
            }
        }
        #expect(checked >= 18)
        #expect(moved > 50, "assets changed floors \(moved) times")
        #expect(core.store.counters.moves == moved)
    }
}
