import LiveTopics
import Prometheus
import Synchronization

/// A histogram of durations with fixed bounds, written in Prometheus' text form as the
/// Prometheus library writes its own (the same `le` and sum texts), but recorded with one
/// lock and a comparison of whole nanoseconds per bound up to the first that holds it.
/// The library's histogram, recorded through swift-metrics' `Timer`, turns every duration
/// into 128-bit arithmetic and compares it with every bound: too much for a record per
/// update and per acknowledgement (docs/performance.md).
final class LatencyHistogram: Sendable {
    let name: String
    /// The upper bounds in nanoseconds, ascending.
    private let bounds: [Int64]
    /// The bounds as `le` texts.
    private let boundTexts: [String]

    private struct State {
        /// Per bucket (not cumulative), and one past the last bound.
        var counts: [UInt64]
        var sumNanoseconds: Int64 = 0
        var count: UInt64 = 0
    }

    private let state: Mutex<State>

    init(name: String, buckets: [Duration]) {
        self.name = name
        let sorted = buckets.sorted()
        bounds = sorted.map(\.nanoseconds)
        boundTexts = sorted.map(\.bucketRepresentation)
        state = Mutex(State(counts: Array(repeating: 0, count: sorted.count + 1)))
    }

    func record(duration: Duration) {
        record(nanoseconds: duration.nanoseconds)
    }

    func record(nanoseconds: Int64) {
        var bucket = 0
        while bucket < bounds.count && bounds[bucket] < nanoseconds { bucket += 1 }
        state.withLock { state in
            state.counts[bucket] += 1
            state.sumNanoseconds &+= nanoseconds
            state.count += 1
        }
    }

    /// The histogram's lines (`# TYPE`, cumulative buckets, `+Inf`, sum, count).
    func emit(into buffer: inout [UInt8]) {
        let (counts, sum, count) = state.withLock { ($0.counts, $0.sumNanoseconds, $0.count) }
        buffer.append(contentsOf: "# TYPE \(name) histogram\n".utf8)
        var cumulative: UInt64 = 0
        for (index, text) in boundTexts.enumerated() {
            cumulative += counts[index]
            buffer.append(contentsOf: "\(name)_bucket{le=\"\(text)\"} \(cumulative)\n".utf8)
        }
        buffer.append(contentsOf: "\(name)_bucket{le=\"+Inf\"} \(count)\n".utf8)
        buffer.append(contentsOf: "\(name)_sum \(Duration.nanoseconds(sum).bucketRepresentation)\n".utf8)
        buffer.append(contentsOf: "\(name)_count \(count)\n".utf8)
    }
}
