import LiveDataConfiguration
import Testing

/// `broker.keepalive`: refused outside what libmosquitto and MQTT take (never raised or cut
/// silently), and 5 s by default for a failover replica, whose takeover time follows it.
@Suite("broker.keepalive and broker.reconnectMaximum")
struct KeepaliveConfigTests {
    static func errors(_ yaml: String) -> [String] {
        do {
            _ = try LiveDataConfig.parse(yaml: yaml, file: "test.yaml")
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    static let failover = """
        partition:
          name: east
          owns: [{dataset: ds1}]
          failover: true
        subscriptions: [{dataset: ds1}]

        """

    @Test(
        "a keepalive libmosquitto or MQTT would not take is refused with the reason",
        arguments: [
            (
                "broker: {keepalive: 2s}\n",
                "test.yaml:1:21: broker.keepalive must be at least 5s (libmosquitto refuses a shorter one, and the failover lease is timed from it), found 2s"
            ),
            (
                "broker: {keepalive: 4999ms}\n",
                "test.yaml:1:21: broker.keepalive must be at least 5s (libmosquitto refuses a shorter one, and the failover lease is timed from it), found 4.999s"
            ),
            (
                "broker: {keepalive: 0}\n",
                "test.yaml:1:21: broker.keepalive must be at least 5s (libmosquitto refuses a shorter one, and the failover lease is timed from it), found 0ms"
            ),
            ("broker: {keepalive: 65536s}\n", "test.yaml:1:21: broker.keepalive must be at most 65535s (MQTT's limit), found 65536s"),
            ("broker: {keepalive: 5.5s}\n", "test.yaml:1:21: broker.keepalive must be whole seconds (MQTT counts it in seconds), found 5.5s"),
        ])
    func refused(yaml: String, message: String) {
        #expect(Self.errors(yaml) == [message])
    }

    @Test("5s, 30s and 65535s are taken as they are", arguments: [5, 30, 65_535])
    func taken(seconds: Int) throws {
        let config = try LiveDataConfig.parse(yaml: "broker: {keepalive: \(seconds)s}\n", file: "test.yaml")
        #expect(config.broker.keepalive == .seconds(seconds))
    }

    @Test("the default: 30s alone, 5s for a failover replica; one set is kept, with a warning past 6s under failover")
    func defaults() throws {
        #expect(try LiveDataConfig.parse(yaml: "rules: []\n", file: "test.yaml").broker.keepalive == .seconds(30))
        let replica = try LiveDataConfig.parse(yaml: Self.failover, file: "test.yaml")
        #expect(replica.broker.keepalive == BrokerSettings.failoverKeepalive)
        #expect(BrokerSettings.failoverKeepalive == .seconds(5))
        #expect(replica.warnings.isEmpty, "\(replica.warnings)")
        let six = try LiveDataConfig.parse(yaml: Self.failover + "broker: {keepalive: 6s}\n", file: "test.yaml")
        #expect(six.broker.keepalive == .seconds(6))
        #expect(six.warnings.isEmpty, "\(six.warnings)")
        let slow = try LiveDataConfig.parse(yaml: Self.failover + "broker: {keepalive: 30s}\n", file: "test.yaml")
        #expect(slow.broker.keepalive == .seconds(30))
        #expect(slow.warnings.contains { $0.contains("broker.keepalive 30s") && $0.contains("about 46 s") }, "\(slow.warnings)")
    }

    @Test("broker.reconnectMaximum: 10s by default, 1s to 10m taken, anything else refused with the range")
    func reconnectMaximum() throws {
        #expect(try LiveDataConfig.parse(yaml: "rules: []\n", file: "test.yaml").broker.reconnectMaximum == .seconds(10))
        #expect(try LiveDataConfig.parse(yaml: "broker: {reconnectMaximum: 1s}\n", file: "test.yaml").broker.reconnectMaximum == .seconds(1))
        #expect(try LiveDataConfig.parse(yaml: "broker: {reconnectMaximum: 10m}\n", file: "test.yaml").broker.reconnectMaximum == .seconds(600))
        #expect(
            Self.errors("broker: {reconnectMaximum: 500ms}\n") == [
                "test.yaml:1:28: broker.reconnectMaximum must be between 1s and 600s, found 500ms"
            ])
        #expect(Self.errors("broker: {reconnectMaximum: 1h}\n").first?.contains("must be between 1s and 600s, found 3600s") == true)
    }
}
