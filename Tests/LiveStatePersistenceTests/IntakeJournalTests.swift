import Foundation
import LiveDataTestSupport
import LiveTopics
import Testing

@testable import LiveStatePersistence

@Suite("Intake journal")
struct IntakeJournalTests {
    let folder: String

    init() {
        folder = NSTemporaryDirectory() + "journal-\(UInt64.random(in: 0...UInt64.max))"
    }

    @discardableResult
    func append(_ journal: IntakeJournal, _ topic: String, _ payload: String, at time: Int64 = 1_000, retain: Bool = false)
        throws -> UInt64
    {
        var topic = topic
        var payload = payload
        return try topic.withUTF8 { topicBytes in
            try payload.withUTF8 { payloadBytes in
                try journal.append(
                    topic: UnsafeRawBufferPointer(topicBytes), payload: UnsafeRawBufferPointer(payloadBytes),
                    receivedAt: LiveTimestamp(millisecondsSince1970: time), retain: retain)
            }
        }
    }

    func replayAll(_ journal: IntakeJournal, from position: UInt64 = 0) throws -> ([IntakeJournal.Record], IntakeJournal.ReplayStatistics) {
        var records: [IntakeJournal.Record] = []
        let statistics = try journal.replay(from: position) { records.append($0) }
        return (records, statistics)
    }

    func segmentFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".journal") }.sorted()
    }

    @Test("CRC-32C gives the standard check value")
    func checkValue() {
        let bytes = Array("123456789".utf8)
        #expect(bytes.withUnsafeBytes { CRC32C.checksum($0) } == 0xE306_9283)
        let long = Array(repeating: UInt8(0x5A), count: 1000)
        let whole = long.withUnsafeBytes { CRC32C.checksum($0) }
        let split = long.withUnsafeBytes { bytes in
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[3...]), continuing: CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<3])))
        }
        #expect(whole == split)
        #expect(bytes.withUnsafeBytes { CRC32C.tableChecksum($0) } == 0xE306_9283)
    }

    @Test("the processor's CRC-32C and the tables' agree, at every length and alignment and continued")
    func hardwareAgreesWithTables() {
        // On an x86-64 machine without SSE 4.2 (none this daemon runs on) only the tables run.
        #if arch(x86_64)
            #expect(CRC32C.inHardware, "SSE 4.2 is expected on x86-64")
        #endif
        var generator = SplitMix64.seeded(for: "the checksummed bytes")
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes.withUnsafeBytes { bytes in
            for start in 0..<9 {
                for end in stride(from: start, through: bytes.count, by: 7) {
                    let part = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
                    #expect(CRC32C.checksum(part) == CRC32C.tableChecksum(part), "bytes \(start)..<\(end)")
                    #expect(CRC32C.checksum(part, continuing: 0x1234_5678) == CRC32C.tableChecksum(part, continuing: 0x1234_5678))
                }
            }
        }
    }

    @Test("records come back in order with their time, flags and positions")
    func roundTrip() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try IntakeJournal(directory: folder, syncInterval: nil)
        let first = try append(journal, "ds/v/b/f/r/l1/occupancy", #"{"nrOfPeople":1}"#, at: 10)
        let second = try append(journal, "ds/v/b/f/r/l2/occupancy", "", at: 20, retain: true)
        #expect(first > 0 && second > first)
        let (records, statistics) = try replayAll(journal)
        #expect(records.map(\.topic) == ["ds/v/b/f/r/l1/occupancy", "ds/v/b/f/r/l2/occupancy"])
        #expect(records.map(\.payload) == [Array(#"{"nrOfPeople":1}"#.utf8), []])
        #expect(records.map(\.receivedAt.millisecondsSince1970) == [10, 20])
        #expect(records.map(\.retain) == [false, true])
        #expect(records.map(\.end) == [first, second])
        #expect(statistics == .init(records: 2, corrupt: 0, tornBytes: 0))
        // From a position: only what follows it.
        #expect(try replayAll(journal, from: first).0.map(\.end) == [second])
        #expect(journal.statistics.end == second)
        journal.close()
        // Reopened, appending goes on after the last record.
        let reopened = try IntakeJournal(directory: folder, syncInterval: nil)
        #expect(try append(reopened, "a/b/c/d/e/f/g", "x") > second)
        #expect(try replayAll(reopened).0.count == 3)
    }

    @Test("a record cut short by a crash is dropped, and appending resumes where it began")
    func tornTail() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try IntakeJournal(directory: folder, syncInterval: nil)
        let kept = try append(journal, "ds/v/b/f/r/l1/occupancy", #"{"nrOfPeople":1}"#)
        let lost = try append(journal, "ds/v/b/f/r/l2/occupancy", #"{"nrOfPeople":2}"#)
        journal.close()
        let file = "\(folder)/\(try segmentFiles()[0])"
        #expect(truncate(file, off_t(lost - 5)) == 0)
        let reopened = try IntakeJournal(directory: folder, syncInterval: nil)
        #expect(reopened.statistics.end == kept)
        let (records, statistics) = try replayAll(reopened)
        #expect(records.map(\.end) == [kept])
        #expect(statistics.corrupt == 0)
        #expect(statistics.tornBytes == Int(lost - 5 - kept))
        let next = try append(reopened, "ds/v/b/f/r/l3/occupancy", "{}")
        #expect(try replayAll(reopened).0.map(\.end) == [kept, next])
    }

    @Test("a corrupt record in the middle is counted and skipped; the ones after it are kept")
    func corruptMiddle() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try IntakeJournal(directory: folder, syncInterval: nil)
        var ends: [UInt64] = []
        for index in 0..<5 { ends.append(try append(journal, "ds/v/b/f/r/l\(index)/occupancy", #"{"nrOfPeople":\#(index)}"#)) }
        journal.close()
        let file = "\(folder)/\(try segmentFiles()[0])"
        // Flip a byte in the third record's payload, and another in the fourth's length.
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.seek(toOffset: ends[2] - 3)
        try handle.write(contentsOf: [0xFF])
        try handle.seek(toOffset: ends[2] + 1)
        try handle.write(contentsOf: [0xEE])
        try handle.close()
        let reopened = try IntakeJournal(directory: folder, syncInterval: nil)
        let (records, statistics) = try replayAll(reopened)
        #expect(records.map(\.topic) == ["ds/v/b/f/r/l0/occupancy", "ds/v/b/f/r/l1/occupancy", "ds/v/b/f/r/l4/occupancy"])
        #expect(statistics.corrupt == 1)
        #expect(statistics.records == 3)
        // The good last record is kept at its place: new records follow it.
        #expect(reopened.statistics.end == ends[4])
    }

    @Test("segments roll over, and the ones a snapshot covers are deleted")
    func rotation() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try IntakeJournal(directory: folder, segmentSize: 4096, syncInterval: nil)
        let payload = String(repeating: "x", count: 500)
        var ends: [UInt64] = []
        for index in 0..<40 { ends.append(try append(journal, "ds/v/b/f/r/l\(index)/occupancy", payload)) }
        let files = try segmentFiles()
        #expect(files.count >= 5)
        #expect(try replayAll(journal).0.count == 40)
        // Covering up to the 30th record deletes every segment that ends before it.
        let deleted = journal.covered(through: ends[29])
        #expect(deleted > 0)
        #expect(try segmentFiles().count == files.count - deleted)
        let remaining = try replayAll(journal, from: ends[29]).0
        #expect(remaining.map(\.end) == Array(ends[30...]))
        // Nothing the snapshot does not cover was deleted.
        #expect(try replayAll(journal).0.first!.end <= ends[30])
        let bytesOnDisk = try segmentFiles().reduce(UInt64(0)) { total, name in
            total + UInt64(try FileManager.default.attributesOfItem(atPath: "\(folder)/\(name)")[.size] as! Int)
        }
        #expect(journal.statistics.bytes == bytesOnDisk)
    }

    @Test("positions never go below what the snapshot covers, even when the folder was emptied")
    func continuesAfterSnapshot() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try IntakeJournal(directory: folder, syncInterval: nil)
        journal.resume(atLeast: 10_000)
        let end = try append(journal, "ds/v/b/f/r/l/occupancy", "{}")
        #expect(end > 10_000)
        #expect(try replayAll(journal, from: 10_000).0.map(\.end) == [end])
        journal.close()
        let reopened = try IntakeJournal(directory: folder, syncInterval: nil)
        #expect(reopened.statistics.end == end)
    }

    @Test("the sync thread brings the journal to the disk on its interval")
    func syncs() async throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let journal = try IntakeJournal(directory: folder, syncInterval: .milliseconds(20))
        try append(journal, "ds/v/b/f/r/l/occupancy", "{}")
        try await eventually("two syncs on the 20 ms interval") { journal.syncCount >= 2 }
        journal.close()
    }
}
