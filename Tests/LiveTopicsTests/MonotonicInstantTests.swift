import LiveTopics
import Testing

/// The hot path's instants and the conversion of durations to nanoseconds that the latency
/// figures use.
@Suite("Monotonic instants")
struct MonotonicInstantTests {
    @Test("differences, offsets and order in nanoseconds; the clock does not go back")
    func arithmetic() {
        let start = MonotonicInstant(nanoseconds: 5_000_000_000)
        let later = start + .milliseconds(1_500)
        #expect(later.nanoseconds == 6_500_000_000)
        #expect(later.nanoseconds(since: start) == 1_500_000_000)
        #expect(later - start == .milliseconds(1_500))
        #expect(start - later == .milliseconds(-1_500))
        #expect(later - .milliseconds(1_500) == start)
        #expect(start < later && !(later < start))
        let first = MonotonicInstant.now
        let second = MonotonicInstant.now
        #expect(second >= first && first.nanoseconds > 0)
    }

    @Test("a duration in whole nanoseconds, toward zero, below and beyond the 9.2 s that 64 bits of attoseconds hold")
    func nanoseconds() {
        #expect(Duration.nanoseconds(1_234).nanoseconds == 1_234)
        #expect(Duration.milliseconds(-250).nanoseconds == -250_000_000)
        #expect((Duration.nanoseconds(7) + Duration(secondsComponent: 0, attosecondsComponent: 999_999_999)).nanoseconds == 7)
        #expect((Duration.nanoseconds(-7) - Duration(secondsComponent: 0, attosecondsComponent: 999_999_999)).nanoseconds == -7)
        #expect(Duration.seconds(9).nanoseconds == 9_000_000_000)
        #expect(Duration.seconds(10).nanoseconds == 10_000_000_000)
        #expect((Duration.seconds(86_400 * 365) + .nanoseconds(3)).nanoseconds == 31_536_000_000_000_003)
        #expect(Duration.seconds(-20).nanoseconds == -20_000_000_000)
    }
}
