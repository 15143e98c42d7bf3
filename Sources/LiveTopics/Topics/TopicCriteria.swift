/// Which live-data topics to receive: each component is either a value or left out,
/// and a left-out component means "any value at that level" (MQTT `+`).
///
/// Criteria may instead be a raw MQTT filter (`ds1/#`) for what the seven components
/// cannot say.
public struct TopicCriteria: Hashable, Sendable, CustomStringConvertible {
    /// Either components or a raw filter.
    public enum Form: Hashable, Sendable {
        case components([LiveTopic.Component: String])
        case filter(TopicFilter)
    }

    public let form: Form

    /// Criteria from components; `nil` means any value.
    /// - Throws: ``TopicError/invalidComponent(component:value:reason:)`` for a component that
    ///   cannot be a topic level.
    public init(
        dataset: String? = nil, venue: String? = nil, building: String? = nil, floor: String? = nil,
        room: String? = nil, location: String? = nil, domain: String? = nil
    ) throws(TopicError) {
        var values: [LiveTopic.Component: String] = [:]
        for (component, value) in [
            (LiveTopic.Component.dataset, dataset), (.venue, venue), (.building, building), (.floor, floor),
            (.room, room), (.location, location), (.domain, domain),
        ] {
            guard let value else { continue }
            try LiveTopic.validateComponent(value, as: component)
            values[component] = value
        }
        form = .components(values)
    }

    /// Criteria written as a raw MQTT filter.
    public init(filter: TopicFilter) {
        form = .filter(filter)
    }

    /// The value required for a component, or `nil` when any value matches
    /// (always `nil` for a raw filter).
    public subscript(component: LiveTopic.Component) -> String? {
        if case .components(let values) = form { return values[component] }
        return nil
    }

    /// The MQTT filter that subscribes to exactly these criteria.
    public var filter: TopicFilter {
        switch form {
        case .filter(let filter):
            return filter
        case .components(let values):
            let string = LiveTopic.Component.allCases.map { values[$0] ?? "+" }.joined(separator: "/")
            // Each component was validated, so the joined filter is valid by construction.
            return try! TopicFilter(string)
        }
    }

    /// Whether a live topic meets these criteria.
    public func matches(_ topic: LiveTopic) -> Bool {
        matches(LocationAddress(topic), domain: topic.domain)
    }

    public var description: String { filter.string }
}
