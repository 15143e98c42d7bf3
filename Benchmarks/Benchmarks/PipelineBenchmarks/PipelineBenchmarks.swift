import Benchmark
import BenchmarkFixtures
import LiveState
import LiveTopics

/// The in-process path of one update: topic index, topic and payload decoding, store,
/// rules, diff. 100,000 locations, 50 rules over seven domains; each reported operation is
/// one update, from a stream of 2,000,000 over the venue in its steady state: every
/// location has had 20 updates first (as `PipelineProbe`'s have), so nearly every domain
/// it hears from already has a value, as in a venue that has been live for a while. (With
/// fewer, a fifth of the measured updates would be the first value of their domain at
/// their location, which a running venue sees once per location and domain.)
/// The stream is never replayed: a replay would bring back the values each location already
/// has, which the store recognises and skips, and flatter the result.
let benchmarks: @Sendable () -> Void = {
    Benchmark(
        "Pipeline update, 100000 locations, 50 rules",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(10),
            maxIterations: 1_900, setup: { _ = PipelineState.shared })
    ) { benchmark in
        let state = PipelineState.shared
        var changes = 0
        for _ in benchmark.scaledIterations {
            if state.next() { changes += 1 }
        }
        blackHole(changes)
    }
}

/// A warmed engine and the update stream, built once and shared by the iterations.
final class PipelineState: @unchecked Sendable {
    // Benchmarks run one at a time on one thread; this is never touched concurrently.
    static let shared = PipelineState()

    let engine: LiveCore
    let updates: [(topic: String, payload: [UInt8])]
    // Read and written on every update by one thread: the run-time exclusivity check on
    // each access (the engine's own hot properties opt out of it too) is not part of the
    // pipeline being measured.
    @exclusivity(unchecked) var position = 0
    @exclusivity(unchecked) var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)

    init() {
        let locations = 100_000
        engine = LiveCore(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
        for update in PipelineFixtures.updates(count: locations * 20, locations: locations, seed: 1) {
            now.millisecondsSince1970 += 1
            _ = engine.process(topic: update.topic, payload: update.payload, receivedAt: now)
        }
        updates = PipelineFixtures.updates(count: 2_000_000, locations: locations, seed: 2)
    }

    /// Processes the next update; whether it changed a style.
    @inline(__always)
    func next() -> Bool {
        let update = updates[position]
        precondition(position < updates.count - 1, "the stream must not be replayed")
        position += 1
        now.millisecondsSince1970 += 1
        if case .changed = engine.process(topic: update.topic, payload: update.payload, receivedAt: now) { return true }
        return false
    }
}
