import DisplayRules
import LiveTopics

/// The format of everything the daemon publishes below its prefix, topics and payloads,
/// built in this one place: derived changes, summaries, legends and the daemon's status.
public struct OutputFormat: Sendable {
    public let prefix: String
    /// Whether derived changes and summaries are retained (`output.retain`).
    public let retain: Bool
    /// The daemon's own name in its status topic, when several share the prefix.
    public let instance: String?
    /// The failover epoch under which this replica publishes (see docs/protocol.md, "Ordering"):
    /// styles and summaries carry it as `"epoch"`; nil without failover (and none is written).
    public var epoch: UInt64?

    /// `{prefix}/style/`, made once: a style topic is then one concatenation (or, handed to
    /// the client apart from the location's path, none).
    public let stylePrefix: String

    public init(prefix: String, retain: Bool = true, instance: String? = nil) {
        self.prefix = prefix
        self.retain = retain
        self.instance = instance
        stylePrefix = prefix + "/style/"
    }

    /// `{prefix}/owner/{partition}`: the retained lease of a failover partition's active replica.
    public func owner(_ partition: String) -> String { "\(prefix)/owner/\(partition)" }

    /// `{prefix}/style/{dataset}/{venue}/{building}/{floor}/{room}/{location}`
    public func style(_ address: LocationAddress) -> String { stylePrefix + address.path }

    /// The address whose style topic this is, if it is one.
    public func address(ofStyleTopic topic: String) -> LocationAddress? {
        guard topic.hasPrefix(stylePrefix) else { return nil }
        return LocationAddress(path: String(topic.dropFirst(stylePrefix.count)))
    }

    /// What a publication waits under in a ``PendingOutput``: a style topic's is its
    /// location's, as its derived changes', so that whichever came last wins.
    public func pendingKey(of publication: Publication) -> PendingOutput.Key {
        address(ofStyleTopic: publication.topic).map { .style($0) } ?? .topic(publication.topic)
    }

    /// `{prefix}/summary/{dataset}/{venue}/{building}[/{floor}]`
    public func summary(_ key: Place) -> String {
        "\(prefix)/summary/\(key.dataset)/\(key.venue)/\(key.building)" + (key.floor.map { "/" + $0 } ?? "")
    }

    /// The floor or building of a summary topic, if it is one.
    public func place(ofSummaryTopic topic: String) -> Place? {
        let kind = prefix + "/summary/"
        guard topic.hasPrefix(kind) else { return nil }
        let parts = topic.dropFirst(kind.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 || parts.count == 4 else { return nil }
        return Place(dataset: parts[0], venue: parts[1], building: parts[2], floor: parts.count == 4 ? parts[3] : nil)
    }

    /// `{prefix}/legend/{dataset}`
    public func legend(_ dataset: String) -> String { "\(prefix)/legend/\(dataset)" }

    /// `{prefix}/status/{instance}` (`{prefix}/status` for a daemon alone on its prefix):
    /// `online`, or `offline` (the will).
    public var status: String { instance.map { "\(prefix)/status/\($0)" } ?? "\(prefix)/status" }

    /// A derived change at its style topic.
    public func publication(_ change: DerivedChange) -> Publication {
        Publication(topic: style(change.address), payload: payload(change), retain: retain)
    }

    /// A derived change's JSON.
    public func payload(_ change: DerivedChange) -> [UInt8] {
        var stream = JSONStream(capacity: 512)
        change.write(to: &stream, epoch: epoch)
        return stream.bytes
    }

    /// An empty retained payload at a style topic: MQTT's "gone", for the placement a
    /// location left.
    public func clearing(styleOf address: LocationAddress) -> Publication {
        Publication(topic: style(address), payload: [], retain: true)
    }

    /// A summary at its summary topic.
    public func publication(_ summary: SummaryTracker.Summary, updatedAt: LiveTimestamp) -> Publication {
        Publication(topic: self.summary(summary.key), payload: Array(summary.json(updatedAt: updatedAt, epoch: epoch).utf8), retain: retain)
    }

    /// A dataset's legend, always retained (a client that subscribes later needs it at once).
    public func publication(_ legend: Legend, dataset: String) -> Publication {
        Publication(topic: self.legend(dataset), payload: Array(legend.json.utf8), retain: true)
    }

    /// The daemon's status, always retained (`offline` is also its MQTT will).
    public func statusPublication(online: Bool) -> Publication {
        Publication(topic: status, payload: Array((online ? "online" : "offline").utf8), retain: true)
    }
}
