import LiveDataConfiguration
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

@testable import LiveDataServer

/// A backlog is handed to the pipeline a bounded batch at a time, so that what else waits
/// for it (the metrics, readiness, the watchdog's look) is not held behind ten thousand updates.
@Suite("Pipeline: a backlog in batches")
struct PipelineBatchesTests {
    @Test("while a backlog of thousands of updates is handled, calls on the pipeline are answered between its batches")
    func answeredBetweenSlices() async throws {
        let logger = Logger(label: "test")
        let config = try LiveDataConfig.parse(yaml: HTTPInterfaceTests.yaml, file: "test.yaml")
        let intake = try Intake(config: config, logger: logger)
        // Port 1 is never listened on: the client is built, not started.
        let client = try intake.makeClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: 1), logger: logger)
        let pipeline = LivePipeline(config: config, client: client, intake: intake, logger: logger)
        try await pipeline.start()
        await pipeline.stallProcessing()
        let running = Task { await pipeline.run() }
        let limit = intake.queue.batchLimit
        let count = 4 * limit + 100
        var pass = (0..<count).map {
            IntakeMessage(topic: "ds1/hq/B/F\($0 % 10)/R/loc-\($0)/occupancy", payload: Array(#"{"properties": {"nrOfPeople": "1"}}"#.utf8))
        }
        #expect(intake.queue.push(moving: &pass))
        // The run takes the first batch, and waits with it until resumed.
        try await eventually("the first batch to be taken") { intake.queue.statistics.depth == count - limit }
        let before = await pipeline.statistics.processed
        await pipeline.resumeProcessing()
        var seen: Set<Int> = []
        while true {
            let processed = await pipeline.statistics.processed - before
            seen.insert(processed)
            if processed >= count { break }
        }
        // Answered in the middle of the backlog, and only where a batch ends.
        let within = seen.filter { $0 > 0 && $0 < count }
        #expect(!within.isEmpty, "answered only with \(seen.sorted())")
        #expect(within.allSatisfy { $0 % limit == 0 }, "\(within.sorted())")
        intake.queue.close()
        await running.value
    }
}
