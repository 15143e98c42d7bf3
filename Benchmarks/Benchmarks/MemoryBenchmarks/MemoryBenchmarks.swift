import Benchmark
import BenchmarkFixtures
import Foundation
import LiveState
import LiveTopics

/// Resident memory per tracked location at 1,000,000 locations, in a process of its own so
/// that nothing else has touched the heap before.
let benchmarks: @Sendable () -> Void = {
    let count = 1_000_000

    Benchmark(
        "Resident memory per location, 1000000 locations",
        configuration: .init(
            metrics: [.custom("bytes per location", useScalingFactor: false), .peakMemoryResident],
            warmupIterations: 0, maxIterations: 1)
    ) { benchmark in
        let before = residentBytes()
        let engine = PipelineFixtures.filledEngine(count)
        let after = residentBytes()
        benchmark.measurement(.custom("bytes per location", useScalingFactor: false), (after - before) / count)
        blackHole(engine.store.count)
    }

}

/// The process's resident memory, from /proc.
func residentBytes() -> Int {
    let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? "0 0"
    let pages = Int(text.split(separator: " ")[1]) ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
