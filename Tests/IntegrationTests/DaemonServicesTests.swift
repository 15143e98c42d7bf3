import Foundation
import Hummingbird
import HummingbirdTesting
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
            // Generous: the whole suite starting at once on two cores makes a first convergence take seconds.
            try await eventually("the pipeline to be ready", timeout: .seconds(30)) { await daemon.pipeline.isReady }
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

    @Test("a subscription the broker refuses degrades readiness for that filter only; the others go on")
    func refusedSubscription() async throws {
        // The daemon reads back and publishes under its prefix (convergence, styles, status).
        let security = DynamicSecurity(
            username: "reader", password: "secret", subscribeAllowed: ["ds1/#", "livedata/#"], publishAllowed: ["livedata/#"])
        let broker = try await MosquittoBroker.start(.init(dynamicSecurity: security))
        var config = try LiveDataConfig.parse(
            yaml: """
                subscriptions:
                  - {filter: "ds1/#"}
                  - {filter: "ds2/#"}
                rules:
                  - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545"}}
                store: {path: ":memory:"}
                http: {listen: "127.0.0.1:0"}
                """, file: "test.yaml", environment: ["LIVEDATA_MQTT_PASSWORD": "secret"])
        config.broker.port = broker.port
        config.broker.clientId = "refused-test"
        config.broker.username = "reader"
        let daemon = try await LiveDataDaemon(
            config: config, configPath: "test.yaml", logger: logger, notifier: SystemdNotifier(environment: [:]))
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(services: daemon.services, logger: logger)
            async let running: Void = group.run()
            try await eventually("the pipeline to be ready, for the filters the broker took", timeout: .seconds(30)) { await daemon.pipeline.isReady }
            #expect(await daemon.pipeline.refusedSubscriptions == ["ds2/#"])
            let metrics = String(decoding: daemon.metrics.exposition(await daemon.pipeline.statistics, brokerConnected: true, ready: true), as: UTF8.self)
            #expect(metrics.contains("livedata_subscriptions_refused 1"))
            let readiness = HTTPInterface.router(token: nil, queries: LiveQueries(daemon.pipeline), metrics: daemon.metrics)
            let app = Application(router: readiness)
            try await app.test(.router) { client in
                let response = try await RecordingClient(client).execute(uri: "/readyz", method: .get)
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"refused":["ds2/#"],"status":"degraded"}"#)
            }
            trigger.triggerGracefulShutdown()
            try await running
        }
    }
}
