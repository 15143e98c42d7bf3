import Logging
import Mosquitto
import ServiceLifecycle

/// Restores the state, connects to the broker (retrying while it is down, never exiting),
/// subscribes, converges, tells systemd it is ready, and runs the pipeline. On graceful shutdown it stops taking
/// updates: publishes `offline`, disconnects, and the pipeline writes the store.
struct PipelineService: Service {
    let pipeline: LivePipeline
    let notifier: SystemdNotifier
    let logger: Logger
    /// What must be up before READY=1 (the HTTP server).
    var waitFor: StartupGate?

    func run() async throws {
        let address = pipeline.client.configuration.address
        // The restore and the journal's replay: `WatchdogService` reports how far they are
        // (STATUS=, EXTEND_TIMEOUT_USEC=). SIGTERM meanwhile ends them with nothing written.
        notifier.status("restoring the state")
        do {
            try await withGracefulShutdownHandler {
                try await pipeline.start()
            } onGracefulShutdown: {
                pipeline.startProgress.requestStop()
            }
        } catch is CancellationError {
            notifier.stopping()
            logger.info("stopped during the start; the state file and the journal are as they were")
            return
        }
        if Task.isShuttingDownGracefully {
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
                    await waitFor?.wait()
                    await pipeline.markReady()
                    notifier.status("connected to \(address); converging with the broker's retained styles")
                    // A failover replica that starts with no state copies a peer's first.
                    await pipeline.join()
                    // Ready means converged: the styles at the broker are the state's (a
                    // standby's are the active's business).
                    await pipeline.waitUntilServing()
                    let locations = await pipeline.statistics.locations
                    let refused = await pipeline.refusedSubscriptions
                    let degraded = refused.isEmpty ? "" : "; the broker refused \(refused.joined(separator: ", "))"
                    notifier.ready(status: "connected to \(address); \(locations) locations\(degraded)")
                    logger.info("ready", metadata: ["store.locations": "\(locations)"])
                } catch {
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
