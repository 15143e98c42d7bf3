import LiveState
import LiveTopics
import Testing

/// `output.minInterval`: the first publication of a topic at once, the last of an interval
/// at its end, none lost at the end.
@Suite("Publish coalescing")
struct PublishCoalescerTests {
    let start = MonotonicInstant.now

    func publication(_ topic: String, _ text: String) -> Publication {
        Publication(topic: topic, payload: Array(text.utf8), retain: true)
    }

    func at(_ milliseconds: Int) -> MonotonicInstant { start + .milliseconds(milliseconds) }

    func admit(_ coalescer: inout PublishCoalescer, _ publication: Publication, _ now: MonotonicInstant) -> Bool {
        coalescer.admit(publication, now: now)
    }

    func due(_ coalescer: inout PublishCoalescer, _ now: MonotonicInstant) -> [Publication] {
        coalescer.due(now: now)
    }

    @Test("five changes within the interval: the first at once, the last when it ends, three never sent")
    func leadingAndTrailingEdge() {
        var coalescer = PublishCoalescer(interval: .milliseconds(100))
        #expect(admit(&coalescer, publication("a", "1"), at(0)))
        for (index, time) in [10, 20, 30, 40].enumerated() {
            #expect(!admit(&coalescer, publication("a", "\(index + 2)"), at(time)))
        }
        #expect(due(&coalescer, at(99)).isEmpty)
        let trailing = due(&coalescer, at(100))
        #expect(trailing.map { String(decoding: $0.payload, as: UTF8.self) } == ["5"])
        #expect(coalescer.coalesced == 3)
        #expect(coalescer.waitingCount == 0)
        // The trailing send starts the next interval.
        #expect(!admit(&coalescer, publication("a", "6"), at(150)))
        #expect(due(&coalescer, at(199)).isEmpty)
        #expect(due(&coalescer, at(200)).count == 1)
        // Quiet for an interval: the next goes out at once again.
        #expect(admit(&coalescer, publication("a", "7"), at(400)))
    }

    @Test("topics are independent")
    func topicsAreIndependent() {
        var coalescer = PublishCoalescer(interval: .milliseconds(100))
        #expect(admit(&coalescer, publication("a", "1"), at(0)))
        #expect(admit(&coalescer, publication("b", "1"), at(10)))
        #expect(!admit(&coalescer, publication("a", "2"), at(20)))
        #expect(!admit(&coalescer, publication("b", "2"), at(30)))
        #expect(due(&coalescer, at(105)).map(\.topic) == ["a"])
        #expect(due(&coalescer, at(110)).map(\.topic) == ["b"])
    }

    @Test("a cleared topic drops what waits for it; takeAll sends everything that waits")
    func dropAndTakeAll() {
        var coalescer = PublishCoalescer(interval: .seconds(10))
        _ = admit(&coalescer, publication("a", "1"), at(0))
        _ = admit(&coalescer, publication("a", "2"), at(1))
        coalescer.drop(topic: "a")
        #expect(due(&coalescer, at(20_000)).isEmpty)
        _ = admit(&coalescer, publication("b", "1"), at(0))
        _ = admit(&coalescer, publication("b", "2"), at(1))
        _ = admit(&coalescer, publication("c", "1"), at(2))
        let all = coalescer.takeAll(now: at(3))
        #expect(all.map { "\($0.topic)\(String(decoding: $0.payload, as: UTF8.self))" } == ["b2"])
        #expect(coalescer.waitingCount == 0)
    }

    @Test("the table of recent topics is pruned once an interval, also when nothing waits: bounded by the rate, not by the topics ever seen")
    func pruned() {
        var coalescer = PublishCoalescer(interval: .milliseconds(10))
        for index in 0..<20_000 { #expect(admit(&coalescer, publication("t\(index)", "x"), at(0))) }
        #expect(coalescer.waitingCount == 0)
        #expect(coalescer.trackedCount == 20_000)
        _ = due(&coalescer, at(5))
        #expect(coalescer.trackedCount == 20_000)
        _ = due(&coalescer, at(1000))
        #expect(coalescer.trackedCount == 0)
        // Long after: every topic is new again.
        for index in 0..<20_000 { #expect(admit(&coalescer, publication("t\(index)", "y"), at(2000))) }
    }
}
