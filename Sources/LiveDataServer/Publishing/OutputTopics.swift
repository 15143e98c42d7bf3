import LiveState
import LiveTopics

/// The topics the daemon publishes to, below its prefix.
public struct OutputTopics: Sendable {
    public let prefix: String

    public init(prefix: String) {
        self.prefix = prefix
    }

    /// `{prefix}/style/{dataset}/{venue}/{building}/{floor}/{room}/{location}`
    public func style(_ address: LocationAddress) -> String { "\(prefix)/style/\(address)" }
    /// `{prefix}/summary/{dataset}/{venue}/{building}[/{floor}]`
    public func summary(_ key: SummaryTracker.Key) -> String { "\(prefix)/\(key.topicSuffix)" }
    /// `{prefix}/legend/{dataset}`
    public func legend(_ dataset: String) -> String { "\(prefix)/legend/\(dataset)" }
    /// `{prefix}/status`: `online`, or `offline` (the will).
    public var status: String { "\(prefix)/status" }
}
