import Mosquitto

/// The work a stage starts that outlives the call that started it: the owner runs each job
/// as a child task of ``LivePipeline/serve(tickInterval:)``, so that all of it is cancelled
/// and awaited when the pipeline stops.
struct PipelineJobs: Sendable {
    enum Job: Sendable {
        /// A full convergence (or a marker's check), until current.
        case converge
        /// Connect a lease's holder, claim, and watch it until it ends.
        case hold(MQTTClient, epoch: UInt64)
        /// Publish the lease again on its holder.
        case renew(MQTTClient, epoch: UInt64)
        /// Close a connection that is no longer used.
        case disconnect(MQTTClient)
        /// Publish a sync marker after the publications it follows.
        case marker(CheckpointStage.Marker)
        /// Publish again the recorded clears still right (the watched bridge came back).
        case republishClears
        /// Open a gate (a takeover that needed no convergence has converged).
        case open(StartupGate)
    }

    let jobs: AsyncStream<Job>
    private let continuation: AsyncStream<Job>.Continuation

    init() { (jobs, continuation) = AsyncStream.makeStream() }

    func start(_ job: Job) { continuation.yield(job) }

    /// No more jobs: the loop that runs them ends once the queued ones have started.
    func finish() { continuation.finish() }
}

/// A signal that a running job is to stop (a convergence a deposition makes pointless): the
/// job races ``stopped`` and is cancelled when it ends first.
struct StopSignal: Sendable {
    let stopped: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() { (stopped, continuation) = AsyncStream.makeStream() }

    func stop() { continuation.finish() }

    /// Returns once ``stop()`` was called, or when the calling task is cancelled.
    func wait() async {
        for await _ in stopped {}
    }
}
