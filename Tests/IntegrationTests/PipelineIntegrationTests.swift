import DisplayRules
import Foundation
import LiveDataConfiguration
import LiveDataServer
import LiveDataTestSupport
import LiveState
import LiveTopics
import Logging
import Mosquitto
import Testing

/// The pipeline in-process against a real broker: updates in, retained derived changes out.
@Suite("Live pipeline against a real broker", .timeLimit(.minutes(2)))
struct PipelineIntegrationTests {
    let logger = Logger(label: "test")

    static let yaml = """
        styles:
          main: {visible: true, polygonFillColor: "#E0E0E0"}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", label: "{nrOfPeople}/{capacity}"}
            legend: Occupied
            layer: occupancy
          - name: vacant
            domain: occupancy
            when: nrOfPeople == 0
            style: {polygonFillColor: "#4CAF50"}
            legend: Vacant
            layer: occupancy
        output: {summaryInterval: 200ms}
        """

    func config(port: Int, store: String = ":memory:") throws -> LiveDataConfig {
        var config = try LiveDataConfig.parse(yaml: Self.yaml, file: "test.yaml")
        config.broker.port = port
        config.broker.clientId = "livedata-test-\(UUID().uuidString.prefix(8))"
        config.store.path = store
        return config
    }

    /// A pipeline serving in the background, and a way to stop it.
    func startPipeline(_ config: LiveDataConfig) async throws -> (LivePipeline, MQTTClient, Task<Void, Never>) {
        var mqtt = try config.broker.mqttConfiguration(topics: OutputFormat(prefix: config.output.prefix))
        mqtt.reconnect = MQTTBackoff(initial: .milliseconds(100), maximum: .milliseconds(500), jitter: 0)
        let intake = try Intake(config: config, logger: logger)
        let client = try intake.makeClient(configuration: mqtt, logger: logger)
        let pipeline = LivePipeline(config: config, client: client, intake: intake, logger: logger)
        try await pipeline.start()
        try await client.connect()
        try await pipeline.subscribe()
        let serving = Task { await pipeline.serve(tickInterval: .milliseconds(50)) }
        // Ready: converged with the broker (a change made before is published by the
        // convergence, under the next version).
        await pipeline.waitUntilConverged()
        return (pipeline, client, serving)
    }

    func observer(_ broker: MosquittoBroker, _ filter: String) async throws -> (MQTTClient, Inbox<MQTTMessage>) {
        let client = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await client.connect()
        let inbox = await Inbox.collecting(client.messages)
        try await client.subscribe(filter)
        return (client, inbox)
    }

    func publish(_ client: MQTTClient, _ location: String, people: Int, capacity: Int = 8) async throws {
        try await client.publish(
            "ds1/hq/B/F3/R7/\(location)/occupancy",
            text: #"{"timestamp": \#(LiveTimestamp.now.millisecondsSince1970), "properties": {"nrOfPeople": "\#(people)", "capacity": "\#(capacity)"}}"#,
            qos: .atLeastOnce)
    }

    func styles(_ inbox: Inbox<MQTTMessage>) async -> [[String: Any]] {
        await inbox.items.filter { $0.topic.hasPrefix("livedata/style/") }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any]
        }
    }

    @Test("output.minInterval: a room that changes five times within it publishes the first style at once and the last when it ends")
    func coalescing() async throws {
        let broker = try await MosquittoBroker.start()
        var config = try config(port: broker.port)
        // Long enough that the burst below lands within it on a loaded machine running the
        // whole suite (at 400 ms it once spread over two intervals: 1/8, 2/8, 5/8).
        let interval = Duration.seconds(2)
        config.output.minInterval = interval
        let (pipeline, client, serving) = try await startPipeline(config)
        let (watcher, inbox) = try await observer(broker, "livedata/style/#")
        let (sensor, _) = try await observer(broker, "unused")

        let started = ContinuousClock.now
        // In one burst (not each after the last one's PUBACK): on a loaded machine five
        // round trips can outlast the interval.
        for people in 1...5 {
            try sensor.send(
                "ds1/hq/B/F3/R7/room-7/occupancy",
                payload: Array(#"{"timestamp": \#(LiveTimestamp.now.millisecondsSince1970), "properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#.utf8))
        }
        #expect(await inbox.wait { items in items.count >= 2 })
        let arrived = ContinuousClock.now - started
        // Longer than an interval: a third style, had the burst spread over two, is seen. The
        // interval passing is what is tested; the pause waits for no event.
        try await Task.sleep(for: interval + .milliseconds(200))
        let labels = await styles(inbox).compactMap { ($0["style"] as? [String: Any])?["label"] as? String }
        #expect(labels == ["1/8", "5/8"])
        // The last one waited for the interval's end, and was not held much longer (the
        // bound leaves room for a loaded machine running the whole suite).
        #expect(arrived >= interval - .milliseconds(50) && arrived < interval + .milliseconds(4_600), "\(arrived)")
        let statistics = await pipeline.statistics
        #expect(statistics.published == 2)
        #expect(statistics.coalesced == 3)
        // A location that changes once publishes at once.
        let before = ContinuousClock.now
        try await publish(sensor, "room-8", people: 2)
        #expect(await inbox.wait { items in items.contains { $0.topic.hasSuffix("/room-8") } })
        // Held back, it would take the whole interval.
        #expect(ContinuousClock.now - before < interval / 2)

        // A change still waiting at shutdown is published before the daemon goes.
        let applied = await pipeline.statistics.store.applied
        try await publish(sensor, "room-8", people: 3)
        try await eventually("the pipeline to apply the change") { await pipeline.statistics.store.applied > applied }
        await pipeline.publishOffline()
        #expect(await inbox.wait { items in items.contains { $0.topic.hasSuffix("/room-8") && $0.payloadString.contains("3/8") } })
        await client.disconnect()
        await serving.value
        await watcher.disconnect()
        await sensor.disconnect()
    }

    @Test("updates become retained derived changes; an update that changes nothing publishes nothing; a layer toggle re-publishes")
    func derivedChanges() async throws {
        let broker = try await MosquittoBroker.start()
        let (pipeline, client, serving) = try await startPipeline(try config(port: broker.port))
        let (watcher, inbox) = try await observer(broker, "livedata/#")
        let (sensor, _) = try await observer(broker, "unused")

        try await publish(sensor, "room-7", people: 3)
        #expect(await inbox.wait { items in items.contains { $0.topic == "livedata/style/ds1/hq/B/F3/R7/room-7" } })
        var seen = await styles(inbox)
        #expect(seen.count == 1)
        #expect((seen.first?["style"] as? [String: Any])?["label"] as? String == "3/8")
        #expect(seen.first?["changed"] as? [String] == ["visible", "label", "polygonFillColor", "layer"])
        #expect(seen.first?["version"] as? Int == 1)

        // The same value again: nothing is published (checked after a later change arrives).
        try await publish(sensor, "room-7", people: 3)
        try await publish(sensor, "room-7", people: 0)
        #expect(await inbox.wait { items in items.filter { $0.topic.hasPrefix("livedata/style/") }.count >= 2 })
        // A style for the repeated value would have come ahead of this one (one location's
        // styles leave in order), and the checks below would see it.
        seen = await styles(inbox)
        #expect(seen.count == 2)
        #expect(seen.last?["changed"] as? [String] == ["label", "polygonFillColor"])
        #expect(seen.last?["version"] as? Int == 2)
        #expect(await pipeline.statistics.store.applied == 3)

        // A layer toggle re-publishes the location as not visible.
        #expect(await pipeline.setLayer("occupancy", hidden: true) == 1)
        #expect(await inbox.wait { items in items.filter { $0.topic.hasPrefix("livedata/style/") }.count >= 3 })
        let hidden = await styles(inbox).last
        #expect((hidden?["style"] as? [String: Any])?["visible"] as? Bool == false)
        #expect(hidden?["changed"] as? [String] == ["visible"])

        // Summaries, the legend and the status are there too.
        #expect(await inbox.wait { items in items.contains { $0.topic == "livedata/summary/ds1/hq/B/F3" } })
        #expect(await inbox.items.contains { $0.topic == "livedata/summary/ds1/hq/B" })
        #expect(await inbox.items.contains { $0.topic == "livedata/legend/ds1" })
        #expect(await inbox.items.contains { $0.topic == "livedata/status" && $0.payloadString == "online" })

        // A map client that subscribes later gets the current state at once, retained.
        let (late, lateInbox) = try await observer(broker, "livedata/style/#")
        let retained = await lateInbox.wait(forCount: 1)
        #expect(retained.first?.retain == true)
        #expect(retained.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }?["version"] as? Int == 3)

        // A bad payload is dropped and counted; the pipeline goes on.
        try await sensor.publish("ds1/hq/B/F3/R7/room-7/occupancy", text: "{oops", qos: .atLeastOnce)
        try await publish(sensor, "room-8", people: 1)
        #expect(await inbox.wait { items in items.contains { $0.topic == "livedata/style/ds1/hq/B/F3/R7/room-8" } })
        #expect(await pipeline.statistics.core.rejected[.badPayload] == 1)

        for other in [watcher, sensor, late] { await other.disconnect() }
        await client.disconnect()
        await serving.value
    }

    @Test("a restart restores the state from the SQLite file and re-publishes nothing unchanged")
    func restart() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try TestDirectory.make(prefix: "state")
        let settings = try config(port: broker.port, store: directory.appendingPathComponent("state.db").path)
        let (watcher, inbox) = try await observer(broker, "livedata/style/#")
        let (sensor, _) = try await observer(broker, "unused")

        let (first, firstClient, firstServing) = try await startPipeline(settings)
        for room in 1...3 { try await publish(sensor, "room-\(room)", people: room) }
        #expect(await inbox.wait { $0.count >= 3 })
        await firstClient.disconnect()
        await firstServing.value
        #expect(await first.statistics.locations == 3)

        let before = await inbox.items.count
        let (second, secondClient, secondServing) = try await startPipeline(settings)
        #expect(await second.statistics.locations == 3)
        #expect(await LiveQueries(second).record(LocationAddress(dataset: "ds1", venue: "hq", building: "B", floor: "F3", room: "R7", location: "room-2"))?.version == 1)
        // Converged (startPipeline waited for it): whatever the start re-publishes is counted by now.
        #expect(await second.statistics.published == 0, "nothing is re-published after a restart")
        #expect(await inbox.items.count == before)
        // A real change still goes out, with the version continuing.
        try await publish(sensor, "room-2", people: 7)
        #expect(await inbox.wait { $0.count == before + 1 })
        let last = await inbox.items.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }
        #expect(last?["version"] as? Int == 2)
        await secondClient.disconnect()
        await secondServing.value
        for other in [watcher, sensor] { await other.disconnect() }
    }
}
