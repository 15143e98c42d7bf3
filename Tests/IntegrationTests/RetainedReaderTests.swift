import LiveDataTestSupport
import Logging
import Mosquitto
import Synchronization
import Testing

@testable import LiveDataServer

/// The convergence's reader of retained messages, against a real broker.
@Suite("Retained reader", .timeLimit(.minutes(2)))
struct RetainedReaderTests {
    let logger = Logger(label: "test")

    @Test("a slow read of more retained messages than its queue holds gets every one and ends, live publications going on meanwhile")
    func retainedOnly() async throws {
        let broker = try await MosquittoBroker.start()
        let retained = 20_000
        let writer = try await retainedStyles(retained, at: broker, syncEvery: 500)
        // Live publications under the read's filter while it runs, as a daemon's are during a
        // convergence that publishes again what it finds behind. Those that reach the broker
        // after the end marker come after it, and after the read: it never waits for them.
        let publishing = Atomic<Bool>(true)
        let sent = Atomic<Int>(0)
        let live = Task {
            while publishing.load(ordering: .relaxed) {
                let number = sent.load(ordering: .relaxed)
                if (try? writer.send("p/style/ds/v/b/f/r/live-\(number % 100)", payload: Array("{}".utf8), qos: .atLeastOnce)) != nil {
                    sent.store(number + 1, ordering: .relaxed)
                    if number % 10 == 9 { await Task.yield() }
                } else {
                    // The publisher's window is full: a pause for its acknowledgements, pacing
                    // the sender.
                    try? await Task.sleep(for: .milliseconds(1))
                }
            }
        }
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "reader-test"
        let reader = try RetainedReader(configuration: configuration, prefix: "p", filters: ["p/style/#"], logger: logger)
        var retainedRead = 0
        var liveRead = 0
        var batches = 0
        // A slow reader (a daemon busy with a backlog): after each batch, a thousand more live
        // publications before the next, however loaded the machine.
        try await reader.read { batch in
            for message in batch { if message.retain { retainedRead += 1 } else { liveRead += 1 } }
            batches += 1
            let due = sent.load(ordering: .relaxed) + 1_000
            // Waits for the live publisher (pacing, not a synchronisation with the reader).
            while sent.load(ordering: .relaxed) < due { try? await Task.sleep(for: .milliseconds(1)) }
        }
        publishing.store(false, ordering: .relaxed)
        await live.value
        let published = sent.load(ordering: .relaxed)
        print("retained reader: \(retainedRead) retained and \(liveRead) live read in \(batches) batches; \(published) live published")
        #expect(retainedRead == retained)
        // Live messages end up in the read only when they reach the broker between the
        // subscription and the end marker: a few, of the thousands published meanwhile.
        #expect(published >= batches * 1_000)
        #expect(liveRead * 4 < published, "\(liveRead) live messages read of \(published) published over \(batches) batches")
        // The marker came over the reader's second connection, which sends nothing else: on
        // the first it would wait at the broker behind every acknowledgement of the read.
        let log = broker.log
        #expect(log.contains("Received PUBLISH from reader-test-converge-2 (d0, q1, r0, m1, 'p/converge/reader-test-converge'"))
        #expect(!log.contains("Received PUBLISH from reader-test-converge ("))
        await writer.disconnect()
    }

    @Test("an end marker the broker dropped goes again once nothing arrives: the read ends with every retained message, well before its quiet timeout")
    func markerAgain() async throws {
        let broker = try await MosquittoBroker.start()
        let retained = 500
        let writer = try await retainedStyles(retained, at: broker, syncEvery: 100)
        var configuration = MQTTConfiguration.test(port: broker.port)
        configuration.clientID = "reader-marker-test"
        let reader = try RetainedReader(
            configuration: configuration, prefix: "p", filters: ["p/style/#"], logger: logger, losesFirstMarker: true)
        let started = ContinuousClock.now
        var read = 0
        try await reader.read(quietTimeout: .seconds(10)) { batch in read += batch.count(where: \.retain) }
        let elapsed = ContinuousClock.now - started
        #expect(read == retained)
        #expect(reader.markersSentAgain >= 1)
        #expect(elapsed < .seconds(8), "ended \(elapsed) after it began: by the marker sent again, not the quiet timeout")
        await writer.disconnect()
    }

    /// A connected client that has left `count` retained styles under `p/style/` at the
    /// broker, waiting for the broker's acknowledgement every `syncEvery` of them.
    func retainedStyles(_ count: Int, at broker: MosquittoBroker, syncEvery: Int) async throws -> MQTTClient {
        let writer = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await writer.connect()
        for number in 0..<count {
            try writer.send("p/style/ds/v/b/f/r/loc-\(number)", payload: Array("{}".utf8), qos: .atLeastOnce, retain: true)
            if number % syncEvery == syncEvery - 1 { try await writer.publish("p/sync", payload: [], qos: .atLeastOnce) }
        }
        try await writer.publish("p/sync", payload: [], qos: .atLeastOnce)
        return writer
    }
}
