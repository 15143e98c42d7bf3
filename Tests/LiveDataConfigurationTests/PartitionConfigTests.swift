import LiveDataConfiguration
import LiveTopics
import Testing

/// `instance` and `partition` in the config file.
@Suite("Partition config")
struct PartitionConfigTests {
    func errors(_ yaml: String) -> [String] {
        do {
            _ = try LiveDataConfig.parse(yaml: yaml, file: "test.yaml")
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test("a partition narrows the subscriptions, names the status topic after the instance; without one, nothing changes")
    func loads() throws {
        let config = try LiveDataConfig.parse(
            yaml: """
                instance: east-1
                partition:
                  name: east
                  owns:
                    - {dataset: ds1, venue: hq, building: A}
                    - {dataset: ds2}
                subscriptions:
                  - {dataset: ds1, domain: occupancy}
                """, file: "test.yaml")
        #expect(config.partition?.name == "east")
        #expect(config.partition?.shares.map(\.description) == ["ds1/hq/A", "ds2/+/+"])
        #expect(config.partitionSubscriptions.map(\.filter.string) == ["ds1/hq/A/+/+/+/occupancy"])
        #expect(config.statusInstance == "east-1")
        let plain = try LiveDataConfig.parse(yaml: "broker: {clientId: solo}", file: "test.yaml")
        #expect(plain.partition == nil && plain.statusInstance == nil)
        #expect(plain.partitionSubscriptions == plain.subscriptions)
        let unnamed = try LiveDataConfig.parse(yaml: "broker: {clientId: solo}\npartition: {name: p, owns: [{dataset: ds1}]}", file: "test.yaml")
        #expect(unnamed.statusInstance == "solo", "the instance defaults to the client id")
        #expect(unnamed.bridge == nil)
        let bridged = try LiveDataConfig.parse(yaml: "partition: {name: p, owns: [{dataset: ds1}], bridge: edge-east}", file: "test.yaml")
        #expect(bridged.bridge == "edge-east" && bridged.partition?.name == "p")
        #expect(!bridged.failover && bridged.peers.isEmpty, "failover is off unless asked for")
        #expect(bridged.bridgeHorizon == .seconds(7 * 86_400), "a clear is kept a week by default")
        let horizon = try LiveDataConfig.parse(
            yaml: "partition: {name: p, owns: [{dataset: ds1}], bridge: edge-east, bridgeHorizon: 36h}", file: "test.yaml")
        #expect(horizon.bridgeHorizon == .seconds(36 * 3600))
        let replica = try LiveDataConfig.parse(
            yaml: "partition: {name: p, owns: [{dataset: ds1}], failover: true, peers: [\"http://10.0.0.2:8080/\", \"http://[::1]:8081\"]}",
            file: "test.yaml")
        #expect(replica.failover && replica.peers == ["http://10.0.0.2:8080", "http://[::1]:8081"])
    }

    @Test(
        "mistakes in a partition are errors with their place",
        arguments: [
            ("partition: {owns: [{dataset: ds1}]}", "partition.name is missing"),
            ("partition: {name: p, owns: []}", "partition.owns is empty"),
            ("partition: {name: p, owns: [{venue: hq}]}", "each share names its dataset"),
            ("partition: {name: p, owns: [{dataset: ds1, building: A}]}", "a building is named with its venue"),
            ("partition: {name: p, owns: [{dataset: ds1, floor: F1}]}", "unknown key \"floor\""),
            ("partition: {name: p, owns: [{dataset: ds2}]}\nsubscriptions: [{dataset: ds1}]", "do not meet"),
            ("partition: {name: \"a/b\", owns: [{dataset: ds1}]}", "cannot be a topic level"),
            ("partition: {name: p, owns: [{dataset: ds1}], bridge: e, bridgeHorizon: 10s}", "partition.bridgeHorizon must be between 60s"),
            ("partition: {name: p, owns: [{dataset: ds1}], failover: true}\noutput: {retain: false}", "partition.failover needs output.retain: true"),
            ("partition: {name: p, owns: [{dataset: ds1}], failover: true, peers: [\"10.0.0.2:8080\"]}", "is not an address such as http://"),
            ("partition: {name: p, owns: [{dataset: ds1}], failover: yes please}", "partition.failover"),
        ])
    func mistakes(yaml: String, message: String) {
        let found = errors(yaml)
        #expect(found.contains { $0.contains(message) && $0.hasPrefix("test.yaml:") }, "\(found)")
    }
}
