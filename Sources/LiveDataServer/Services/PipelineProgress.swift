/// Whether the pipeline has moved since the watchdog last looked: the systemd watchdog is
/// pinged only then, so that a daemon whose pipeline is stuck stops pinging and systemd
/// restarts it (`WatchdogSec=`), instead of one that pings while it processes nothing.
///
/// It moved when it took updates or a convergence read more of the broker's retained
/// messages since the last look; it is idle, which is fine too, when no update waits for
/// it. Updates that wait while none is taken is the one thing a healthy pipeline never
/// shows for a whole watchdog interval (a batch takes milliseconds).
struct PipelineProgress {
    struct Reading: Equatable {
        /// Updates handed to the core so far.
        var processed: Int
        /// Updates waiting in the intake queue.
        var waiting: Int
        /// Retained messages read by convergences so far, the running one's included.
        var convergenceRead: Int
    }

    private var last: Reading?

    /// Takes the next reading: `true` when the pipeline moved or had nothing to do since
    /// the last one (ping), `false` when updates waited and nothing moved (withhold).
    mutating func admits(_ reading: Reading) -> Bool {
        defer { last = reading }
        guard let last else { return true }
        return reading.waiting == 0 || reading.processed != last.processed || reading.convergenceRead != last.convergenceRead
    }
}

extension PipelineProgress.Reading {
    init(_ statistics: LivePipeline.Statistics) {
        self.init(
            processed: statistics.processed, waiting: statistics.intake.queueDepth, convergenceRead: statistics.convergenceRead)
    }
}
