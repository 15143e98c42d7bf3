import Benchmark
import BenchmarkFixtures
import LiveTopics
import LinearTopicMatcher

/// Matching one topic against 10,000 and 100,000 registered criteria: the trie index,
/// and libmosquitto's `mosquitto_topic_matches_sub` over every filter as the baseline.
/// Each reported operation is one topic.
let benchmarks: @Sendable () -> Void = {
    let topics = CriteriaShapes.topics(count: 4096)

    for count in [10_000, 100_000] {
        let filters = CriteriaShapes.filters(count: count)

        Benchmark(
            "TopicIndex match, \(count) filters",
            configuration: .init(
                metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo,
                maxDuration: .seconds(5), maxIterations: 10_000,
                setup: { _ = indexes.index(for: filters) })
        ) { benchmark in
            let index = indexes.index(for: filters)
            var matches = 0
            var position = 0
            for _ in benchmark.scaledIterations {
                try! index.forEachMatch(topics[position & 4095]) { _, _ in matches &+= 1 }
                position &+= 1
            }
            blackHole(matches)
        }

        Benchmark(
            "libmosquitto linear scan, \(count) filters",
            configuration: .init(
                metrics: [.wallClock, .throughput], maxDuration: .seconds(5),
                maxIterations: count == 10_000 ? 2_000 : 200)
        ) { benchmark in
            let matcher = LinearTopicMatcher(filters: filters)
            benchmark.startMeasurement()
            var matches = 0
            var position = 0
            for _ in benchmark.scaledIterations {
                matches &+= matcher.countMatches(topics[position & 4095])
                position &+= 1
            }
            blackHole(matches)
        }
    }

    Benchmark(
        "TopicIndex add 100000 filters",
        configuration: .init(metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident], maxIterations: 5)
    ) { benchmark in
        let filters = CriteriaShapes.filters(count: 100_000).map { try! TopicFilter($0) }
        benchmark.startMeasurement()
        var index = TopicIndex<Int>()
        for (number, filter) in filters.enumerated() { index.add(filter, number) }
        benchmark.stopMeasurement()
        blackHole(index.count)
    }
}

/// Indexes built once per filter set and shared by the iterations that measure them.
final class IndexCache: @unchecked Sendable {
    // Benchmarks run one at a time on one thread; the cache is never touched concurrently.
    private var built: [Int: TopicIndex<Int>] = [:]

    func index(for filters: [String]) -> TopicIndex<Int> {
        if let index = built[filters.count] { return index }
        var index = TopicIndex<Int>()
        for (number, filter) in filters.enumerated() { try! index.add(filter, number) }
        built[filters.count] = index
        return index
    }
}

let indexes = IndexCache()
