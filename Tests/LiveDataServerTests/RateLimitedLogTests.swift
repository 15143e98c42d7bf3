import Testing

@testable import LiveDataServer

@Suite("Rate-limited log")
struct RateLimitedLogTests {
    @Test("one line per interval, with the count of those held back")
    func admits() {
        var log = RateLimitedLog(interval: .seconds(1))
        let start = ContinuousClock.now
        #expect(log.admit(now: start) == 0)
        #expect(log.admit(now: start + .milliseconds(10)) == nil)
        #expect(log.admit(now: start + .milliseconds(999)) == nil)
        #expect(log.admit(now: start + .seconds(1)) == 2)
        #expect(log.admit(now: start + .seconds(3)) == 0)
    }
}
