import LiveState
import LiveStatePersistence

/// The pipeline's counts, for `/metrics`, `/v1/status`, `STATUS=` and the watchdog.
public struct PipelineStatistics: Sendable, Equatable {
    public var core = LiveCore.Counters()
    public var store = LiveStore.Counters()
    public var published = 0
    /// Derived changes that a later one of their location replaced within
    /// `output.minInterval`, never published.
    public var coalesced = 0
    public var summariesPublished = 0
    public var locations = 0
    public var refusedSubscriptions = 0
    public var intake = Intake.Statistics()
    public var replayed = IntakeJournal.ReplayStatistics()
    public var snapshotFailures = 0
    /// Publications the broker refused (PUBACK), and ones dropped because the MQTT
    /// library refused them (too large for the broker, an invalid topic).
    public var publishesRefused = 0
    public var publishesDropped = 0
    /// Publications waiting for room in the broker's in-flight window (one per topic), the
    /// new locations' first styles waiting as their locations, and the locations a
    /// republication has still to look at.
    public var outputWaiting = 0
    /// New locations' first styles waiting as their locations (in `outputWaiting` too).
    public var outputFirstStylesWaiting = 0
    /// New locations' first styles that waited as their locations so far.
    public var outputFirstStylesKept = 0
    /// Our publications awaiting the broker's acknowledgement.
    public var outputInFlight = 0
    /// Publications handed over that no acknowledged sync marker covers yet.
    public var unmarked = 0
    /// Sync markers the broker acknowledged.
    public var markersAcknowledged = 0
    /// Convergences finished, failed, and skipped because nothing could have diverged;
    /// retained messages read by convergences in all.
    public var convergences = 0
    public var convergenceFailures = 0
    public var convergencesSkipped = 0
    public var convergenceRead = 0
    /// Retained messages the convergence under way has read (0 when none runs).
    public var convergenceProgress = 0
    /// Updates handed to the core (replayed ones included): the pipeline's progress.
    public var processed = 0
    /// The floor view's viewers.
    public var events = EventHub.Statistics()
    /// The daemon's connections whose socket calls go through the buffers.
    public var bufferedConnections = 0
    /// Retained legends found differing from this daemon's (another daemon's rules).
    public var legendConflicts = 0
    /// Convergence reads that returned fewer retained styles than the broker holds.
    public var convergenceShortReads = 0
    /// Locations handed over to another partition's daemon (they moved there).
    public var handOvers = 0
    /// Times the watched bridge came back (or was found up at start) and the recorded clears went out again.
    public var bridgeRecoveries = 0
    /// Recorded clears published again after the watched bridge came back.
    public var bridgeClearsRepublished = 0
    /// Stored locations this start left out: outside the partition (`partition.owns` changed).
    public var droppedOutsidePartition = 0
    /// Reconnections that found the broker had not kept the daemon's session.
    public var sessionsLost = 0
    /// A failover replica's role, epoch and counts; nil without failover.
    public var replica: ReplicaRole?
    /// The styles published again as the output's window makes room.
    public var republish = RepublishStatistics()
}

extension PipelineStatistics {
    /// The counts of `pipeline`'s stages, read on the pipeline.
    init(_ pipeline: isolated LivePipeline) {
        let output = pipeline.publishing.counts
        let read = pipeline.convergence.retainedRead
        let core = pipeline.processing.core
        self.init(
            core: core.counters, store: core.storeCounters, published: output.changes,
            coalesced: output.coalesced, summariesPublished: output.summaries, locations: core.locationCount,
            refusedSubscriptions: pipeline.connection.refused.count, intake: pipeline.intake.statistics,
            replayed: pipeline.processing.replayed, snapshotFailures: pipeline.checkpoints.failures,
            publishesRefused: pipeline.refusedPublishes.count, publishesDropped: output.dropped,
            outputWaiting: output.waiting, outputFirstStylesWaiting: output.firstStylesWaiting,
            outputFirstStylesKept: output.firstStylesKept, outputInFlight: output.inFlight,
            unmarked: max(0, pipeline.publishing.handedOver - pipeline.checkpoints.markers.markedPosition),
            markersAcknowledged: pipeline.checkpoints.markersAcknowledged, convergences: pipeline.convergence.finished,
            convergenceFailures: pipeline.convergence.failures, convergencesSkipped: pipeline.convergence.skipped,
            convergenceRead: read.total, convergenceProgress: read.current, processed: pipeline.processing.processed,
            events: pipeline.events.statistics,
            bufferedConnections: pipeline.connections.reduce(0) { $0 + $1.bufferedConnections },
            legendConflicts: pipeline.convergence.legendConflicts, convergenceShortReads: pipeline.convergence.shortReads,
            handOvers: pipeline.partition?.handOvers ?? 0, bridgeRecoveries: pipeline.partition?.bridgeRecoveries ?? 0,
            bridgeClearsRepublished: pipeline.partition?.clearsRepublished ?? 0,
            droppedOutsidePartition: pipeline.partition?.droppedAtStart ?? 0, sessionsLost: pipeline.connection.sessionsLost, replica: pipeline.replica?.role,
            republish: pipeline.publishing.republish)
    }
}
