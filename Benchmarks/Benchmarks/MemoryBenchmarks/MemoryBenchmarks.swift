import Benchmark
import BenchmarkFixtures
import Foundation
import LiveDataServer
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
        let engine = filledEngine(count)
        let after = residentBytes()
        benchmark.measurement(.custom("bytes per location", useScalingFactor: false), (after - before) / count)
        blackHole(engine.store.count)
    }

}

/// An engine tracking `count` locations, each with one occupancy value.
func filledEngine(_ count: Int) -> LiveEngine {
    let engine = LiveEngine(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
    var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
    for number in 0..<count {
        now.millisecondsSince1970 += 1
        let payload = Array(#"{"properties":{"nrOfPeople":"\#(number % 9)","capacity":"8"}}"#.utf8)
        _ = engine.process(topic: PipelineFixtures.topic(number, domain: "occupancy"), payload: payload, receivedAt: now)
    }
    return engine
}

/// The process's resident memory, from /proc.
func residentBytes() -> Int {
    let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? "0 0"
    let pages = Int(text.split(separator: " ")[1]) ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
