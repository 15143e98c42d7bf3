import Mosquitto
import Synchronization

/// Where the broker's acknowledgements of the daemon's publications arrive, on the MQTT
/// client's network thread: each one's lag (from the update's arrival to the broker's
/// acknowledgement of the style it changed) goes into a histogram, and when the
/// ``Publisher`` stopped at a full window, the acknowledgement that brings the window down
/// to half of it wakes the pipeline to send more (one wake-up per half window, not one per
/// acknowledgement).
public final class OutputWindow: Sendable {
    /// Yields once each time the armed window has room again.
    let opened: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    /// In flight at or below this, a waiting publisher is woken; -1 while none waits.
    private let wakeBelow = Atomic<Int>(-1)
    private let lag: LatencyHistogram?

    /// A window whose acknowledgements' lag is not measured.
    public convenience init() { self.init(lag: nil) }

    /// - Parameter lag: the histogram of update-to-acknowledgement times.
    init(lag: LatencyHistogram?) {
        (opened, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.lag = lag
    }

    /// The client's ``AcknowledgementHandler``.
    @Sendable public func acknowledged(_ acknowledgement: MQTTAcknowledgement) {
        if let origin = acknowledgement.origin, let lag {
            lag.record(nanoseconds: acknowledgement.acknowledgedAt.nanoseconds(since: origin))
        }
        let below = wakeBelow.load(ordering: .relaxed)
        if below >= 0 && acknowledgement.inFlight <= below
            && wakeBelow.compareExchange(expected: below, desired: -1, ordering: .relaxed).exchanged
        {
            continuation.yield()
        }
    }

    /// The publisher stopped at a full window of `size`: wake it at half.
    func arm(window size: Int) { wakeBelow.store(size / 2, ordering: .relaxed) }

    func finish() { continuation.finish() }
}
