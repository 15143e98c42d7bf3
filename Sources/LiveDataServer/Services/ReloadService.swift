import LiveDataConfiguration
import Logging
import ServiceLifecycle
import UnixSignals

/// Reloads styles, rules, catalog and criteria on SIGHUP, without reconnecting; a config
/// that is not valid is logged and the old one keeps running.
struct ReloadService: Service {
    let pipeline: LivePipeline
    let configPath: String
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
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
