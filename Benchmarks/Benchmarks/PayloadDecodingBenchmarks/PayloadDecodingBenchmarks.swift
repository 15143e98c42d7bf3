import Benchmark
import LiveTopics

/// Decoding a live update: a typical 100-byte occupancy payload, and the topic parse that
/// comes before it. Each reported operation is one update.
let benchmarks: @Sendable () -> Void = {
    let topicName = "ds1/hq/B/F3/R7/room-7/occupancy"
    let topic = try! LiveTopic(parsing: topicName)
    let payload = Array(
        #"{"id":"room-7","timestamp":"2026-11-21T10:15:03.120Z","properties":{"nrOfPeople":"3","capacity":"8"}}"#.utf8)
    let received = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
    precondition(payload.count >= 95 && payload.count <= 105, "the typical payload is about 100 bytes")

    Benchmark(
        "LiveUpdate decode, \(payload.count)-byte payload",
        configuration: .init(metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try! LiveUpdate(topic: topic, payload: payload, receivedAt: received))
        }
    }

    Benchmark(
        "LiveTopic parse",
        configuration: .init(metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try! LiveTopic(parsing: topicName))
        }
    }
}
