import LiveState
import LiveTopics
import Prometheus
import Synchronization

/// The daemon's metrics, in a Prometheus registry. The two latency histograms are recorded
/// as changes are published and acknowledged (``LatencyHistogram``, written after the
/// registry's lines); the pipeline's counters stay plain integers on its hot path and are
/// copied into the registry when `/metrics` is scraped. A new metric is one line in
/// ``exposition(_:brokerConnected:ready:)`` (and its counter in the pipeline's statistics).
public final class DaemonMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    /// From a message's arrival to its derived change being handed to the MQTT client.
    let processing: LatencyHistogram
    /// From an update's arrival to the broker's acknowledgement of the style it changed.
    let publishLag: LatencyHistogram
    /// The totals copied into the registry so far, by name and labels.
    private let copied = Mutex<[String: Int]>([:])

    static let processingName = "livedata_processing_seconds"
    static let processingBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
    ]

    static let publishLagName = "livedata_publish_lag_seconds"
    static let publishLagBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30),
        .seconds(60),
    ]

    public init() {
        processing = LatencyHistogram(name: Self.processingName, buckets: Self.processingBuckets)
        publishLag = LatencyHistogram(name: Self.publishLagName, buckets: Self.publishLagBuckets)
    }

    /// The Prometheus text exposition, with the pipeline's counters copied in first.
    public func exposition(_ statistics: LivePipeline.Statistics, brokerConnected: Bool, ready: Bool) -> [UInt8] {
        total("updates_received", "Messages received from the broker.", statistics.core.received)
        for reason in LiveCore.RejectReason.allCases {
            // Oversize payloads are mostly dropped on the network thread, before the core.
            let intake = reason == .oversize ? statistics.intake.oversize : 0
            total("updates_rejected", "Updates dropped, by reason.", (statistics.core.rejected[reason] ?? 0) + intake, reason: reason.rawValue)
        }
        total("updates_rejected", "Updates dropped, by reason.", statistics.core.notSubscribed, reason: "not_subscribed")
        total("updates_out_of_order", "Updates older than the stored value, ignored.", statistics.store.ignoredOutOfOrder)
        total("updates_applied", "Updates applied to the store.", statistics.store.applied)
        total(
            "updates_retained_not_new", "Retained messages without a timestamp for a value already held (not new data).",
            statistics.core.retainedNotNew)
        total("values_expired", "Values that went stale.", statistics.store.expired)
        total("derived_changes_published", "Derived changes published.", statistics.published)
        total(
            "derived_changes_coalesced",
            "Derived changes and summaries replaced by a newer one of their topic before they went out (output.minInterval, or a broker that takes them more slowly than they change).",
            statistics.coalesced)
        total("summaries_published", "Summaries published.", statistics.summariesPublished)
        total("publishes_refused", "Publications refused, by whom: the broker, or the MQTT library (dropped: too large for the broker, an invalid topic).", statistics.publishesRefused, label: ("by", "broker"))
        total("publishes_refused", "Publications refused, by whom: the broker, or the MQTT library (dropped: too large for the broker, an invalid topic).", statistics.publishesDropped, label: ("by", "library"))
        gauge(
            "output_waiting",
            "Publications waiting for room in the broker's in-flight window (at most one per topic), new locations' first styles waiting as their locations, and the locations a republication has still to look at.",
            statistics.outputWaiting)
        gauge(
            "output_first_styles_waiting",
            "New locations' first styles waiting as their locations, each made from the state as the window makes room (a burst of new locations while the line is long).",
            statistics.outputFirstStylesWaiting)
        total(
            "output_first_styles_waited",
            "New locations' first styles that waited as their locations rather than as changes in line (the line was long).",
            statistics.outputFirstStylesKept)
        gauge("output_in_flight", "Publications awaiting the broker's acknowledgement.", statistics.outputInFlight)
        gauge(
            "output_unmarked",
            "Publications handed to the broker that no acknowledged sync marker covers yet (a reconnection to a broker that kept its store sends these again).",
            statistics.unmarked)
        gauge(
            "republish_remaining",
            "Locations the republication under way has still to look at: a convergence publishes again what the broker lacks as the window makes room (0 when none runs).",
            statistics.republish.remaining)
        total("republished", "Styles a convergence published again because the broker did not hold them.", statistics.republish.republished)
        gauge(
            "republish_outstanding_peak",
            "The most publications waiting or awaiting acknowledgement since the last republication began.",
            statistics.republish.outstandingPeak)
        gauge(
            "republish_outstanding_bound",
            "What a republication keeps its publications waiting or awaiting acknowledgement within: those let wait in line plus the connections' windows.",
            statistics.republish.bound)
        total("sync_markers_acknowledged", "Sync markers the broker acknowledged.", statistics.markersAcknowledged)
        total("convergences", "Convergences with the broker's retained messages, by outcome.", statistics.convergences, label: ("outcome", "finished"))
        total("convergences", "Convergences with the broker's retained messages, by outcome.", statistics.convergenceFailures, label: ("outcome", "failed"))
        total("convergences", "Convergences with the broker's retained messages, by outcome.", statistics.convergencesSkipped, label: ("outcome", "skipped"))
        total("convergence_read", "Retained messages read back by convergences.", statistics.convergenceRead)
        total(
            "convergence_short_reads",
            "Convergence reads that returned fewer retained styles than the broker holds (a broker limit per subscription, or a cluster node that does not see them all): failed, tried again.",
            statistics.convergenceShortReads)
        gauge("convergence_progress", "Retained messages the convergence under way has read (0 when none runs).", statistics.convergenceProgress)
        total("updates_processed", "Updates handed to the core, replayed ones included.", statistics.processed)
        gauge("locations_tracked", "Locations in the store.", statistics.locations)
        gauge("subscriptions_refused", "Subscriptions the broker refused (not retried).", statistics.refusedSubscriptions)
        gauge("intake_queue_depth", "Received updates waiting for the pipeline.", statistics.intake.queueDepth)
        gauge("intake_queue_peak", "The most received updates that ever waited for the pipeline.", statistics.intake.queuePeak)
        total(
            "intake_blocked_milliseconds", "Time the network thread waited for room in the intake queue.",
            Int(statistics.intake.blocked.milliseconds))
        gauge("journal_bytes", "Bytes in the intake journal's files.", Int(statistics.intake.journalBytes))
        gauge("journal_replayed_records", "Journal records replayed at start.", statistics.replayed.records)
        gauge("journal_corrupt_records", "Corrupt journal records skipped at start.", statistics.replayed.corrupt)
        total("storage_failures", "Failed writes, by what failed: the journal or the state file (snapshot).", statistics.intake.journalFailures, reason: "journal")
        total("storage_failures", "Failed writes, by what failed: the journal or the state file (snapshot).", statistics.snapshotFailures, reason: "snapshot")
        gauge("event_viewers", "Floor-view viewers following the event stream.", statistics.events.viewers)
        total("event_viewers_dropped", "Floor-view viewers dropped for falling behind (they reconnect).", statistics.events.dropped)
        total("event_streams_opened", "Event streams opened, by how they start: a snapshot, or resumed after Last-Event-ID.", statistics.events.snapshots, label: ("start", "snapshot"))
        total("event_streams_opened", "Event streams opened, by how they start: a snapshot, or resumed after Last-Event-ID.", statistics.events.resumed, label: ("start", "resumed"))
        gauge("broker_connected", "1 when connected to the MQTT broker.", brokerConnected ? 1 : 0)
        gauge("socket_buffered_connections", "The daemon's MQTT connections whose socket calls go through its buffers (broker.bufferedSocket).", statistics.bufferedConnections)
        total(
            "locations_handed_over", "Locations that moved into another partition's building: their old style cleared, the other daemon's now.",
            statistics.handOvers)
        gauge(
            "locations_dropped_outside_partition",
            "Stored locations this start left out because they are outside its partition (partition.owns changed): the owning daemon publishes them.",
            statistics.droppedOutsidePartition)
        total(
            "sessions_lost", "Reconnections that found the broker had not kept the daemon's persistent session: what it had queued is lost.",
            statistics.sessionsLost)
        total(
            "bridge_recoveries",
            "Times the watched bridge (partition.bridge) came back up, or was found up at start, and the recorded clears were published again.",
            statistics.bridgeRecoveries)
        total(
            "bridge_clears_republished",
            "Recorded clears (styles and summaries cleared and not published since) published again after the watched bridge came back.",
            statistics.bridgeClearsRepublished)
        total(
            "legend_conflicts", "Retained legends of a served dataset found differing from this daemon's (another daemon's rules disagree).",
            statistics.legendConflicts)
        if let replica = statistics.replica {
            let partition = ("partition", replica.partition)
            gauge(
                "failover_active", "1 while this replica of a failover partition is the active one (it publishes), 0 on standby.",
                replica.role == .active ? 1 : 0, label: partition)
            gauge(
                "failover_epoch", "The epoch this replica publishes under while active; else the epoch of the lease in force.",
                Int(clamping: replica.epoch), label: partition)
            total("failover_takeovers", "Times this replica became its partition's active one.", replica.takeovers)
            total("failover_depositions", "Times this replica stopped being active, or gave a claim up.", replica.depositions)
        }
        gauge("ready", "1 when restored, connected, subscribed and converged.", ready ? 1 : 0)
        var buffer = registry.emitToBuffer()
        processing.emit(into: &buffer)
        publishLag.emit(into: &buffer)
        return buffer
    }

    /// Brings the registry's counter `livedata_{name}_total` up to `value`.
    private func total(_ name: String, _ help: String, _ value: Int, reason: String? = nil) {
        total(name, help, value, label: reason.map { ("reason", $0) })
    }

    private func total(_ name: String, _ help: String, _ value: Int, label: (String, String)?) {
        let labels = label.map { [$0] } ?? []
        let reason = label?.1
        let counter = registry.makeCounter(
            descriptor: MetricNameDescriptor(namespace: "livedata", metricName: name, unitName: "total", helpText: help),
            labels: labels)
        let delta = copied.withLock { copied in
            let key = name + "/" + (reason ?? "")
            defer { copied[key] = max(copied[key] ?? 0, value) }
            return value - (copied[key] ?? 0)
        }
        if delta > 0 { counter.increment(by: Int64(delta)) }
    }

    private func gauge(_ name: String, _ help: String, _ value: Int, label: (String, String)? = nil) {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(namespace: "livedata", metricName: name, unitName: "", helpText: help),
            labels: label.map { [$0] } ?? []
        ).set(Double(value))
    }
}
