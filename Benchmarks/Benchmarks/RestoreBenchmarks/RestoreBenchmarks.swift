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
        blackHole(result.changes.count)
    }
}
