import LiveDataConfiguration
import LiveState
import Logging
import Mosquitto
import ServiceLifecycle
import UnixSignals

/// The daemon as one service: restore the state, connect (retrying while the broker is
/// down, never exiting), subscribe, announce readiness to systemd, run the pipeline; reload
/// styles and rules on SIGHUP (a bad new config is logged and the old one keeps running);
/// on graceful shutdown stop taking updates, publish `offline`, disconnect and write the
/// store.
public struct LiveDataDaemon: Service {
    let config: LiveDataConfig
    let configPath: String
    let logger: Logger
    let notifier: SystemdNotifier
    let reconnect: MQTTBackoff
    let handle: DaemonHandle

    public init(
        config: LiveDataConfig, configPath: String, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(),
        reconnect: MQTTBackoff = MQTTBackoff(initial: .milliseconds(500), maximum: .seconds(30)),
        handle: DaemonHandle = DaemonHandle()
    ) {
        self.handle = handle
        self.config = config
        self.configPath = configPath
        self.logger = logger
        self.notifier = notifier
        self.reconnect = reconnect
    }

    public func run() async throws {
        let topics = OutputTopics(prefix: config.output.prefix)
        var mqtt = try config.broker.mqttConfiguration(statusTopic: topics.status)
        mqtt.reconnect = reconnect
        let client = try MQTTClient(configuration: mqtt, logger: logger)
        notifier.status("restoring the state")
        let pipeline = try await LivePipeline(config: config, client: client, logger: logger)
        handle.set(pipeline)
        let address = mqtt.address
        notifier.status("waiting for the MQTT broker at \(address)")
        logger.info("starting", metadata: ["mqtt.broker": "\(address)", "config.file": "\(configPath)"])
        client.start()

        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await pipeline.subscribe()
                    await pipeline.markReady()
                    let locations = await pipeline.statistics.locations
                    notifier.ready(status: "connected to \(address); \(locations) locations")
                    logger.info("ready", metadata: ["store.locations": "\(locations)"])
                } catch {
                    logger.error("cannot subscribe: \(error)")
                }
            }
            group.addTask { await self.reportStatus(pipeline, client: client, address: address) }
            group.addTask { await self.reloadOnHangup(pipeline) }
            group.addTask {
                // Runs until SIGTERM or SIGINT (or the group is cancelled).
                try? await gracefulShutdown()
                notifier.stopping()
                logger.info("stopping: publishing offline and writing the store")
                await pipeline.publishOffline()
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

    /// Pings the systemd watchdog and keeps `STATUS=` current.
    private func reportStatus(_ pipeline: LivePipeline, client: MQTTClient, address: String) async {
        let interval = min(notifier.watchdogInterval ?? .seconds(5), .seconds(5))
        var lastReceived = 0
        var last = ContinuousClock.now
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            if Task.isCancelled { break }
            notifier.watchdog()
            let statistics = await pipeline.statistics
            let now = ContinuousClock.now
            let seconds = Double((now - last).components.seconds) + Double((now - last).components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(statistics.core.received - lastReceived) / seconds : 0
            lastReceived = statistics.core.received
            last = now
            if client.state == .connected {
                notifier.status("\(statistics.locations) locations, \(Int(rate.rounded())) updates/s")
            } else {
                notifier.status("waiting for the MQTT broker at \(address); \(statistics.locations) locations")
            }
        }
    }

    /// Reloads styles, rules and catalog on SIGHUP, without reconnecting.
    private func reloadOnHangup(_ pipeline: LivePipeline) async {
        for await _ in await UnixSignalsSequence(trapping: .sighup) {
            notifier.reloading()
            logger.info("reloading", metadata: ["config.file": "\(configPath)"])
            do {
                let newConfig = try LiveDataConfig.load(path: configPath)
                let changed = await pipeline.reload(newConfig)
                logger.info("reloaded", metadata: ["locations.changed": "\(changed)"])
                notifier.ready(status: "reloaded; \(changed) locations changed")
            } catch {
                for problem in error.errors { logger.error("\(problem)") }
                logger.error("the new config is not valid; still running the old one")
                notifier.ready(status: "reload failed; running the previous config")
            }
        }
    }
}
