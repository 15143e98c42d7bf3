import DisplayRules
import LiveTopics
import Testing

@testable import LiveState

@Suite("Pending output")
struct PendingOutputTests {
    let store: LiveStore
    let now = LiveStoreTests.start

    init() throws {
        store = LiveStore(ruleEngine: try LiveStoreTests.engine(staleAfter: nil))
    }

    /// Applies an occupancy update and returns the change it made.
    func change(_ location: String, people: Int, at offset: Int64 = 0) throws -> DerivedChange {
        let outcome = store.apply(
            LiveUpdate(
                topic: try LiveTopic(parsing: "ds1/hq/B/F3/R7/\(location)/occupancy"),
                timestamp: LiveTimestamp(millisecondsSince1970: now.millisecondsSince1970 + offset),
                properties: ["nrOfPeople": "\(people)", "capacity": "8"]),
            now: now)
        guard case .changed(let change) = outcome else { throw Failure.unchanged(location) }
        return change
    }

    enum Failure: Error { case unchanged(String) }

    func summary(_ floor: String) -> Publication {
        Publication(topic: "livedata/summary/ds1/hq/B/\(floor)", payload: Array(floor.utf8), retain: true)
    }

    @Test("one entry per location and per topic, the newest; in the order each first waited; a newer change keeps the older one's before")
    func latestWins() throws {
        var pending = PendingOutput()
        let early = MonotonicInstant.now
        pending.put(try change("a", people: 1), since: early)
        pending.put(summary("F3"))
        pending.put(try change("b", people: 1))
        pending.put(try change("a", people: 0, at: 1), since: early + .seconds(1))
        pending.put(summary("F3"))
        #expect(pending.count == 3)
        #expect(pending.puts == 5)
        #expect(pending.coalesced == 2)

        let taken = pending.take()
        let first = try #require(taken)
        #expect(first.key == .style(LocationAddress(path: "ds1/hq/B/F3/R7/a")!))
        guard case .change(let newest) = first.entry.item else { Issue.record("not a change"); return }
        // The newest style, its fields counted from the style first waiting (none sent yet:
        // every field set); the lag from the oldest update behind it.
        #expect(newest.style[color: .polygonFillColor] == Color("#4CAF50"))
        #expect(newest.movedFrom == nil)
        #expect(newest.changedFields == newest.style.changedFieldSet(from: Style()))
        #expect(first.entry.since == early)
        #expect(pending.take()?.key == .topic("livedata/summary/ds1/hq/B/F3"))
        #expect(pending.take()?.key == .style(LocationAddress(path: "ds1/hq/B/F3/R7/b")!))
        #expect(pending.take() == nil)
        #expect(pending.isEmpty)
    }

    @Test("a publication at a location's style topic (a clearing, a change that waited for its interval) and the location's changes replace one another: whichever came last leaves, in the place of the first")
    func styleTopicsShareTheLocationsKey() throws {
        let topics = OutputFormat(prefix: "livedata")
        var pending = PendingOutput()
        let change = try change("a", people: 1)
        pending.put(change)
        pending.put(summary("F3"))
        let clearing = topics.clearing(styleOf: change.address)
        #expect(topics.pendingKey(of: clearing) == .style(change.address))
        #expect(topics.pendingKey(of: summary("F3")) == .topic("livedata/summary/ds1/hq/B/F3"))
        pending.put(clearing, under: topics.pendingKey(of: clearing))
        #expect(pending.count == 2)
        let first = pending.take()
        guard case .publication(let left) = try #require(first).entry.item else { Issue.record("not the clearing"); return }
        #expect(left == clearing)
        pending.put(try self.change("a", people: 2, at: 1))
        #expect(pending.take()?.key == .topic("livedata/summary/ds1/hq/B/F3"))
        #expect(pending.take()?.key == .style(change.address))
    }

    @Test("an entry put back is first in line again, unless a newer one of its key came meanwhile")
    func putBack() throws {
        var pending = PendingOutput()
        pending.put(try change("a", people: 1))
        pending.put(try change("b", people: 1))
        let takenFirst = pending.take()
        let taken = try #require(takenFirst)
        pending.putBack(taken.key, taken.entry)
        #expect(pending.take()?.key == taken.key)

        let takenAgain = pending.take()
        let again = try #require(takenAgain)
        #expect(again.key == .style(LocationAddress(path: "ds1/hq/B/F3/R7/b")!))
        pending.put(try change("b", people: 2, at: 1))
        pending.putBack(again.key, again.entry)
        let takenLast = pending.take()
        guard case .change(let kept) = try #require(takenLast).entry.item else { Issue.record("not a change"); return }
        #expect(kept.style[text: .label] == "2/8", "the newer change stays; the one put back is dropped")
        #expect(pending.take() == nil)
    }

    @Test("a long line keeps its storage within twice what waits as entries leave")
    func longLine() throws {
        var pending = PendingOutput()
        for number in 0..<10_000 { pending.put(try change("loc-\(number)", people: 1)) }
        for _ in 0..<9_000 { _ = pending.take() }
        #expect(pending.count == 1_000)
        for number in 9_000..<10_000 {
            #expect(pending.take()?.key == .style(LocationAddress(path: "ds1/hq/B/F3/R7/loc-\(number)")!))
        }
        #expect(pending.isEmpty)
    }
}
