/// Tells a step of the wall clock (a `date -s`, a host without a clock source setting its
/// clock once the network is up) from its running. Between two readings the wall clock and
/// the monotonic clock advance alike, but for the slew of a time service (at most half a
/// millisecond a second): a difference larger than that is a step.
public struct ClockStepWatch: Sendable {
    private var last: (wall: LiveTimestamp, monotonic: MonotonicInstant)?

    public init() {}

    /// The smallest difference taken for a step, in milliseconds, and how much more a
    /// second between the readings (a slew over a long pause is not a step).
    static let toleranceMilliseconds: Int64 = 1_000
    static let tolerancePerSecond: Int64 = 1

    /// The step since the last reading, in milliseconds (positive when the clock went
    /// forward), or nil when it only ran.
    public mutating func step(wall: LiveTimestamp = .now, monotonic: MonotonicInstant = .now) -> Int64? {
        defer { last = (wall, monotonic) }
        guard let last else { return nil }
        let elapsed = monotonic.nanoseconds(since: last.monotonic) / 1_000_000
        let step = wall.millisecondsSince1970 - last.wall.millisecondsSince1970 - elapsed
        let tolerance = Self.toleranceMilliseconds + Self.tolerancePerSecond * elapsed / 1_000
        return abs(step) > tolerance ? step : nil
    }
}
