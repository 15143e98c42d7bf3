import Foundation
import LiveDataTestSupport
import LiveState
import LiveStatePersistence
import LiveTopics
import Logging
import Testing

/// The state file's record of cleared topics (`cleared_topics`), which a watched bridge's
/// recovery walks.
@Suite("Cleared topics in the state file")
struct ClearedTopicsTableTests {
    func path() throws -> String {
        try TestDirectory.make(prefix: "cleared").appendingPathComponent("state.db").path
    }

    /// Every topic recorded, walked a batch at a time as the recovery does.
    func walk(_ database: StateDatabase, batch: Int) throws -> [String] {
        var all: [String] = []
        var after: String?
        while true {
            let topics = try database.clearedTopics(after: after, limit: batch)
            guard let last = topics.last else { return all }
            #expect(topics.count <= batch)
            all += topics
            after = last
        }
    }

    @Test("recorded topics survive a reopen, are walked in batches each once, and a topic recorded twice is one row")
    func recordAndWalk() throws {
        let path = try path()
        let topics = (0..<2_500).map { "livedata/style/ds1/hq/B/F1/R\($0)/loc-\($0)" }
        do {
            let database = try StateDatabase(path: path)
            try database.recordCleared(Dictionary(uniqueKeysWithValues: topics.prefix(2_000).map { ($0, 1_000) }))
            try database.recordCleared(Dictionary(uniqueKeysWithValues: topics.suffix(1_000).map { ($0, 2_000) }))
        }
        let reopened = try StateDatabase(path: path)
        #expect(try reopened.countCleared() == topics.count)
        let walked = try walk(reopened, batch: 1_024)
        #expect(walked == topics.sorted())
        #expect(try walk(reopened, batch: 7) == walked)
    }

    @Test("a topic forgotten leaves the record; the horizon forgets those cleared before it, keeping a topic's later clear")
    func forget() throws {
        let database = try StateDatabase(path: try path())
        try database.recordCleared(["a": 100, "b": 200, "c": 300, "d": 400])
        try database.recordCleared(["a": 500])
        try database.recordCleared(["d": 50])
        try database.forgetCleared(["b"])
        #expect(try walk(database, batch: 10) == ["a", "c", "d"])
        #expect(try database.forgetCleared(before: 350) == 1, "c: a's later clear keeps it, d keeps its later time")
        #expect(try walk(database, batch: 10) == ["a", "d"])
        #expect(try database.forgetCleared(before: 10_000) == 2)
        #expect(try database.countCleared() == 0)
    }

    @Test("clears written with a snapshot's records are in the file with them and the journal position they go with")
    func clearsWithRecords() async throws {
        let path = try path()
        let moved = LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F2", room: "R1", location: "loc-1")
        let writer = try StoreWriter(path: path, logger: .init(label: "test"))
        let records = EncodedRecords([LocationRow(row: 1, record: LocationRecord(address: moved))])
        #expect(await writer.write(records, cleared: ["livedata/style/ds1/hq/B/F1/R1/loc-1": 7], journalPosition: 42) == nil)
        #expect(await writer.write(EncodedRecords([]), cleared: ["livedata/summary/ds1/hq/B/F1": 8]) == nil, "clears alone")
        let reopened = try StateDatabase(path: path)
        #expect(try walk(reopened, batch: 10) == ["livedata/style/ds1/hq/B/F1/R1/loc-1", "livedata/summary/ds1/hq/B/F1"])
        #expect(try reopened.journalPosition() == 42)
        #expect(try reopened.readAll().records.map(\.address) == [moved])
    }

    @Test("the writer records, walks and forgets, and reports a failure instead of throwing")
    func writer() async throws {
        let writer = try StoreWriter(path: try path(), logger: .init(label: "test"))
        #expect(await writer.recordCleared(["x": 1, "y": 2]) == nil)
        #expect(try await writer.clearedTopics(after: nil, limit: 10).get() == ["x", "y"])
        #expect(try await writer.forgetCleared(["x"], before: 0).get() == 0)
        #expect(try await writer.clearedTopics(after: nil, limit: 10).get() == ["y"])
        #expect(try await writer.forgetCleared([], before: 3).get() == 1)
        #expect(try await writer.clearedTopics(after: nil, limit: 10).get() == [])
    }
}
