import Benchmark
import BenchmarkFixtures
import Foundation
import LiveState
import LiveStatePersistence
import LiveTopics

/// Restoring 1,000,000 locations from the SQLite file (written once, in setup), with the
/// same rules as when it was written: staleness is caught up, nothing else re-derived.
let benchmarks: @Sendable () -> Void = {
    let count = 1_000_000

    Benchmark(
        "Restore 1000000 locations from SQLite",
        configuration: .init(metrics: [.wallClock], warmupIterations: 0, maxDuration: .seconds(60), maxIterations: 3)
    ) { benchmark in
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-restore-benchmark.db").path
        if !FileManager.default.fileExists(atPath: path) {
            let engine = PipelineFixtures.filledEngine(count)
            let database = try StateDatabase(path: path)
            try database.write(engine.takeDirty())
            try database.setMeta("rules", engine.store.ruleEngine.fingerprint)
        }
        let now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000 + Int64(count))
        let restored = LiveCore(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
        benchmark.startMeasurement()
        let result = try restored.restore(fromFile: path, now: now)
        benchmark.stopMeasurement()
        precondition(result.count == count, "restored \(result.count) of \(count)")
        blackHole(result.changed)
    }

    // The start after a crash: the snapshot above, then 1,000,000 journaled updates (the mix
    // of the pipeline benchmark over the same locations) replayed through the core, and the
    // staleness caught up once. The journal was written at 65,000 updates/s (a broker's pace)
    // after the snapshot's last update, and the daemon restarts 1 s after its last record;
    // the outage variant restarts an hour later, when every value has gone stale.
    for (name, outage) in [("", Int64(1_000)), (", an hour later", Int64(3_600_000))] {
        Benchmark(
            "Start: restore 1000000 locations and replay 1000000 journal records\(name)",
            configuration: .init(metrics: [.wallClock, .peakMemoryResident], warmupIterations: 0, maxDuration: .seconds(90), maxIterations: 3)
        ) { benchmark in
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-restore-benchmark.db").path
            precondition(FileManager.default.fileExists(atPath: path), "run the restore benchmark first: it writes the snapshot")
            let folder = StartFixture.journal(count: count)
            let core = LiveCore(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
            benchmark.startMeasurement()
            var restored = try core.restore(fromFile: path)
            let journal = try IntakeJournal(directory: folder, syncInterval: nil)
            // In place, in batches whose memory is loaded together, as the daemon does.
            var changed = 0
            let replay = try journal.replay(from: restored.journalPosition, prefetchingFor: core) { record in
                let topic = String(decoding: record.topic, as: UTF8.self)
                if case .changed = core.process(topic: topic, payload: record.payload, receivedAt: record.receivedAt) { changed += 1 }
            }
            let now = LiveTimestamp(millisecondsSince1970: StartFixture.lastRecord(count: count).millisecondsSince1970 + outage)
            core.finishRestore(&restored, now: now)
            benchmark.stopMeasurement()
            precondition(replay.records == count, "replayed \(replay.records) of \(count)")
            blackHole(changed + restored.changed)
            journal.close()
        }
    }

    // The network thread's cost per update: one record (a 60-byte payload) appended to the
    // journal with one write(2), the sync thread running. One journal for all iterations.
    Benchmark(
        "Journal append (60-byte payload)",
        configuration: .init(metrics: [.wallClock, .throughput], warmupIterations: 1000, maxDuration: .seconds(5), maxIterations: 1_000_000)
    ) { benchmark in
        let journal = AppendFixture.journal
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(
                try! journal.append(
                    topic: AppendFixture.topic, payload: AppendFixture.payload, receivedAt: AppendFixture.time, retain: false))
        }
        benchmark.stopMeasurement()
    }
}

/// The start benchmark's journal: `count` records received at 65,000 a second from the
/// snapshot's last update on (written once, kept in the temporary folder).
enum StartFixture {
    /// `filledEngine(count)` stamps its locations' values 1 ms apart from this on.
    static let filledFrom = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    static func receivedAt(_ number: Int, count: Int) -> LiveTimestamp {
        LiveTimestamp(millisecondsSince1970: filledFrom.millisecondsSince1970 + Int64(count) + Int64(number) * 1000 / 65_000)
    }

    static func lastRecord(count: Int) -> LiveTimestamp { receivedAt(count - 1, count: count) }

    static func journal(count: Int) -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-replay-benchmark-65k.journal").path
        guard !FileManager.default.fileExists(atPath: folder) else { return folder }
        let journal = try! IntakeJournal(directory: folder, syncInterval: nil)
        for (number, (topic, payload)) in PipelineFixtures.updates(count: count, locations: count).enumerated() {
            var topic = topic
            topic.withUTF8 { topicBytes in
                payload.withUnsafeBytes { payloadBytes in
                    _ = try! journal.append(
                        topic: UnsafeRawBufferPointer(topicBytes), payload: payloadBytes,
                        receivedAt: receivedAt(number, count: count), retain: false)
                }
            }
        }
        journal.close()
        return folder
    }
}

/// The append benchmark's journal and record, made once.
enum AppendFixture {
    static let journal: IntakeJournal = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-append-benchmark.journal").path
        try? FileManager.default.removeItem(atPath: folder)
        return try! IntakeJournal(directory: folder, segmentSize: 64 << 20, syncInterval: .seconds(1))
    }()
    static let topicBytes = Array("ds1/hq/b1/f3/r7/loc-1234/occupancy".utf8)
    static let payloadBytes = Array(#"{"timestamp":1763720000000,"properties":{"nrOfPeople":"3"}}"#.utf8)
    static var topic: UnsafeRawBufferPointer { topicBytes.withUnsafeBytes { $0 } }
    static var payload: UnsafeRawBufferPointer { payloadBytes.withUnsafeBytes { $0 } }
    static let time = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
}
