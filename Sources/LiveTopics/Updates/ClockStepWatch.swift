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

    /// A step seen: by how much, and which receipt times were taken after it.
    public struct Step: Sendable, Equatable {
        /// Positive when the clock went forward.
        public var milliseconds: Int64
        /// Receipt times in this range were taken on the stepped clock (between the last
        /// reading and this one, with a margin for readings shared by a pass of messages);
        /// those before or after it, on the clock before the step.
        public var stampedAfter: ClosedRange<LiveTimestamp>
    }

    /// The margin around the time since the last reading, in milliseconds.
    static let marginMilliseconds: Int64 = 100

    /// The step since the last reading, or nil when the clock only ran.
    public mutating func step(wall: LiveTimestamp = .now, monotonic: MonotonicInstant = .now) -> Step? {
        defer { last = (wall, monotonic) }
        guard let last else { return nil }
        let elapsed = monotonic.nanoseconds(since: last.monotonic) / 1_000_000
        let step = wall.millisecondsSince1970 - last.wall.millisecondsSince1970 - elapsed
        let tolerance = Self.toleranceMilliseconds + Self.tolerancePerSecond * elapsed / 1_000
        guard abs(step) > tolerance else { return nil }
        let now = wall.millisecondsSince1970
        return Step(
            milliseconds: step,
            stampedAfter: LiveTimestamp(millisecondsSince1970: now - elapsed - Self.marginMilliseconds)...LiveTimestamp(
                millisecondsSince1970: now + Self.marginMilliseconds))
    }
}
