import Testing

@testable import Mosquitto

/// A pace held by reference, so that `#expect` can call its mutating method.
private final class Pace {
    var pace = PassPace()

    func decides(_ counts: PassPace.Counts, scale: Double, afterRelaxedPause: Bool) -> Bool {
        pace.keepsShort(counts, scale: scale, afterRelaxedPause: afterRelaxedPause)
    }
}

/// The network loop's choice between the short and the relaxed pass interval.
@Suite("Pass pace")
struct PassPaceTests {
    /// Counts of a pass: a window of 1,000 each way unless told.
    func counts(read: Int = 0, acknowledged: Int = 0, inFlight: Int = 0, readWindow: Int = 1000, sendWindow: Int = 1000) -> PassPace.Counts {
        PassPace.Counts(read: read, acknowledged: acknowledged, inFlight: inFlight, readWindow: readWindow, sendWindow: sendWindow)
    }

    @Test("a steady stream with room in the windows goes relaxed after one short pass, and stays relaxed while relaxed passes carry more")
    func steadyStream() {
        let pace = Pace()
        // Traffic with nothing to compare a relaxed pass with: a short pass first.
        #expect(pace.decides(counts(read: 30), scale: 5, afterRelaxedPause: true))
        #expect(!pace.decides(counts(read: 30), scale: 5, afterRelaxedPause: false))
        for _ in 0..<10 {
            #expect(!pace.decides(counts(read: 150), scale: 1, afterRelaxedPause: true))
        }
    }

    @Test("a connection that only publishes, acknowledged at a pace the window holds, goes relaxed; one with nothing at all too")
    func publisherOnly() {
        let pace = Pace()
        #expect(!pace.decides(counts(acknowledged: 35, inFlight: 100), scale: 5, afterRelaxedPause: false))
        #expect(!pace.decides(counts(acknowledged: 175, inFlight: 100), scale: 1, afterRelaxedPause: true))
        let idle = Pace()
        #expect(!idle.decides(counts(), scale: 0.001, afterRelaxedPause: false))
    }

    @Test("a window that the relaxed interval would fill halfway keeps the short one: messages read, acknowledgements, or in flight")
    func windowNearFull() {
        // Mosquitto's default window of 20: 15 acknowledgements a 1 ms pass would be 75 in 5 ms.
        let sends = Pace()
        #expect(sends.decides(counts(acknowledged: 15, inFlight: 5, sendWindow: 20), scale: 5, afterRelaxedPause: false))
        // Half the window in flight.
        let inFlight = Pace()
        #expect(inFlight.decides(counts(inFlight: 10, sendWindow: 20), scale: 5, afterRelaxedPause: false))
        #expect(!inFlight.decides(counts(inFlight: 9, sendWindow: 20), scale: 1, afterRelaxedPause: false))
        // A receive window of 1,000: 100 messages a 1 ms pass would be 500 in 5 ms.
        let reads = Pace()
        #expect(reads.decides(counts(read: 100), scale: 5, afterRelaxedPause: false))
        #expect(!reads.decides(counts(read: 99), scale: 5, afterRelaxedPause: false))
    }

    @Test("traffic at the pace of the passes (one message in flight, or a publisher waiting for each acknowledgement) holds the short interval, then a relaxed pass looks again")
    func pacedByPasses() {
        for paced in [counts(read: 1, readWindow: 20), counts(acknowledged: 1, inFlight: 0, sendWindow: 20)] {
            let pace = Pace()
            #expect(!pace.decides(paced, scale: 5, afterRelaxedPause: false))
            // A relaxed pass carried no more: held for the next passes.
            #expect(pace.decides(paced, scale: 1, afterRelaxedPause: true))
            for _ in 1..<PassPace.heldPasses {
                #expect(pace.decides(paced, scale: 5, afterRelaxedPause: false))
            }
            // Then relaxed once more, to look again.
            #expect(!pace.decides(paced, scale: 5, afterRelaxedPause: false))
        }
    }

    @Test("a relaxed pass that carries less than a burst's short pass holds the short interval until a short pass sets the pace again")
    func afterBurst() {
        let pace = Pace()
        #expect(pace.decides(counts(read: 400), scale: 5, afterRelaxedPause: false))
        #expect(pace.decides(counts(read: 150), scale: 1, afterRelaxedPause: true))
        for _ in 1..<PassPace.heldPasses {
            _ = pace.decides(counts(read: 30), scale: 5, afterRelaxedPause: false)
        }
        #expect(!pace.decides(counts(read: 30), scale: 5, afterRelaxedPause: false))
        #expect(!pace.decides(counts(read: 150), scale: 1, afterRelaxedPause: true))
    }
}
