import DisplayRules
import Foundation
import LiveDataConfiguration
import LiveTopics
import Testing

@Suite("Config file")
struct ConfigLoadingTests {
    func parse(_ yaml: String) throws(ConfigErrors) -> LiveDataConfig {
        try LiveDataConfig.parse(yaml: yaml, file: "test.yaml")
    }

    func errors(_ yaml: String) -> [String] {
        do {
            _ = try parse(yaml)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test("the example config loads, with its catalog")
    func example() throws {
        // Tests run from the package root.
        let config = try LiveDataConfig.load(path: "config/livedata.yaml", environment: [:])
        #expect(config.broker.clientId == "livedata")
        #expect(config.broker.cleanStart == false)
        #expect(config.broker.bufferedSocket == false)
        #expect(config.subscriptions.count == 5)
        #expect(config.subscriptions.first?.filter.string == "demo/+/+/+/+/+/occupancy")
        #expect(config.ruleSet.rules.count == 9)
        #expect(config.ruleSet.rules.last?.name == "stuffy")  // highest priority applies last
        #expect(config.ruleSet.catalog["room-102"]?.capacity == 8)
        #expect(config.ruleSet.domains["occupancy"]?.staleAfter == .seconds(900))
        #expect(config.output.summaryInterval == .seconds(1))
        #expect(config.output.minInterval == .zero)
        #expect(config.store.path == "data/state.db")
        #expect(config.ruleSet.layers == ["climate", "desks", "occupancy"])
    }

    @Test("limits.futureSkew: 5 minutes unless set")
    func limits() throws {
        #expect(try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml").limits.futureSkew == .seconds(300))
        #expect(try LiveDataConfig.parse(yaml: "limits: {futureSkew: 30s}\n", file: "t.yaml").limits.futureSkew == .seconds(30))
    }

    @Test("an empty token from the environment is refused: it would open the write endpoints")
    func emptyToken() {
        for token in ["", "  "] {
            #expect {
                try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml", environment: ["LIVEDATA_HTTP_TOKEN": token])
            } throws: { error in
                "\(error)" == "t.yaml:1:1: $LIVEDATA_HTTP_TOKEN is set but empty: remove it to turn writing off, or give it a token"
            }
        }
        #expect(throws: ConfigErrors.self) { try LiveDataConfig.parse(yaml: "http: {token: \"\"}\n", file: "t.yaml") }
    }

    @Test("secrets from systemd credentials ($CREDENTIALS_DIRECTORY): the token read and trimmed, the password file used; the environment wins; an empty one refused")
    func credentials() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("livedata-credentials-\(getpid())")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "s3cret\n".write(to: folder.appendingPathComponent("http-token"), atomically: true, encoding: .utf8)
        try "pw\n".write(to: folder.appendingPathComponent("mqtt-password"), atomically: true, encoding: .utf8)
        let environment = ["CREDENTIALS_DIRECTORY": folder.path]
        let config = try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml", environment: environment)
        #expect(config.http.token == "s3cret")
        #expect(config.broker.passwordFile == folder.appendingPathComponent("mqtt-password").path)
        let overridden = try LiveDataConfig.parse(
            yaml: "rules: []\n", file: "t.yaml", environment: environment.merging(["LIVEDATA_HTTP_TOKEN": "env"]) { $1 })
        #expect(overridden.http.token == "env")
        try "\n".write(to: folder.appendingPathComponent("http-token"), atomically: true, encoding: .utf8)
        #expect(throws: ConfigErrors.self) { try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml", environment: environment) }
        // Without credentials nothing changes.
        #expect(try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml", environment: [:]).http.token == nil)
    }

    @Test("defaults when keys are left out; secrets from the environment")
    func defaults() throws {
        let config = try LiveDataConfig.parse(
            yaml: "rules: []\n", file: "t.yaml", environment: ["LIVEDATA_MQTT_PASSWORD": "p", "LIVEDATA_HTTP_TOKEN": "t"])
        #expect(config.broker.host == "127.0.0.1" && config.broker.port == 1883 && config.broker.protocolVersion == "mqtt5")
        #expect(config.broker.passwordFromEnvironment == "p")
        #expect(config.broker.bufferedSocket == false, "buffered socket calls are opt-in")
        #expect(try parse("broker: {bufferedSocket: true}\n").broker.bufferedSocket)
        #expect(config.broker.outputConnection)
        #expect(try parse("broker: {outputConnection: false}\n").broker.outputConnection == false)
        #expect(config.http.token == "t" && config.http.listen == "127.0.0.1:8080")
        #expect(config.subscriptions.map(\.filter.string) == ["+/+/+/+/+/+/+"])
        #expect(config.output.prefix == "livedata" && config.output.retain && config.output.qos == 1)
        #expect(try parse("").log.level == "info")
    }

    @Test(
        "mistakes are reported with file, line, column and what was expected",
        arguments: [
            (
                "broker:\n  hots: x\n",
                #"test.yaml:2:3: unknown key "hots" in broker (did you mean "host"? expected one of: host, port, clientId, protocol, username, passwordFile, keepalive, reconnectMaximum, qos, cleanStart, bufferedSocket, outputConnection, outputConnections, tls)"#
            ),
            ("colour: red\n", #"test.yaml:1:1: unknown key "colour" in the config file (expected one of: instance, partition, broker, subscriptions, domains, catalog, geometry, styles, rules, output, store, http, log, limits, venueView)"#),
            (
                "styles:\n  main: {polygonFillColor: red}\n",
                ##"test.yaml:2:28: styles.main.polygonFillColor must be a color written #RRGGBB (quote it: "#D64545"), found "red""##
            ),
            ("domains:\n  occupancy: {staleAfter: soon}\n", #"test.yaml:2:27: domains.occupancy.staleAfter must be a duration such as 500ms, 30s, 15m or 2h, found "soon""#),
            ("limits: {futureSkew: forever}\n", #"test.yaml:1:22: limits.futureSkew must be a duration such as 500ms, 30s, 15m or 2h, found "forever""#),
            ("limits: {places: 5}\n", #"test.yaml:1:10: unknown key "places" in limits (expected one of: futureSkew, queue, queueBytes, locations, domains, payloadSize, properties, nameLength, valueLength)"#),
            ("limits: {domains: 65}\n", #"test.yaml:1:19: limits.domains must be between 1 and 64, found 65"#),
            ("limits: {payloadSize: 100}\n", #"test.yaml:1:23: limits.payloadSize must be between 256 and 16777216, found 100"#),
            ("store: {snapshotInterval: 2h}\n", #"test.yaml:1:27: store.snapshotInterval must be between 10ms and 3600s, found 7200s"#),
            ("limits: {queue: 0}\n", #"test.yaml:1:17: limits.queue must be between 1 and 10000000, found 0"#),
            // Durations that would not fit: refused at load, never a trap.
            ("domains:\n  occupancy: {staleAfter: inf}\n", #"test.yaml:2:27: domains.occupancy.staleAfter must be a duration such as 500ms, 30s, 15m or 2h, found "inf""#),
            (
                "domains:\n  occupancy: {staleAfter: 99999999999999999999s}\n",
                #"test.yaml:2:27: domains.occupancy.staleAfter must be at most 3650d (ten years), found "99999999999999999999s""#
            ),
            ("broker: {bufferedSocket: maybe}\n", #"test.yaml:1:26: broker.bufferedSocket must be true or false, found "maybe""#),
            ("broker: {outputConnections: 0}\n", "test.yaml:1:29: broker.outputConnections must be between 1 and 16, found 0"),
            ("output: {minInterval: 2h}\n", #"test.yaml:1:23: output.minInterval must be between 0ms and 3600s, found 7200s"#),
            ("output: {summaryInterval: 1e30}\n", #"test.yaml:1:27: output.summaryInterval must be at most 3650d (ten years), found "1e30""#),
            ("domains:\n  occupancy: {staleAfter: -5s}\n", #"test.yaml:2:27: domains.occupancy.staleAfter must be a duration such as 500ms, 30s, 15m or 2h, found "-5s""#),
            ("subscriptions:\n  - {building: \"B/1\"}\n", #"test.yaml:2:16: building "B/1": a component cannot contain '/' (it separates levels)"#),
            ("subscriptions:\n  - {filter: \"a/#/b\"}\n", #"test.yaml:2:14: bad filter: level 2 of "a/#/b": '#' must be the last level"#),
            (
                "rules:\n  - name: r\n    domain: occupancy\n    when: nrOfPeople >> 0\n",
                #"test.yaml:4:23: rule "r": when: unexpected '>'"#
            ),
            (
                "rules:\n  - name: r\n    when: \"nrOfPeople = 1\"\n",
                #"test.yaml:3:23: rule "r": when: '=' is not an operator; compare with '=='"#
            ),
            ("rules:\n  - domain: occupancy\n", "test.yaml:2:5: a rule needs a name"),
            ("rules:\n  - name: a\n  - name: a\n", #"test.yaml:3:11: two rules are named "a""#),
            ("output: {qos: 3}\n", "test.yaml:1:15: output.qos must be between 0 and 2, found 3"),
            ("log: {level: loud}\n", #"test.yaml:1:14: log.level must be one of trace, debug, info, notice, warning, error, critical, found "loud""#),
            ("styles:\n  main: {zoomFrom: 20, zoomTo: 10}\n", "test.yaml:2:9: styles.main: zoomFrom (20) is above zoomTo (10)"),
            ("styles:\n  main: {label: \"{x\"}\n", "test.yaml:2:18: styles.main.label: '{' is not closed by '}'"),
            ("broker: [1, 2]\n", "test.yaml:1:9: broker must be a mapping of key: value, found a list"),
            ("rules: {a: 1}\n", "test.yaml:1:8: rules must be a list (lines starting with '- '), found a mapping"),
            ("broker:\n  port: [\n", "test.yaml:3:1: not valid YAML: did not find expected node content while parsing a flow node"),
        ])
    func mistakes(yaml: String, message: String) {
        #expect(errors(yaml) == [message])
    }

    @Test("aliases that repeat aliases (a billion values in ten lines) are refused before the config is read")
    func aliasExpansion() {
        var yaml = #"a: &a ["x","x","x","x","x","x","x","x","x","x"]"# + "\n"
        for (name, previous) in zip("bcdefgh", "abcdefg") {
            yaml += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ",") + "]\n"
        }
        yaml += "rules: *h\n"
        let clock = ContinuousClock()
        let started = clock.now
        #expect(errors(yaml) == ["test.yaml:1:1: the config expands to more than 1000000 values (YAML aliases repeating aliases?)"])
        #expect(clock.now - started < .seconds(5))
        // A few aliases, as people use them for shared styles, are fine.
        #expect(errors("styles:\n  main: &base {visible: true}\n  types: {room: *base, desk: *base}\n").isEmpty)
    }

    @Test("every problem is reported, not just the first")
    func allProblems() {
        let found = errors("broker: {port: 0}\noutput: {retain: maybe}\nstyles: {main: {visible: 1}}\n")
        #expect(found.count == 3)
    }

    @Test("a missing file says so")
    func missingFile() {
        #expect(throws: ConfigErrors([ConfigError(file: "/nonexistent.yaml", line: 1, column: 1, message: "cannot open the config file: it does not exist")])) {
            try LiveDataConfig.load(path: "/nonexistent.yaml")
        }
    }
}
