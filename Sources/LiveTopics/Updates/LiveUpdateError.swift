/// Why a payload could not be read as a live update.
public enum LiveUpdateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The payload is larger than the configured limit.
    case payloadTooLarge(bytes: Int, limit: Int)
    /// The payload is not well-formed JSON; the reason names the byte.
    case notJSON(reason: String)
    /// The payload is JSON, but not an object.
    case notAnObject(found: String)
    /// The object has no `properties` member.
    case missingProperties
    /// `properties` is there but is not an object.
    case propertiesNotAnObject(found: String)
    /// A property's value is an object or an array.
    case badPropertyValue(name: String, found: String)
    /// A known field has the wrong type (`id` must be a string, …).
    case badField(name: String, expected: String, found: String)
    /// `timestamp` is neither ISO-8601 with a time zone nor epoch milliseconds.
    case badTimestamp(String)
    /// More properties than the limit (``PayloadLimits/properties``): decoding stopped there.
    case tooManyProperties(limit: Int)
    /// A property's name or value is longer than the limit, in bytes.
    case propertyTooLong(name: String, part: String, bytes: Int, limit: Int)

    public var description: String {
        switch self {
        case .payloadTooLarge(let bytes, let limit):
            return "payload is \(bytes) bytes; the limit is \(limit)"
        case .notJSON(let reason):
            return "payload is not JSON: \(reason)"
        case .notAnObject(let found):
            return "payload must be a JSON object, found \(found)"
        case .missingProperties:
            return "payload has no \"properties\" object (it is the one required field)"
        case .propertiesNotAnObject(let found):
            return "\"properties\" must be an object of strings, found \(found)"
        case .badPropertyValue(let name, let found):
            return "property \(quoted(name)) must be a string, number or boolean, found \(found)"
        case .badField(let name, let expected, let found):
            return "\(quoted(name)) must be \(expected), found \(found)"
        case .tooManyProperties(let limit):
            return "more than \(limit) properties (limits.properties)"
        case .propertyTooLong(let name, let part, let bytes, let limit):
            let setting = part == "name" ? "limits.nameLength" : "limits.valueLength"
            return "property \(quoted(name))'s \(part) is \(bytes) bytes; the limit is \(limit) (\(setting))"
        case .badTimestamp(let text):
            return "\"timestamp\" \(quoted(text)) is neither ISO-8601 with a time zone "
                + "(2026-11-21T10:15:03.120Z) nor epoch milliseconds"
        }
    }
}
