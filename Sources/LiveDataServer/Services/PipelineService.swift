import Foundation
import LiveStatePersistence
import Logging
import Mosquitto
import ServiceLifecycle

/// Restores the state, connects to the broker (retrying while it is down, never exiting),
/// subscribes, converges, tells systemd it is ready, and runs the pipeline. On graceful shutdown it stops taking
/// updates: publishes `offline`, disconnects, and the pipeline writes the store.
///
/// What cannot come right by waiting ends the start with a ``StartFailure``: a broker host
/// name that does not resolve, a state file that cannot be opened. A broker that refuses or
/// does not answer is retried (it may be starting too).
struct PipelineService: Service {
    let pipeline: LivePipeline
    let notifier: SystemdNotifier
    let logger: Logger
    /// What must be up before READY=1 (the HTTP server).
    var waitFor: StartupGate?
    /// `store.path`, for the failure that names it.
    var storePath: String

    func run() async throws {
        let address = pipeline.client.configuration.address
        try await BrokerHostCheck.check(pipeline.client.configuration.host, logger: logger)
        // The restore and the journal's replay: `WatchdogService` reports how far they are
        // (STATUS=, EXTEND_TIMEOUT_USEC=). SIGTERM meanwhile ends them with nothing written;
        // so does the group's cancellation (another service failed to start).
        notifier.status("restoring the state")
        do {
            try await withTaskCancellationHandler {
                try await withGracefulShutdownHandler {
                    try await pipeline.start()
                } onGracefulShutdown: {
                    pipeline.startProgress.requestStop()
                }
            } onCancel: {
                pipeline.startProgress.requestStop()
            }
        } catch let failure as StateDatabase.Failure {
            notifier.stopping()
            var isDirectory: ObjCBool = false
            let directory = FileManager.default.fileExists(atPath: storePath, isDirectory: &isDirectory) && isDirectory.boolValue
            throw StartFailure.stateFile(path: storePath, cause: directory ? "a directory is in its place" : failure.message)
        } catch is CancellationError {
            notifier.stopping()
            logger.info("stopped during the start; the state file and the journal are as they were")
            return
        }
        if Task.isShuttingDownGracefully || Task.isCancelled {
            notifier.stopping()
            logger.info("stopped after the restore, before connecting")
            return
        }
        notifier.status("waiting for the MQTT broker at \(address)")
        for connection in pipeline.connections { connection.start() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await pipeline.subscribe()
                    // Each wait ends early when the start is given up (the group cancels
                    // this task at the stop): nothing is then said to be ready.
                    await waitFor?.wait()
                    try Task.checkCancellation()
                    await pipeline.markReady()
                    notifier.status("connected to \(address); converging with the broker's retained styles")
                    // A failover replica that starts with no state copies a peer's first.
                    await pipeline.join()
                    // Ready means converged: the styles at the broker are the state's (a
                    // standby's are the active's business).
                    await pipeline.waitUntilServing()
                    try Task.checkCancellation()
                    let locations = await pipeline.statistics.locations
                    let refused = await pipeline.refusedSubscriptions
                    let degraded = refused.isEmpty ? "" : "; the broker refused \(refused.joined(separator: ", "))"
                    notifier.ready(status: "connected to \(address); \(locations) locations\(degraded)")
                    logger.info("ready", metadata: ["store.locations": "\(locations)"])
                } catch is CancellationError {
                    return
                } catch {
                    // A stop meanwhile disconnects the client under the subscription: no fault.
                    if Task.isShuttingDownGracefully || Task.isCancelled { return }
                    logger.error("cannot subscribe: \(error)")
                }
            }
            group.addTask {
                // Until SIGTERM or SIGINT (or the group is cancelled).
                try? await gracefulShutdown()
                notifier.stopping()
                logger.info("stopping: publishing what waits, offline, and writing the store")
                await pipeline.checkpoint()
                await pipeline.publishOffline()
                await pipeline.releaseLease()
                pipeline.intake.stop()
                for connection in pipeline.connections { await connection.disconnect() }
            }
            // The pipeline runs until the client disconnects (at shutdown); then stop the rest.
            await pipeline.serve()
            group.cancelAll()
        }
        let statistics = await pipeline.statistics
        logger.info(
            "stopped", metadata: ["store.locations": "\(statistics.locations)", "updates.received": "\(statistics.core.received)"])
    }
}
