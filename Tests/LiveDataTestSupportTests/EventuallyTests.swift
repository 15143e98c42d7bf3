import LiveDataTestSupport
import Synchronization
import Testing

/// `eventually` is what most waits of the suite stand on: a condition that never holds must
/// fail the test, and say what was awaited and what was last seen.
@Suite("eventually")
struct EventuallyTests {
    @Test("a condition that comes to hold passes, polled until it does")
    func holds() async throws {
        let polls = Atomic(0)
        let held = try await eventually("the third poll", timeout: .seconds(120), every: .milliseconds(1)) {
            polls.add(1, ordering: .relaxed).newValue >= 3
        }
        #expect(held)
        #expect(polls.load(ordering: .relaxed) == 3)
        let value = try await eventually("a count of 5", timeout: .seconds(120), observing: { polls.add(1, ordering: .relaxed).newValue }, until: { $0 >= 5 })
        #expect(value == 5)
    }

    @Test("a condition that never holds records one issue that names what was awaited, after the timeout")
    func timesOut() async throws {
        let started = ContinuousClock.now
        var held = true
        try await withKnownIssue {
            held = try await eventually("the moon", timeout: .milliseconds(100)) { false }
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("waiting for the moon") }
        }
        #expect(!held)
        #expect(ContinuousClock.now - started >= .milliseconds(100))
    }

    @Test("on timeout, the last value observed is in the issue")
    func lastValue() async throws {
        let polls = Atomic(0)
        var last = 0
        try await withKnownIssue {
            last = try await eventually(
                "ten polls", timeout: .milliseconds(50), every: .milliseconds(1),
                observing: { polls.add(1, ordering: .relaxed).newValue }, until: { _ in false })
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("waiting for ten polls; last observed: \(polls.load(ordering: .relaxed))") }
        }
        #expect(last == polls.load(ordering: .relaxed) && last > 1)
    }

    @Test("what the condition throws ends the wait")
    func throwsThrough() async throws {
        struct Broken: Error {}
        await #expect(throws: Broken.self) {
            try await eventually("a condition that throws") { throw Broken() }
        }
    }
}
