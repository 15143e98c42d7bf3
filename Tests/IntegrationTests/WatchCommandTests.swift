import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Testing

/// `livedata watch`, the reference consumer, against real daemons on a real broker.
@Suite("livedata watch: a map client's view", .serialized, .timeLimit(.minutes(4)))
struct WatchCommandTests {
    let logger = Logger(label: "test")

    /// The JSON objects `watch --format json` printed so far.
    static func events(_ watch: ChildProcess) -> [[String: Any]] {
        watch.standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    static func applied(_ watch: ChildProcess) -> [[String: Any]] {
        events(watch).filter { $0["event"] as? String == "applied" }
    }

    func publishOccupancy(_ broker: MosquittoBroker, rooms: Range<Int>, people: Int) async throws {
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        for index in rooms {
            try await publisher.publish(
                "ds1/hq/B/F1/R\(index)/room-\(index)/occupancy", text: #"{"properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"#,
                qos: .atLeastOnce)
        }
        await publisher.disconnect()
    }

    @Test("across a failover takeover the watch never shows a location going back, and ends with every location's last value")
    func acrossATakeover() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let failover = FailoverTests()
        let east1 = try await failover.start("east-1", broker: broker)
        defer { east1.running.signal(SIGKILL) }
        let east2 = try await failover.start("east-2", broker: broker)
        defer { east2.running.signal(SIGKILL) }
        let (active, firstEpoch) = try await failover.active(among: [east1, east2])
        let standby = active === east1 ? east2 : east1

        let watch = try await CommandRunner().start(["watch", "--port", "\(broker.port)", "--dataset", "ds1", "--format", "json"])
        defer { watch.signal(SIGKILL) }
        let rooms = 0..<20
        try await publishOccupancy(broker, rooms: rooms, people: 1)
        try await eventually("the watch to show 20 rooms at 1/8", timeout: .seconds(20)) {
            Set(Self.applied(watch).filter { $0["label"] as? String == "1/8" }.compactMap { $0["location"] as? String }).count == 20
        }

        active.running.signal(SIGKILL)
        try await publishOccupancy(broker, rooms: rooms, people: 2)
        let (newActive, epoch) = try await failover.active(among: [standby], timeout: .seconds(30))
        #expect(newActive === standby && epoch > firstEpoch)
        try await publishOccupancy(broker, rooms: rooms, people: 3)
        try await eventually("the watch to show every room at 3/8 under epoch \(epoch)", timeout: .seconds(30)) {
            var last: [String: [String: Any]] = [:]
            for event in Self.applied(watch) { if let location = event["location"] as? String { last[location] = event } }
            return last.count == 20 && last.values.allSatisfy { $0["label"] as? String == "3/8" && $0["epoch"] as? Int == epoch }
        }
        // Never back: each room's labels only rise (1/8, 2/8, 3/8), its (epoch, version) too.
        var shown: [String: (people: Int, epoch: Int, version: Int)] = [:]
        for event in Self.applied(watch) {
            guard let location = event["location"] as? String, let label = event["label"] as? String,
                let people = Int(label.prefix { $0 != "/" }), let epoch = event["epoch"] as? Int, let version = event["version"] as? Int
            else { continue }
            if let before = shown[location] {
                #expect(people >= before.people, "\(location) went back from \(before.people) to \(people) people")
                #expect((epoch, version) > (before.epoch, before.version), "\(location) went back in (epoch, version)")
            }
            shown[location] = (people, epoch, version)
        }
        #expect(!watch.standardError.contains("breaks the contract"), "\(watch.standardError)")
        #expect(watch.isRunning, "the watch ended: \(watch.standardError)")
    }

    @Test("an asset that moves shows at its new place only: the clear of its old place never removes it from the new one")
    func aMove() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let yaml = """
            subscriptions:
              - {dataset: ds1, domain: position}
            rules:
              - {name: tracked, domain: position, when: floorIndex >= 0, style: {label: "{floorIndex}"}, legend: Tracked}

            """
        let daemon = try await DaemonTests().startDaemon(port: broker.port, yaml: yaml)
        defer { daemon.signal(SIGKILL) }
        #expect(await daemon.notify.wait(for: "READY=1", timeout: .seconds(60)), "\(daemon.running.standardError.suffix(3000))")
        let watch = try await CommandRunner().start(["watch", "--port", "\(broker.port)", "--building", "B", "--format", "json"])
        defer { watch.signal(SIGKILL) }
        // Subscribed: the daemon's retained status has reached it.
        try await eventually("the watch to read the daemon's status: \(watch.standardError)", timeout: .seconds(30)) {
            Self.events(watch).contains { $0["event"] as? String == "status" }
        }
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        for (floor, index) in [("F1", 0), ("F2", 1)] {
            try await publisher.publish(
                "ds1/hq/B/\(floor)/R1/asset-9/position",
                text: #"{"timestamp": \#(Int(Date().timeIntervalSince1970 * 1000) + index), "properties": {"latitude": 55.6, "longitude": 12.5, "floorIndex": \#(index)}}"#,
                qos: .atLeastOnce)
            if floor == "F1" {
                try await eventually(
                    "the watch to show the asset on F1: \(watch.standardOutput) \(watch.standardError) \(daemon.running.standardError.suffix(2000))",
                    timeout: .seconds(30)
                ) {
                    Self.applied(watch).contains { $0["place"] as? String == "ds1/hq/B/F1/R1/asset-9" }
                }
            }
        }
        try await eventually("the watch to show the asset on F2", timeout: .seconds(20)) {
            Self.applied(watch).contains { $0["place"] as? String == "ds1/hq/B/F2/R1/asset-9" }
        }
        // The daemon clears the old place as it publishes the new one: whichever the watch
        // reads first, once the asset shows on F2 nothing removes it, and it is on F2 alone.
        try await Task.sleep(for: .milliseconds(500))
        let events = Self.events(watch)
        let atF2 = try #require(events.firstIndex { $0["place"] as? String == "ds1/hq/B/F2/R1/asset-9" })
        #expect(!events[atF2...].contains { $0["event"] as? String == "removed" }, "\(watch.standardOutput)")
        #expect(events[atF2]["state"] as? String == "Tracked")
        await publisher.disconnect()
        #expect(!watch.standardError.contains("breaks the contract"), "\(watch.standardError)")
    }

    @Test("a payload that breaks the contract is reported with its topic, and the watch goes on")
    func contractBreaks() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let watch = try await CommandRunner().start(["watch", "--port", "\(broker.port)", "--format", "json"])
        defer { watch.signal(SIGKILL) }
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        try await Task.sleep(for: .milliseconds(500))
        try await publisher.publish("livedata/style/ds1/hq/B/F1/R1/room-1", text: #"{"location": "room-1", "version": "x"}"#, qos: .atLeastOnce)
        let good = #"{"location": "room-1", "topic": {"dataset": "ds1", "venue": "hq", "building": "B", "floor": "F1", "room": "R1", "location": "room-1"}, "style": {"label": "ok"}, "changed": [], "rules": [], "live": {}, "version": 1, "updatedAt": "2026-11-21T10:15:03.150Z", "format": 1}"#
        try await publisher.publish("livedata/style/ds1/hq/B/F1/R1/room-1", text: good, qos: .atLeastOnce)
        await publisher.disconnect()
        try await eventually("the watch to report the bad payload and apply the good one", timeout: .seconds(10)) {
            watch.standardError.contains("livedata/style/ds1/hq/B/F1/R1/room-1: the payload breaks the contract")
                && Self.applied(watch).contains { $0["label"] as? String == "ok" }
        }
        #expect(watch.isRunning)
    }
}
