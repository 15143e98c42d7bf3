import BenchmarkFixtures
import Foundation
import LiveState
import LiveStatePersistence
import LiveTopics

// The start benchmark's work as a plain program, for `perf record -g`: the restore of the
// snapshot and the replay of the journal that `RestoreBenchmarks` wrote, each timed.
//
//   swift build -c release --product StartProbe
//   perf record -g .build/release/StartProbe [OUTAGE-SECONDS]

let temporary = FileManager.default.temporaryDirectory
let path = temporary.appendingPathComponent("livedata-restore-benchmark.db").path
let folder = temporary.appendingPathComponent("livedata-replay-benchmark-65k.journal").path
guard FileManager.default.fileExists(atPath: path), FileManager.default.fileExists(atPath: folder) else {
    print("run `swift package benchmark --target RestoreBenchmarks` first: it writes the snapshot and the journal")
    exit(1)
}
// The restart comes this many seconds after the journal's last record (see the benchmark).
let outage = CommandLine.arguments.dropFirst().first.flatMap { Int64($0) } ?? 1
let count = 1_000_000
let lastRecord = 1_763_720_000_000 + Int64(count) + Int64(count - 1) * 1000 / 65_000
let now = LiveTimestamp(millisecondsSince1970: lastRecord + outage * 1000)
let clock = ContinuousClock()
if CommandLine.arguments.count > 2 {
    // Reading the journal alone.
    let journal = try IntakeJournal(directory: folder, syncInterval: nil)
    let started = clock.now
    var bytes = 0
    let replay = try journal.replay(from: 0) { bytes += $0.payload.count }
    print("read \(replay.records) records (\(bytes) payload bytes) in \(clock.now - started)")
    exit(0)
}
let core = LiveCore(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
let started = clock.now
var restored = try core.restore(fromFile: path)
let restoredAt = clock.now
let journal = try IntakeJournal(directory: folder, syncInterval: nil)
var changed = 0
let replay = try journal.replay(from: restored.journalPosition, prefetchingFor: core) { record in
    let topic = String(decoding: record.topic, as: UTF8.self)
    if case .changed = core.process(topic: topic, payload: record.payload, receivedAt: record.receivedAt) { changed += 1 }
}
let replayedAt = clock.now
core.finishRestore(&restored, now: now)
let caughtUpAt = clock.now
journal.close()
print(
    "restored \(restored.count) in \(restoredAt - started), replayed \(replay.records) (\(changed) changes) in \(replayedAt - restoredAt), "
        + "caught up (\(restored.changed) changes) in \(caughtUpAt - replayedAt); total \(caughtUpAt - started)")
