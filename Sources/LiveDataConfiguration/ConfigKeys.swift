import DisplayRules
import LiveTopics

/// Every key the config loader reads, by where it stands: the loader takes its allowed keys
/// from here, and the README's configuration reference is checked against it, so that the
/// two cannot drift apart.
///
/// A section is a dotted path: `broker.tls`; `subscriptions[]` and `rules[]` for each item of
/// a list; `domains.*` for each domain's settings; `style` for a style wherever one is written
/// (`styles.main`, a type's or a location's style, a rule's `style`), `style.badge` for its
/// badge. Keys under `styles.types` and `styles.locations` are names of the user's choosing.
public enum ConfigKeys {
    public static let sections: [(section: String, keys: [String])] = [
        ("", ["instance", "partition", "broker", "subscriptions", "domains", "catalog", "geometry", "styles", "rules", "output", "store", "http", "log", "limits", "venueView"]),
        ("partition", ["name", "owns", "bridge", "bridgeHorizon", "failover", "peers"]),
        ("partition.owns[]", ["dataset", "venue", "building"]),
        // bufferedSocket: one switch for the whole redirection of libmosquitto's imports:
        // buffered socket reads and writes, wake-up writes left out, the coarse monotonic
        // clock, and its locks checked instead of taken (see BrokerSettings.bufferedSocket).
        ("broker", ["host", "port", "clientId", "protocol", "username", "passwordFile", "keepalive", "reconnectMaximum", "qos", "cleanStart", "bufferedSocket", "outputConnection", "outputConnections", "tls"]),
        ("broker.tls", ["caFile", "certFile", "keyFile"]),
        ("subscriptions[]", LiveTopic.Component.allCases.map(\.rawValue) + ["filter"]),
        ("domains.*", ["staleAfter", "moves"]),
        ("styles", ["main", "types", "locations"]),
        ("style", StyleField.allCases.map(\.rawValue)),
        ("style.badge", ["text", "textColor", "backgroundColor"]),
        ("rules[]", ["name", "domain", "when", "where", "style", "legend", "layer", "priority"]),
        ("output", ["prefix", "retain", "qos", "summaryInterval", "minInterval"]),
        ("store", ["path", "snapshotInterval", "journalSync"]),
        ("http", ["listen", "token"]),
        ("log", ["level"]),
        ("venueView", ["autoFocus", "indoorZoom", "outdoorZoom", "buildings"]),
        ("venueView.buildings.*", ["defaultFloor", "elevations"]),
        ("limits", ["futureSkew", "queue", "queueBytes", "locations", "domains", "payloadSize", "properties", "nameLength", "valueLength"]),
    ]

    /// The keys of `section`.
    public static func keys(of section: String) -> [String] {
        guard let entry = sections.first(where: { $0.section == section }) else {
            preconditionFailure("no config section \(section)")
        }
        return entry.keys
    }

    /// Every key as a dotted path (`broker.tls.caFile`, `rules[].when`, `style.badge.text`).
    public static var paths: [String] {
        sections.flatMap { section, keys in keys.map { section.isEmpty ? $0 : "\(section).\($0)" } }
    }
}
