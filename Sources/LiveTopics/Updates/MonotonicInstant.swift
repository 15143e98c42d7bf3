#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An instant of the system's monotonic clock, in nanoseconds: the times taken on the hot
/// path (when an update arrived, when its style's acknowledgement was read), for the
/// latency figures.
///
/// Not `ContinuousClock.Instant`, a type of the standard library whose layout other modules
/// do not see: every copy of a value that held one (an incoming message, a change waiting
/// to be published, a publication's record and its acknowledgement) went through its value
/// witnesses, and every difference through a call and 128-bit divisions. This is one word.
public struct MonotonicInstant: Comparable, Hashable, Sendable {
    /// Nanoseconds since an arbitrary point (the system's start).
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    public static var now: MonotonicInstant {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return MonotonicInstant(nanoseconds: Int64(spec.tv_sec) &* 1_000_000_000 &+ Int64(spec.tv_nsec))
    }

    /// Nanoseconds from `earlier` to this.
    public func nanoseconds(since earlier: MonotonicInstant) -> Int64 { nanoseconds &- earlier.nanoseconds }

    public static func - (later: MonotonicInstant, earlier: MonotonicInstant) -> Duration {
        .nanoseconds(later.nanoseconds(since: earlier))
    }

    public static func + (instant: MonotonicInstant, duration: Duration) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: instant.nanoseconds &+ duration.nanoseconds)
    }

    public static func - (instant: MonotonicInstant, duration: Duration) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: instant.nanoseconds &- duration.nanoseconds)
    }

    public static func < (a: MonotonicInstant, b: MonotonicInstant) -> Bool { a.nanoseconds < b.nanoseconds }
}
