import Prometheus
import Testing

@testable import LiveDataServer

/// The daemon's latency histograms are written as the Prometheus library writes its own, so
/// that a dashboard or alert on them reads them alike.
@Suite("Latency histograms")
struct LatencyHistogramTests {
    static let buckets: [Duration] = [.microseconds(100), .microseconds(250), .milliseconds(1), .milliseconds(25), .seconds(1), .seconds(60)]

    /// Durations on, just below and just above the bounds, zero, and past the last bound.
    static let recorded: [Duration] = [
        .zero, .microseconds(100), .nanoseconds(100_001), .microseconds(99), .milliseconds(1), .microseconds(1_001),
        .milliseconds(24), .milliseconds(25), .seconds(1), .nanoseconds(1_000_000_001), .seconds(59), .seconds(61), .seconds(3_600),
    ]

    @Test("recorded durations are written line for line as the Prometheus library's histogram writes them")
    func sameTextAsTheLibrary() {
        let ours = LatencyHistogram(name: "test_seconds", buckets: Self.buckets)
        let registry = PrometheusCollectorRegistry()
        let library = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(metricName: "test", unitName: "seconds", helpText: ""), buckets: Self.buckets)
        for duration in Self.recorded {
            ours.record(duration: duration)
            library.record(duration)
        }
        var buffer: [UInt8] = []
        ours.emit(into: &buffer)
        let expected = String(decoding: registry.emitToBuffer(), as: UTF8.self)
        let written = String(decoding: buffer, as: UTF8.self)
        #expect(written.split(separator: "\n") == expected.split(separator: "\n"))
        // Not two empty texts: every duration counted, a bound's own value in its bucket.
        #expect(written.contains("test_seconds_count \(Self.recorded.count)"))
        #expect(written.contains(#"test_seconds_bucket{le="0.0001"} 3"#))
    }

    @Test("an empty histogram is written with its buckets at zero")
    func empty() {
        let histogram = LatencyHistogram(name: "empty_seconds", buckets: Self.buckets)
        var buffer: [UInt8] = []
        histogram.emit(into: &buffer)
        let written = String(decoding: buffer, as: UTF8.self)
        #expect(written.contains(#"empty_seconds_bucket{le="+Inf"} 0"#))
        #expect(written.contains("empty_seconds_count 0"))
        #expect(written.hasPrefix("# TYPE empty_seconds histogram\n"))
    }
}
