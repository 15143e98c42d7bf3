/// Lets a log line through at most once per interval and counts the ones held back, so
/// that a flood of bad input costs one line a second, not one per message.
struct RateLimitedLog {
    let interval: Duration
    private var last: ContinuousClock.Instant?
    private var suppressed = 0

    init(interval: Duration = .seconds(1)) {
        self.interval = interval
    }

    /// `nil` when this line is held back; otherwise how many were held back since the last
    /// one let through.
    mutating func admit(now: ContinuousClock.Instant = .now) -> Int? {
        if let last, now - last < interval {
            suppressed += 1
            return nil
        }
        defer { suppressed = 0 }
        last = now
        return suppressed
    }
}
