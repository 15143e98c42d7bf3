import AsyncAlgorithms
import Mosquitto
import ServiceLifecycle

/// Pings the systemd watchdog (at half its interval, at least every 5 s) and keeps
/// `STATUS=` current: locations and updates per second, or what it waits for.
struct WatchdogService: Service {
    let pipeline: LivePipeline
    let notifier: SystemdNotifier

    func run() async throws {
        let interval = min((notifier.watchdogInterval ?? .seconds(5)), .seconds(5))
        let address = pipeline.client.configuration.address
        var lastReceived = 0
        var last = ContinuousClock.now
        for await now in AsyncTimerSequence(interval: interval, clock: .continuous).cancelOnGracefulShutdown() {
            notifier.watchdog()
            let statistics = await pipeline.statistics
            let elapsed = now - last
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let rate = seconds > 0 ? Double(statistics.core.received - lastReceived) / seconds : 0
            lastReceived = statistics.core.received
            last = now
            if let fault = await pipeline.storageFault {
                notifier.status("\(fault); \(statistics.locations) locations")
            } else if pipeline.brokerState == .connected {
                notifier.status("\(statistics.locations) locations, \(Int(rate.rounded())) updates/s")
            } else {
                notifier.status("waiting for the MQTT broker at \(address); \(statistics.locations) locations")
            }
            // Not ready yet (the broker is away): the start goes on for as long as it waits,
            // each tick granting a little more, so that a hung start still times out.
            if !(await pipeline.isReady) { notifier.extendTimeout(interval * 3) }
        }
    }
}
