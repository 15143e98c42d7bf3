/// Why a topic name, a topic filter or a topic component was refused.
///
/// Levels are counted from 1, as a person reads a topic left to right.
public enum TopicError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The topic or filter is the empty string, which MQTT does not allow.
    case empty(kind: Kind)
    /// The string is longer than the 65,535 bytes an MQTT topic may have.
    case tooLong(kind: Kind, bytes: Int)
    /// A level contains the NUL character.
    case nullCharacter(kind: Kind, string: String, level: Int)
    /// A topic name (not a filter) contains `+` or `#`.
    case wildcardInTopic(topic: String, level: Int, wildcard: Character)
    /// A filter has `+` or `#` next to other characters in the same level.
    case partialWildcard(filter: String, level: Int, wildcard: Character)
    /// A filter has `#` somewhere other than the last level.
    case multiLevelNotLast(filter: String, level: Int)
    /// A live-data topic does not have exactly seven levels.
    case wrongLevelCount(topic: String, count: Int)
    /// A level of a live-data topic is empty.
    case emptyComponent(topic: String, level: Int, component: LiveTopic.Component)
    /// A component given on its own (criteria, a flag) cannot be a topic level.
    case invalidComponent(component: LiveTopic.Component, value: String, reason: String)

    /// What kind of string was being checked.
    public enum Kind: String, Sendable {
        case topic
        case filter
    }

    public var description: String {
        switch self {
        case .empty(let kind):
            return "\(kind == .topic ? "a topic" : "a topic filter") cannot be empty"
        case .tooLong(let kind, let bytes):
            return "\(kind == .topic ? "topic" : "topic filter") is \(bytes) bytes long; MQTT allows at most 65535"
        case .nullCharacter(let kind, let string, let level):
            return "level \(level) of \(quoted(string)): a \(kind.rawValue) cannot contain the NUL character"
        case .wildcardInTopic(let topic, let level, let wildcard):
            return "level \(level) of \(quoted(topic)): a topic name cannot contain '\(wildcard)' (wildcards belong in filters)"
        case .partialWildcard(let filter, let level, let wildcard):
            return "level \(level) of \(quoted(filter)): '\(wildcard)' must be a whole level"
        case .multiLevelNotLast(let filter, let level):
            return "level \(level) of \(quoted(filter)): '#' must be the last level"
        case .wrongLevelCount(let topic, let count):
            return "\(quoted(topic)) has \(count) level\(count == 1 ? "" : "s"); a live-data topic has 7: "
                + LiveTopic.Component.allCases.map(\.rawValue).joined(separator: "/")
        case .emptyComponent(let topic, let level, let component):
            return "level \(level) (\(component.rawValue)) of \(quoted(topic)) is empty"
        case .invalidComponent(let component, let value, let reason):
            return "\(component.rawValue) \(quoted(value)): \(reason)"
        }
    }
}

/// Quotes a string for an error message, escaping what would make it unreadable.
func quoted(_ string: String) -> String {
    var out = "\""
    for scalar in string.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\0": out += "\\0"
        case "\n": out += "\\n"
        case "\t": out += "\\t"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
