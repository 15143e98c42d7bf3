import LiveState

/// The Prometheus text exposition of the pipeline's counters.
enum MetricsText {
    static func render(_ statistics: LivePipeline.Statistics, latency: LatencyHistogram, brokerConnected: Bool, ready: Bool)
        -> String
    {
        var text = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples { text += "\(name)\(sample.labels) \(sample.value)\n" }
        }
        metric("livedata_updates_received_total", "counter", "Messages received from the broker.", [("", "\(statistics.core.received)")])
        metric(
            "livedata_updates_rejected_total", "counter", "Updates dropped, by reason.",
            LiveCore.RejectReason.allCases.map { ("{reason=\"\($0.rawValue)\"}", "\(statistics.core.rejected[$0] ?? 0)") }
                + [("{reason=\"not_subscribed\"}", "\(statistics.core.notSubscribed)")])
        metric(
            "livedata_updates_out_of_order_total", "counter", "Updates older than the stored value, ignored.",
            [("", "\(statistics.store.ignoredOutOfOrder)")])
        metric("livedata_updates_applied_total", "counter", "Updates applied to the store.", [("", "\(statistics.store.applied)")])
        metric("livedata_values_expired_total", "counter", "Values that went stale.", [("", "\(statistics.store.expired)")])
        metric("livedata_derived_changes_published_total", "counter", "Derived changes published.", [("", "\(statistics.published)")])
        metric("livedata_summaries_published_total", "counter", "Summaries published.", [("", "\(statistics.summariesPublished)")])
        metric("livedata_locations_tracked", "gauge", "Locations in the store.", [("", "\(statistics.locations)")])
        metric("livedata_broker_connected", "gauge", "1 when connected to the MQTT broker.", [("", brokerConnected ? "1" : "0")])
        metric("livedata_ready", "gauge", "1 when restored, connected and subscribed.", [("", ready ? "1" : "0")])
        var buckets: [(String, String)] = []
        var cumulative = 0
        for (index, bound) in LatencyHistogram.bounds.enumerated() {
            cumulative += latency.counts[index]
            buckets.append(("{le=\"\(bound)\"}", "\(cumulative)"))
        }
        buckets.append(("{le=\"+Inf\"}", "\(latency.count)"))
        text += "# HELP livedata_processing_seconds From a message's arrival to its derived change being published.\n"
        text += "# TYPE livedata_processing_seconds histogram\n"
        for (labels, value) in buckets { text += "livedata_processing_seconds_bucket\(labels) \(value)\n" }
        text += "livedata_processing_seconds_sum \(latency.sum)\nlivedata_processing_seconds_count \(latency.count)\n"
        return text
    }
}
