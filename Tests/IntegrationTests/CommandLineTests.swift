import Foundation
import LiveDataTestSupport
import LiveTopics
import Logging
import Mosquitto
import Testing

/// The `livedata` executable as a subprocess, against a real broker.
@Suite("livedata command line", .timeLimit(.minutes(2)))
struct CommandLineTests {
    let logger = Logger(label: "test")

    func publisher(_ broker: MosquittoBroker) async throws -> MQTTClient {
        let client = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await client.connect()
        return client
    }

    /// Waits until the broker has logged a subscription to `filter`.
    func waitForSubscription(_ broker: MosquittoBroker, _ filter: String) async throws {
        try await eventually("the command to subscribe to \(filter); broker log:\n\(broker.log)") {
            broker.log.contains("\t\(filter) (QoS")
        }
    }

    @Test("subscribe --count --format json prints one object per update and warns once about a bad payload")
    func subscribeJSON() async throws {
        let broker = try await MosquittoBroker.start()
        let command = try await CommandRunner().start([
            "subscribe", "--port", "\(broker.port)", "--dataset", "ds1", "--domain", "occupancy",
            "--count", "2", "--format", "json",
        ])
        try await waitForSubscription(broker, "ds1/+/+/+/+/+/occupancy")
        let client = try await publisher(broker)
        try await client.publish(
            "ds1/hq/B/F3/R7/room-7/occupancy",
            text: #"{"id": "room-7", "timestamp": "2026-11-21T10:15:03.120Z", "properties": {"nrOfPeople": 3, "capacity": "8"}}"#,
            qos: .atLeastOnce)
        try await client.publish("ds1/hq/B/F3/R7/room-7/occupancy", text: "{oops", qos: .atLeastOnce)
        try await client.publish("ds1/hq/B/F3/R7/room-7/co2", text: #"{"properties": {"co2Level": "900"}}"#, qos: .atLeastOnce)
        try await client.publish("ds1/hq/B/F3/R8/desk-2/occupancy", text: #"{"properties": {"nrOfPeople": "0"}}"#, qos: .atLeastOnce)
        let result = try await command.result(timeout: .seconds(20))
        await client.disconnect()

        #expect(result.status == 0, "stderr: \(result.standardError)")
        let lines = result.outputLines
        #expect(lines.count == 2)
        let objects = try lines.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        #expect(objects.first?["topic"] as? String == "ds1/hq/B/F3/R7/room-7/occupancy")
        #expect(objects.first?["floor"] as? String == "F3")
        #expect(objects.first?["location"] as? String == "room-7")
        #expect(objects.first?["timestamp"] as? String == "2026-11-21T10:15:03.120Z")
        #expect(objects.first?["properties"] as? [String: String] == ["nrOfPeople": "3", "capacity": "8"])
        #expect(objects.last?["id"] as? String == "desk-2")
        // Keys come in the documented order.
        #expect(lines.first?.hasPrefix(#"{"topic": "ds1/hq/B/F3/R7/room-7/occupancy", "dataset": "ds1", "venue": "hq""#) == true)
        #expect(result.errorLines.count == 1, "stderr: \(result.errorLines)")
        #expect(result.errorLines.first?.hasPrefix("warning: ignoring the message on ds1/hq/B/F3/R7/room-7/occupancy: payload is not JSON") == true)
    }

    @Test("subscribe prints aligned text lines by default, and publish sends what it is told")
    func publishThenSubscribeText() async throws {
        let broker = try await MosquittoBroker.start()
        let runner = try CommandRunner()
        let command = try await runner.start(["subscribe", "--port", "\(broker.port)", "--count", "2"])
        try await waitForSubscription(broker, "+/+/+/+/+/+/+")
        let first = try await runner.run([
            "publish", "--port", "\(broker.port)", "--dataset", "ds1", "--venue", "hq", "--building", "B",
            "--floor", "F3", "--room", "R7", "--location", "room-7", "--domain", "occupancy",
            "nrOfPeople=3", "capacity=8", "--timestamp", "2026-11-21T10:15:03.120Z",
        ])
        #expect(first.status == 0, "stderr: \(first.standardError)")
        let second = try await runner.run([
            "publish", "--port", "\(broker.port)", "--topic", "ds1/hq/B/F3/R7/a-much-longer-location-id/availability",
            "available=false", "--origin", "booking",
        ])
        #expect(second.status == 0, "stderr: \(second.standardError)")
        let result = try await command.result(timeout: .seconds(20))
        #expect(result.status == 0)
        #expect(
            result.outputLines.first
                == "2026-11-21T10:15:03.120Z  ds1/hq/B/F3/R7/room-7     occupancy     nrOfPeople=3 capacity=8")
        #expect(result.outputLines.last?.contains("ds1/hq/B/F3/R7/a-much-longer-location-id  availability  available=false  from booking") == true)
    }

    @Test("a broker that cannot be reached: one line with the address and the cause, exit 1")
    func connectionFailure() async throws {
        let port = try freeLoopbackPort()
        let result = try await CommandRunner().run(["subscribe", "--port", "\(port)", "--domain", "occupancy"])
        #expect(result.status == 1)
        #expect(result.errorLines == ["error: cannot connect to the MQTT broker at 127.0.0.1:\(port): Connection refused"])
        #expect(result.standardOutput.isEmpty)
    }

    @Test("a subscription the broker refuses: one line saying so, exit 1; the password comes from a file")
    func refusedSubscription() async throws {
        let security = DynamicSecurity(username: "reader", password: "secret", subscribeAllowed: ["ds1/#"])
        let broker = try await MosquittoBroker.start(.init(dynamicSecurity: security))
        let passwordFile = try TestDirectory.make(prefix: "password").appendingPathComponent("password")
        try "secret\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let runner = try CommandRunner()
        let refused = try await runner.run([
            "subscribe", "--port", "\(broker.port)", "--username", "reader", "--password-file", passwordFile.path,
            "--dataset", "ds2",
        ])
        #expect(refused.status == 1)
        #expect(
            refused.errorLines == [
                "error: the broker refused the subscription to \"ds2/+/+/+/+/+/+\": Not authorized (reason code 0x87)"
            ])
        let allowed = try await runner.run([
            "subscribe", "--port", "\(broker.port)", "--username", "reader", "--password-file", passwordFile.path,
            "--dataset", "ds1", "--timeout", "0.5",
        ])
        #expect(allowed.status == 0, "stderr: \(allowed.standardError)")
        let wrong = try await runner.run(
            ["subscribe", "--port", "\(broker.port)", "--username", "reader", "--dataset", "ds1"])
        #expect(wrong.status == 1)
        #expect(wrong.errorLines.count == 1)
        #expect(wrong.errorLines.first?.hasPrefix("error: cannot connect to the MQTT broker at 127.0.0.1:\(broker.port): the broker refused the connection") == true)
    }

    @Test("--timeout ends a quiet subscription; with an unmet --count it is a failure")
    func timeout() async throws {
        let broker = try await MosquittoBroker.start()
        let quiet = try await CommandRunner().run(["subscribe", "--port", "\(broker.port)", "--timeout", "0.5"])
        #expect(quiet.status == 0, "stderr: \(quiet.standardError)")
        let short = try await CommandRunner().run([
            "subscribe", "--port", "\(broker.port)", "--timeout", "0.5", "--count", "3",
        ])
        #expect(short.status == 1)
        #expect(short.errorLines == ["error: timed out after 0.5 s with 0 of 3 updates"])
    }

    @Test("subscribe keeps going across a broker restart")
    func subscribeSurvivesRestart() async throws {
        let broker = try await MosquittoBroker.start()
        let command = try await CommandRunner().start(["subscribe", "--port", "\(broker.port)", "--count", "1", "--format", "json"])
        try await waitForSubscription(broker, "+/+/+/+/+/+/+")
        try await broker.restart(after: .milliseconds(200))
        // Wait for the re-subscription in the new broker's log (appended after the restart).
        try await eventually("the re-subscription in the broker's log:\n\(broker.log)") {
            broker.log.components(separatedBy: "\t+/+/+/+/+/+/+ (QoS").count >= 3
        }
        let client = try await publisher(broker)
        try await client.publish("d/v/b/f/r/l/count", text: #"{"properties": {"count": 1}}"#, qos: .atLeastOnce)
        let result = try await command.result(timeout: .seconds(20))
        await client.disconnect()
        #expect(result.status == 0)
        #expect(result.outputLines.count == 1)
        #expect(result.standardError.contains("reconnecting"))
    }

    @Test(
        "usage errors exit 2 and say what is wrong",
        arguments: [
            (["subscribe", "--building", "B/1"], "error: building \"B/1\": a component cannot contain '/' (it separates levels)"),
            (["subscribe", "--filter", "a/#/b"], "error: level 2 of \"a/#/b\": '#' must be the last level"),
            (["publish", "--domain", "occupancy", "nrOfPeople=1"], "error: a live-data topic needs all seven components; missing --dataset, --venue, --building, --floor, --room, --location (or give the whole topic with --topic)"),
            (["topic", "parse", "a/b"], "error: \"a/b\" has 2 levels; a live-data topic has 7: dataset/venue/building/floor/room/location/domain"),
            (["topic", "match", "a+", "a"], "error: level 1 of \"a+\": '+' must be a whole level"),
            (["topic", "match", "#", "a/+"], "error: level 2 of \"a/+\": a topic name cannot contain '+' (wildcards belong in filters)"),
        ])
    func usageErrors(arguments: [String], message: String) async throws {
        let result = try await CommandRunner().run(arguments)
        #expect(result.status == 2)
        #expect(result.errorLines.first == message)
    }

    @Test(
        "topic match prints match or no match with exit 0 or 1",
        arguments: [
            ("ds1/+/B/#", "ds1/hq/B/F3/R7/room-7/occupancy", "match", Int32(0)),
            ("a/#", "a", "match", 0),
            ("#", "$SYS/broker/uptime", "no match", 1),
            ("a/+", "a/b/c", "no match", 1),
        ])
    func topicMatch(filter: String, topic: String, output: String, status: Int32) async throws {
        let result = try await CommandRunner().run(["topic", "match", filter, topic])
        #expect(result.outputLines == [output])
        #expect(result.status == status)
    }

    @Test("rules eval prints the derived change for people, and as published with --format json")
    func rulesEval() async throws {
        let directory = try TestDirectory.make(prefix: "eval")
        let path = directory.appendingPathComponent("rules.yaml").path
        try """
            styles:
              main: {visible: true, zoomFrom: 16, zoomTo: 22}
            rules:
              - {name: occupied, domain: occupancy, when: nrOfPeople > 0, style: {polygonFillColor: "#D64545"}, legend: Occupied}
            store: {path: ":memory:"}
            """.write(toFile: path, atomically: true, encoding: .utf8)
        let arguments = [
            "rules", "eval", path, "--topic", "ds1/hq/B/F3/R7/room-7/occupancy", "--payload", #"{"properties": {"nrOfPeople": "3"}}"#,
            "--zoom", "18",
        ]
        let text = try await CommandRunner().run(arguments)
        #expect(text.status == 0, "\(text.standardError)")
        #expect(text.outputLines.contains { $0.hasPrefix("rules") && $0.hasSuffix("occupied") })
        #expect(text.outputLines.contains { $0.hasPrefix("  polygonFillColor") && $0.hasSuffix("#D64545") })
        #expect(text.outputLines.last?.hasSuffix("visible") == true)
        let json = try await CommandRunner().run(arguments + ["--format", "json"])
        #expect(json.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        #expect((object["style"] as? [String: Any])?["polygonFillColor"] as? String == "#D64545")
        #expect((object["zoom"] as? [String: Any])?["visible"] as? Bool == true)
    }

    @Test("topic parse and topic criteria")
    func topicParseAndCriteria() async throws {
        let runner = try CommandRunner()
        let parsed = try await runner.run(["topic", "parse", "ds1/hq/B/F3/R7/room-7/occupancy", "--format", "json"])
        #expect(
            parsed.outputLines
                == [#"{"dataset": "ds1", "venue": "hq", "building": "B", "floor": "F3", "room": "R7", "location": "room-7", "domain": "occupancy"}"#])
        let text = try await runner.run(["topic", "parse", "ds1/hq/B/F3/R7/room-7/occupancy"])
        #expect(text.outputLines.first == "dataset   ds1")
        #expect(text.outputLines.count == 7)
        let criteria = try await runner.run(["topic", "criteria", "--dataset", "ds1", "--building", "B", "--domain", "occupancy"])
        #expect(criteria.outputLines == ["ds1/+/B/+/+/+/occupancy"])
    }

    @Test("help teaches with examples at every level", arguments: [[], ["subscribe"], ["publish"], ["topic"], ["topic", "match"], ["topic", "parse"], ["topic", "criteria"]])
    func help(arguments: [String]) async throws {
        let result = try await CommandRunner().run(arguments + ["--help"])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("livedata"))
        #expect(result.standardOutput.contains("Example"))
    }
}
