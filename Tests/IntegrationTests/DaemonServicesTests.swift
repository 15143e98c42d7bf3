import Foundation
import LiveDataConfiguration
import LiveDataServer
import LiveDataTestSupport
import LiveStatePersistence
import LiveTopics
import Logging
import Mosquitto
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

/// The daemon's services in process, in a ServiceGroup, against a real broker; shutdown
/// triggered through ServiceLifecycleTestKit.
@Suite("Daemon services", .timeLimit(.minutes(1)))
struct DaemonServicesTests {
    let logger = Logger(label: "test")

    static let yaml = """
        subscriptions:
          - {dataset: ds1, domain: occupancy}
        rules:
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545"}
        """

    @Test("graceful shutdown publishes offline, disconnects, writes the store, and every service returns")
    func gracefulShutdown() async throws {
        let broker = try await MosquittoBroker.start()
        let directory = try TestDirectory.make(prefix: "services")
        let store = directory.appendingPathComponent("state.db").path
        var config = try LiveDataConfig.parse(yaml: Self.yaml, file: "test.yaml")
        config.broker.port = broker.port
        config.broker.clientId = "services-test"
        config.store.path = store
        config.http.listen = "127.0.0.1:0"
        let daemon = try await LiveDataDaemon(
            config: config, configPath: directory.appendingPathComponent("none.yaml").path, logger: logger,
            notifier: SystemdNotifier(environment: [:]))

        let watcher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await watcher.connect()
        let inbox = await Inbox.collecting(watcher.messages)
        try await watcher.subscribe("livedata/#")
        let sensor = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await sensor.connect()

        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(services: daemon.services, logger: logger)
            async let running: Void = group.run()
            let deadline = ContinuousClock.now + .seconds(10)
            while !(await daemon.pipeline.isReady), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(await daemon.pipeline.isReady)
            try await sensor.publish(
                "ds1/hq/B/F3/R7/room-7/occupancy", text: #"{"properties": {"nrOfPeople": "2"}}"#, qos: .atLeastOnce)
            #expect(await inbox.wait { $0.contains { $0.topic == "livedata/style/ds1/hq/B/F3/R7/room-7" } })
            trigger.triggerGracefulShutdown()
            try await running
        }
        #expect(await inbox.wait { $0.contains { $0.topic == "livedata/status" && $0.payloadString == "offline" } })
        #expect(daemon.pipeline.brokerState != .connected)
        let stored = try StateDatabase(path: store).readAll().records
        #expect(stored.map(\.address.location) == ["room-7"])
    }
}
