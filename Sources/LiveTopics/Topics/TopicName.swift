/// Checks for MQTT topic names: the strings a message is published to.
public enum TopicName {
    /// The longest topic or filter MQTT can carry, in UTF-8 bytes.
    public static let maximumLength = 65_535

    /// Validates an MQTT topic name (any number of levels, no wildcards).
    /// - Throws: ``TopicError`` when the name is empty, too long, or contains `+`, `#` or NUL.
    public static func validate(_ topic: String) throws(TopicError) {
        try checkLength(topic, kind: .topic)
        var level = 1
        for byte in topic.utf8 {
            switch byte {
            case UInt8(ascii: "/"): level += 1
            case UInt8(ascii: "+"): throw .wildcardInTopic(topic: topic, level: level, wildcard: "+")
            case UInt8(ascii: "#"): throw .wildcardInTopic(topic: topic, level: level, wildcard: "#")
            case 0: throw .nullCharacter(kind: .topic, string: topic, level: level)
            default: continue
            }
        }
    }

    static func checkLength(_ string: String, kind: TopicError.Kind) throws(TopicError) {
        let count = string.utf8.count
        if count == 0 { throw .empty(kind: kind) }
        if count > maximumLength { throw .tooLong(kind: kind, bytes: count) }
    }
}
