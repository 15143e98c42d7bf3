import CMosquitto

/// Process-wide facts about the C library.
public enum LibMosquitto {
    /// `mosquitto_lib_init` must run once per process, before any client exists.
    static let initialized: Void = {
        _ = mosquitto_lib_init()
    }()

    /// The library's version, such as `2.0.11`.
    public static var version: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var revision: Int32 = 0
        _ = mosquitto_lib_version(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }

    /// libmosquitto's own answer to "does this filter match this topic?"
    /// (`mosquitto_topic_matches_sub`), or `nil` when it calls either argument invalid.
    public static func topicMatches(filter: String, topic: String) -> Bool? {
        var result = false
        let code = mosquitto_topic_matches_sub(filter, topic, &result)
        return code == MOSQ_ERR_SUCCESS.raw ? result : nil
    }
}
