import CMalloc
import Foundation
import LiveDataConfiguration
import LiveState
import LiveStatePersistence
import Logging
import Mosquitto
import ServiceLifecycle

/// The daemon, wired: the client and pipeline are built before any service starts, then
/// each service gets what it needs (no global handle):
/// - ``PipelineService``: restore the state and replay the journal, connect, subscribe,
///   converge, READY=1, process updates; on shutdown publish `offline`, disconnect and write
///   the store;
/// - ``WatchdogService``: systemd watchdog pings and `STATUS=` lines;
/// - ``ReloadService``: SIGHUP reloads styles, rules and criteria;
/// - the HTTP server.
///
/// A ServiceGroup shuts its services down in reverse order: HTTP first, the pipeline last.
public struct LiveDataDaemon: Sendable {
    public let pipeline: LivePipeline
    public let metrics: DaemonMetrics
    public let services: [any Service]

    /// Builds everything; starts nothing (the state is restored by ``PipelineService``, inside
    /// the service group, so that SIGTERM during a long start stops it cleanly).
    /// - Parameter reconnect: the waits between attempts to connect (tests); by default half
    ///   a second, doubling up to `broker.reconnectMaximum`.
    /// - Throws: ``StartFailure`` when the intake journal cannot be opened; when the broker
    ///   or HTTP settings are not usable.
    public init(
        config: LiveDataConfig, configPath: String, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(),
        reconnect: MQTTBackoff? = nil
    ) async throws {
        let topics = config.outputFormat
        let files: [(String?, String)] = [
            (config.broker.tls?.caFile, "broker.tls.caFile"), (config.broker.tls?.certFile, "broker.tls.certFile"),
            (config.broker.tls?.keyFile, "broker.tls.keyFile"),
            // The password file is read only for a username, and the environment overrides it.
            (config.broker.username != nil && config.broker.passwordFromEnvironment == nil ? config.broker.passwordFile : nil, "broker.passwordFile"),
        ]
        for case (let path?, let key) in files { try StartFailure.checkReadable(path, key: key) }
        var mqtt = try config.broker.mqttConfiguration(topics: topics, payloadLimit: config.limits.payload.size)
        mqtt.reconnect = reconnect ?? MQTTBackoff(initial: .milliseconds(500), maximum: config.broker.reconnectMaximum)
        let intake: Intake
        do {
            intake = try Intake(config: config, logger: logger)
        } catch let failure as IntakeJournal.Failure {
            throw StartFailure.journal(path: failure.path, cause: String(cString: strerror(failure.code)))
        }
        let metrics = DaemonMetrics()
        let window = OutputWindow(lag: metrics.publishLag)
        // The acknowledgements that open the window come on the connection that publishes.
        let output: MQTTClient?
        if config.broker.outputConnection {
            output = try MQTTClient(
                configuration: config.broker.outputMQTTConfiguration(input: mqtt), logger: logger,
                onAcknowledged: { window.acknowledged($0) })
        } else {
            output = nil
        }
        let client = try intake.makeClient(configuration: mqtt, logger: logger, window: output == nil ? window : nil)
        logger.info(
            "starting", metadata: ["mqtt.broker": "\(mqtt.address)", "config.file": "\(configPath)", "heap": "\(Self.heapAllocator)"])
        for warning in config.warnings { logger.warning("\(warning)") }
        let pipeline = LivePipeline(
            config: config, client: client, output: output, intake: intake, metrics: metrics, logger: logger, window: window)
        let httpListening = StartupGate()
        let http = try HTTPInterface.application(
            settings: config.http, queries: LiveQueries(pipeline), metrics: metrics, logger: logger, onListening: { await httpListening.open() })
        self.pipeline = pipeline
        self.metrics = metrics
        services = [
            PipelineService(
                pipeline: pipeline, notifier: notifier, logger: logger, waitFor: httpListening, storePath: config.store.path),
            WatchdogService(pipeline: pipeline, notifier: notifier, logger: logger),
            ReloadService(pipeline: pipeline, configPath: configPath, notifier: notifier, logger: logger),
            http,
        ]
    }
}

extension LiveDataDaemon {
    /// Which allocator serves the process's heap: `mimalloc 2.0.9` when the executable links
    /// it (as `livedata` does: the C library's per-thread caches suit the daemon's hand-offs
    /// between threads less well; docs/performance.md), else `glibc`.
    public static var heapAllocator: String { heapAllocator(mimallocVersion: Int(livedata_mimalloc_version())) }

    /// `mimalloc 2.0.9` for 209 (mimalloc's `mi_version()`), `glibc` for 0.
    static func heapAllocator(mimallocVersion version: Int) -> String {
        version > 0 ? "mimalloc \(version / 100).\(version / 10 % 10).\(version % 10)" : "glibc"
    }
}
