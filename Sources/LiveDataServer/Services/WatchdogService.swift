import AsyncAlgorithms
import Logging
import Mosquitto
import ServiceLifecycle

/// Pings the systemd watchdog (at half its interval, at least every 5 s) while the pipeline
/// shows progress (``PipelineProgress``), and keeps `STATUS=` current: locations and
/// updates per second, the convergence under way, or what it waits for.
struct WatchdogService: Service {
    let pipeline: LivePipeline
    let notifier: SystemdNotifier
    var logger: Logger?

    func run() async throws {
        let interval = min((notifier.watchdogInterval ?? .seconds(5)), .seconds(5))
        let address = pipeline.client.configuration.address
        var lastReceived = 0
        var last = ContinuousClock.now
        var progress = PipelineProgress()
        var withheld = false
        var startSteps = -1
        for await now in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
            // The restore and the replay keep the pipeline busy: their progress is read
            // without it. Each step forward grants the start a little more time, so that a
            // start that moves is never killed by `TimeoutStartSec=` and one that is stuck is.
            let phase = pipeline.startProgress.phase
            if phase != .started {
                notifier.status("\(phase)")
                if phase.steps != startSteps {
                    startSteps = phase.steps
                    notifier.extendTimeout(interval * 3)
                    notifier.watchdog()
                }
                last = now
                continue
            }
            // A pipeline that never answers holds this up too: no ping either.
            let statistics = await pipeline.statistics
            let moving = progress.admits(PipelineProgress.Reading(statistics))
            if moving {
                notifier.watchdog()
                if withheld { logger?.notice("the pipeline moves again: watchdog pings resumed") }
                withheld = false
            } else if !withheld {
                withheld = true
                logger?.critical(
                    "the pipeline has taken no update for \(interval) while \(statistics.intake.queueDepth) wait: withholding the watchdog ping, so that systemd restarts the daemon if it stays stuck")
            }
            let elapsed = now - last
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(statistics.core.received - lastReceived) / seconds : 0
            lastReceived = statistics.core.received
            last = now
            let ready = await pipeline.isReady
            let replica = await pipeline.replicaRole
            let role = replica.map { "\($0.summary); " } ?? ""
            if let fault = await pipeline.storageFault {
                notifier.status("\(fault); \(statistics.locations) locations")
            } else if pipeline.brokerState != .connected {
                notifier.status("waiting for the MQTT broker at \(address); \(statistics.locations) locations")
            } else if let fault = await pipeline.convergenceFault {
                notifier.status("\(fault); \(statistics.locations) locations")
            } else if let replica, !replica.joined {
                notifier.status("\(role)copying a peer's state before it may take over; \(statistics.locations) locations")
            } else if statistics.convergenceProgress > 0 || !ready {
                notifier.status(
                    "\(role)converging with the broker: \(statistics.convergenceProgress) retained messages read; \(statistics.locations) locations, \(Int(rate.rounded())) updates/s")
            } else {
                notifier.status("\(role)\(statistics.locations) locations, \(Int(rate.rounded())) updates/s")
            }
            // Not ready yet (the broker is away, or the first convergence runs): the start
            // goes on for as long as it moves or waits with nothing to do, each tick granting
            // a little more, so that a stuck start still times out.
            if !ready && moving { notifier.extendTimeout(interval * 3) }
        }
    }
}
