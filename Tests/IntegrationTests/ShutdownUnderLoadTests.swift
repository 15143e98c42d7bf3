import Foundation
import LiveDataTestSupport
import Mosquitto
import Testing

/// SIGTERM to `livedata serve` while updates stream in at QoS 1: every stop ends the
/// process within a bound, with everything it started ended and awaited, and nothing the
/// daemon acknowledged to the broker is lost (what it took before the stop is in its state
/// file or its journal; what it did not take, the broker keeps in its session).
@Suite("Shutdown under load", .timeLimit(.minutes(4)), .serialized)
struct ShutdownUnderLoadTests {
    @Test("SIGTERM three times in the middle of a stream: each stop exits 0 within 10 s after the pipeline ended, and every location holds its last value")
    func stopsUnderLoad() async throws {
        let updates = 60_000
        let locations = CrashRecoveryTests.floors * CrashRecoveryTests.perFloor
        let broker = try await MosquittoBroker.start()
        let crashes = CrashRecoveryTests()
        let daemons = DaemonTests()
        var daemon = try await daemons.startDaemon(port: broker.port, snapshotInterval: "300ms")
        #expect(await daemon.notify.wait(for: "READY=1"))
        let stream = CrashRecoveryTests.Stream()
        let publishing = Task { try await crashes.publish(stream, count: updates, locations: locations, broker: broker) }
        for stop in 1...3 {
            // Stopped while the stream goes on: at a quarter, a half and three quarters.
            let due = updates * stop / 4
            try await eventually("\(due) updates published", timeout: .seconds(60), every: .milliseconds(10)) {
                stream.published.load(ordering: .relaxed) >= due
            }
            let received = try await daemons.waitForMetric(daemon, "livedata_updates_received_total", atLeast: 1)
            #expect(received > 0, "the daemon takes updates when it is stopped")
            daemon.signal(SIGTERM)
            let signalled = ContinuousClock.now
            let ended = try await daemon.running.result(timeout: .seconds(20))
            let took = ContinuousClock.now - signalled
            print("shutdown under load: stop \(stop) at \(due) published, exited \(ended.status) after \(took)")
            #expect(ended.status == 0, "stderr: \(ended.standardError.suffix(3000))")
            #expect(took < .seconds(10), "the stop took \(took)")
            // The pipeline's service logs this once everything it started has ended.
            #expect(ended.standardError.contains("stopped"), "stderr: \(ended.standardError.suffix(2000))")
            daemon = try await daemons.startDaemon(port: broker.port, directory: daemon.directory, snapshotInterval: "300ms")
            #expect(await daemon.notify.wait(for: "READY=1", timeout: .seconds(60)), "stderr: \(daemon.running.standardError.suffix(2000))")
        }
        try await publishing.value
        let records = try await crashes.waitForLastValues(stream, locations: locations, port: daemon.httpPort)
        #expect(records.count == locations)
        try await daemons.stop(daemon)
    }
}
