import Logging
import Mosquitto
import ServiceLifecycle

/// Connects to the broker (retrying while it is down, never exiting), subscribes, tells
/// systemd it is ready, and runs the pipeline. On graceful shutdown it stops taking
/// updates: publishes `offline`, disconnects, and the pipeline writes the store.
struct PipelineService: Service {
    let pipeline: LivePipeline
    let client: MQTTClient
    let notifier: SystemdNotifier
    let logger: Logger
    /// What must be up before READY=1 (the HTTP server).
    var waitFor: StartupGate?

    func run() async throws {
        let address = client.configuration.address
        notifier.status("waiting for the MQTT broker at \(address)")
        client.start()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await pipeline.subscribe()
                    await waitFor?.wait()
                    await pipeline.markReady()
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
                logger.info("stopping: publishing offline and writing the store")
                await pipeline.publishOffline()
                pipeline.intake.stop()
                await client.disconnect()
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
