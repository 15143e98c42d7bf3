import LiveDataConfiguration
import Testing

/// Every key ``ConfigKeys`` lists is read by a case of its own: a key added to the list but
/// not to the loader's switch is an error when it is set, not read as another key or dropped.
@Suite("Config keys the loader reads")
struct ConfigKeyCoverageTests {
    /// A config that sets `key` of `section` to `value`, with whatever the section needs around
    /// it for the loader to reach its keys (a rule's name, a partition's name); nil for a
    /// nested section this test does not know how to write yet.
    static func yaml(section: String, key: String, value: String = "x") -> String? {
        let entry = "\(key): \(value)"
        switch section {
        case "": return entry
        case "partition": return "partition: {\(entry)}"
        case "partition.owns[]": return "partition: {name: p, owns: [{\(entry)}]}"
        case "broker.tls": return "broker: {tls: {\(entry)}}"
        case "subscriptions[]": return "subscriptions: [{\(entry)}]"
        case "domains.*": return "domains: {occupancy: {\(entry)}}"
        case "styles": return "styles: {\(key): {}}"
        case "style": return "styles: {main: {\(entry)}}"
        case "style.badge": return "styles: {main: {badge: {\(entry)}}}"
        case "venueView.buildings.*": return "venueView: {buildings: {B: {\(entry)}}}"
        case "rules[]": return key == "name" ? "rules: [{\(entry)}]" : "rules: [{name: r, \(entry)}]"
        default: return section.contains(".") || section.contains("[") ? nil : "\(section): {\(entry)}"
        }
    }

    static func errors(_ yaml: String) -> [String] {
        do {
            _ = try LiveDataConfig.parse(yaml: yaml + "\n", file: "t.yaml", environment: [:])
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test("each key ConfigKeys lists reaches a case of its section's switch (a wrong value may be refused, never left to a fallback)")
    func everyKeyHasACase() {
        for (section, keys) in ConfigKeys.sections {
            for key in keys {
                guard let yaml = Self.yaml(section: section, key: key) else {
                    Issue.record("no place to write the section \(section) in this test: add one to yaml(section:key:)")
                    break
                }
                let errors = Self.errors(yaml)
                // Placed where the section's reader takes it.
                #expect(!errors.contains { $0.contains("unknown key") }, "\(yaml): \(errors)")
                let unread = errors.filter { $0.contains("the loader lists but does not read") }
                #expect(unread.isEmpty, "\(yaml): \(unread)")
            }
        }
    }

    @Test("a key each section's switch used to take as its fallback is read by its name", arguments: [
        ("broker: {tls: {certFile: /c.pem, keyFile: /k.pem}}", "broker.tls.keyFile"),
        ("output: {summaryInterval: 3s}", "output.summaryInterval"),
        ("store: {path: /tmp/s.db}", "store.path"),
        ("http: {token: t0ken}", "http.token"),
        ("log: {level: debug}", "log.level"),
        ("limits: {futureSkew: 30s}", "limits.futureSkew"),
    ])
    func fallbackKeysByName(yaml: String, key: String) throws {
        let config = try LiveDataConfig.parse(yaml: yaml + "\n", file: "t.yaml", environment: [:])
        switch key {
        case "broker.tls.keyFile": #expect(config.broker.tls?.keyFile == "/k.pem" && config.broker.tls?.certFile == "/c.pem")
        case "output.summaryInterval": #expect(config.output.summaryInterval == .seconds(3))
        case "store.path": #expect(config.store.path == "/tmp/s.db")
        case "http.token": #expect(config.http.token == "t0ken")
        case "log.level": #expect(config.log.level == "debug")
        case "limits.futureSkew": #expect(config.limits.futureSkew == .seconds(30))
        default: Issue.record("no check for \(key)")
        }
    }
}
