import Benchmark
import BenchmarkFixtures
import DisplayRules
import LiveTopics

/// What the daemon does with a style once the pipeline has found that it changed: layer it
/// from its rules, find the changed fields, write its JSON, and the whole derived-change
/// payload. The changes are those of the pipeline benchmark's venue (10,000 locations, each
/// warmed up with 20 updates, then 100,000 updates); each reported operation is one change.
let benchmarks: @Sendable () -> Void = {
    func measure(_ name: String, _ work: @escaping @Sendable (PublicationFixtures, Int) -> Int) {
        Benchmark(
            name,
            configuration: .init(
                metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(5),
                setup: { _ = StyleState.shared })
        ) { benchmark in
            let fixtures = StyleState.shared.fixtures
            var total = 0
            for iteration in benchmark.scaledIterations { total &+= work(fixtures, iteration % fixtures.changes.count) }
            blackHole(total)
        }
    }
    measure("Style layering from the rules") { fixtures, index in fixtures.changes[index].style.isEmpty ? 0 : 1 }
    measure("Style changed fields") { fixtures, index in
        let (new, old) = fixtures.styles[index]
        return Int(truncatingIfNeeded: new.changedFieldSet(from: old).bits)
    }
    measure("Style JSON") { fixtures, index in
        var stream = JSONStream(capacity: 256)
        fixtures.styles[index].new.write(to: &stream)
        return stream.bytes.count
    }
    measure("Derived change payload") { fixtures, index in
        var stream = JSONStream(capacity: 1024)
        fixtures.changes[index].write(to: &stream)
        return stream.bytes.count
    }
}

final class StyleState: Sendable {
    static let shared = StyleState()

    let fixtures = PublicationFixtures(locations: 10_000, updates: 100_000)
}
