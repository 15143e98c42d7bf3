import DisplayRules
import LiveTopics

/// A location's style changed: what to publish, retained, at
/// `{prefix}/style/{dataset}/{venue}/{building}/{floor}/{room}/{location}`.
///
/// Made on the hot path, read when published: it keeps what it was made from (the style,
/// the selected rules, the location's values, the changed fields as bits) and builds the
/// lists of rule names, fields and fresh values only when asked.
public struct DerivedChange: Sendable, Equatable {
    public var address: LocationAddress
    public var style: Style
    let selection: RuleSelection
    let engine: RuleEngine
    /// Fields that differ from the last published style (all set fields the first time).
    public var changedFields: StyleFieldSet
    /// The location's values, stale ones included (``live`` leaves them out).
    let values: [DomainValue]
    /// Counts this location's published changes.
    public var version: UInt64
    public var updatedAt: LiveTimestamp

    init(
        address: LocationAddress, style: Style, selection: RuleSelection, engine: RuleEngine, changed: StyleFieldSet,
        values: [DomainValue], version: UInt64, updatedAt: LiveTimestamp
    ) {
        self.address = address
        self.style = style
        self.selection = selection
        self.engine = engine
        self.changedFields = changed
        self.values = values
        self.version = version
        self.updatedAt = updatedAt
    }

    /// The style with the names of the rules behind it.
    public var derived: DerivedStyle { engine.derivedStyle(style, selection) }

    /// Fields that differ from the last published style, in field order.
    public var changed: [StyleField] { Array(changedFields) }

    /// The fresh live values the style was derived from.
    public var live: [DomainValue] { values.filter { !$0.stale } }

    public static func == (a: DerivedChange, b: DerivedChange) -> Bool {
        a.address == b.address && a.derived == b.derived && a.changedFields == b.changedFields && a.live == b.live
            && a.version == b.version && a.updatedAt == b.updatedAt
    }

    /// `{"location": …, "topic": {…}, "style": {…}, "changed": […], "rules": […], "live": {…}, "version": N, "updatedAt": …}`
    public var json: String {
        locationJSON(address, derived, changed: changed, live: live, version: version, updatedAt: updatedAt)
    }

    /// The topic below the prefix: `style/dataset/venue/building/floor/room/location`.
    public var topicSuffix: String { "style/" + address.description }
}

/// A location's state as JSON, in the derived-change layout (`changed` and `updatedAt` when given).
func locationJSON(
    _ address: LocationAddress, _ derived: DerivedStyle?, changed: [StyleField]?, live: [DomainValue], version: UInt64,
    updatedAt: LiveTimestamp?
) -> String {
    var object = JSONObjectWriter()
    object.add("location", address.location)
    object.add("topic", json: address.json)
    object.add("style", json: (derived?.style ?? Style()).json)
    if let changed { object.add("changed", json: jsonArray(changed.map(\.rawValue))) }
    object.add("rules", json: jsonArray(derived?.rules ?? []))
    var values = JSONObjectWriter()
    for value in live {
        var properties = JSONObjectWriter()
        for property in value.properties { properties.add(property.name, property.value) }
        properties.add("timestamp", value.timestamp.description)
        values.add(value.domain, json: properties.json)
    }
    object.add("live", json: values.json)
    object.add("version", Int(version))
    if let updatedAt { object.add("updatedAt", updatedAt.description) }
    return object.json
}

extension LocationRecord {
    /// `{"location": …, "topic": {…}, "style": {…}, "rules": […], "live": {…}, "version": N}`
    public var json: String {
        locationJSON(address, published, changed: nil, live: fresh, version: version, updatedAt: nil)
    }
}
