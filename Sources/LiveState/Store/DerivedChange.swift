import DisplayRules
import LiveTopics

/// A location's style changed: what to publish, retained, at
/// `{prefix}/style/{dataset}/{venue}/{building}/{floor}/{room}/{location}`.
///
/// Made on the hot path, read when published: it keeps the style's key, the one before and
/// the location's values, and builds the style, the names of its rules, the changed fields
/// and the fresh values only when asked.
public struct DerivedChange: Sendable, Equatable {
    /// The published style a change replaces.
    enum Before: Sendable {
        case none
        case key(SharedStyleKey)
        case style(ForeignStyle)
        /// Nothing at this topic: the location has just moved here from that address.
        case moved(MovedFrom)
    }

    /// Where a location moved from: a reference, so that the case costs ``Before`` no more
    /// than the other cases (a copy of it stays one retain).
    final class MovedFrom: Sendable {
        let address: LocationAddress

        init(_ address: LocationAddress) {
            self.address = address
        }
    }

    public var address: LocationAddress
    /// The new style's key, as the location holds it (a reference: a change that waits to
    /// be published takes 64 bytes).
    let shared: SharedStyleKey
    var key: StyleKey { shared.key }
    var before: Before
    let ruleEngine: RuleEngine
    /// The location's values, stale ones included (``live`` leaves them out).
    let values: [DomainValue]
    /// Counts this location's published changes.
    public var version: UInt64

    /// The address the location moved away from with this change: its style topic is to be
    /// cleared (an empty retained payload) as the new one is published.
    public var movedFrom: LocationAddress? {
        if case .moved(let from) = before { return from.address }
        return nil
    }
    public var updatedAt: LiveTimestamp

    /// The location's first published style here: it is new to the state (or nothing of it
    /// was published before).
    public var isFirst: Bool { if case .none = before { true } else { false } }

    /// Whether the location has a value of a domain for which `matches` holds.
    public func hasValue(ofDomain matches: (String) -> Bool) -> Bool { values.contains { matches($0.domain) } }

    init(
        address: LocationAddress, key: SharedStyleKey, before: Before, ruleEngine: RuleEngine, values: [DomainValue],
        version: UInt64, updatedAt: LiveTimestamp
    ) {
        self.address = address
        self.shared = key
        self.before = before
        self.ruleEngine = ruleEngine
        self.values = values
        self.version = version
        self.updatedAt = updatedAt
    }

    /// The new style.
    public var style: Style { ruleEngine.style(key, at: address) }

    /// The style with the names of the rules behind it.
    public var derived: DerivedStyle { ruleEngine.derivedStyle(style, key.selection) }

    /// Fields that differ from the last published style (all set fields the first time).
    public var changedFields: StyleFieldSet { changedFields(style) }

    /// Fields that differ from the last published style, in field order.
    public var changed: [StyleField] { Array(changedFields) }

    private func changedFields(_ style: Style) -> StyleFieldSet {
        let old: Style = switch before {
        case .none, .moved: Style()
        case .key(let key): ruleEngine.style(key.key, at: address)
        case .style(let foreign): foreign.derived.style
        }
        return style.changedFieldSet(from: old)
    }

    /// The fresh live values the style was derived from.
    public var live: [DomainValue] { values.filter { !$0.stale } }

    public static func == (a: DerivedChange, b: DerivedChange) -> Bool {
        a.address == b.address && a.derived == b.derived && a.changedFields == b.changedFields && a.live == b.live
            && a.version == b.version && a.updatedAt == b.updatedAt
    }

    /// `{"location": …, "topic": {…}, "style": {…}, "changed": […], "rules": […], "live": {…}, "version": N, "updatedAt": …}`
    public var json: String {
        var stream = JSONStream(capacity: 512)
        write(to: &stream)
        return stream.text
    }

    /// Writes ``json`` into `stream`'s bytes: what is published, built without a `String`;
    /// with `"epoch"` when given (a failover partition's replicas: see `OutputFormat.epoch`).
    ///
    /// The style, its rules and a first style's `changed` come as kept bytes when the key
    /// keeps them (``SharedStyleKey/rendered(under:at:)``); otherwise they are derived here.
    public func write(to stream: inout JSONStream, epoch: UInt64? = nil) {
        guard let rendered = shared.rendered(under: ruleEngine, at: address) else {
            let style = self.style
            let parts = DerivedParts(derived: ruleEngine.derivedStyle(style, key.selection), changed: changedFields(style))
            return writeLocationJSON(
                to: &stream, address, parts, values: values, epoch: epoch, version: version, updatedAt: updatedAt)
        }
        let changed: StyleFieldSet? = switch before {
        case .none, .moved: nil
        case .key(let older):
            rendered.style.changedFieldSet(
                from: older.rendered(under: ruleEngine, at: address)?.style ?? ruleEngine.style(older.key, at: address))
        case .style(let foreign): rendered.style.changedFieldSet(from: foreign.derived.style)
        }
        writeLocationJSON(
            to: &stream, address, RenderedParts(rendered: rendered, changed: changed), values: values, epoch: epoch,
            version: version, updatedAt: updatedAt)
    }
}

/// A location's state as JSON, in the derived-change layout (`changed` and `updatedAt` when
/// given); of `values`, the fresh ones (stale ones are left out, without a filtered copy).
func writeLocationJSON(
    to stream: inout JSONStream, _ address: LocationAddress, _ derived: DerivedStyle?, changed: StyleFieldSet?,
    values: [DomainValue], epoch: UInt64? = nil, version: UInt64, updatedAt: LiveTimestamp?
) {
    writeLocationJSON(
        to: &stream, address, DerivedParts(derived: derived, changed: changed), values: values, epoch: epoch,
        version: version, updatedAt: updatedAt)
}

/// What a style writes into the derived-change layout. Values of a protocol rather than
/// closures: the layout is specialized for each kind, with no closure context to allocate
/// or retain for every change.
private protocol StyleParts {
    func writeStyle(to stream: inout JSONStream)
    /// Whether the layout has `changed` (a location's record leaves it out).
    var hasChanged: Bool { get }
    func writeChanged(to stream: inout JSONStream)
    func writeRules(to stream: inout JSONStream)
}

/// A pooled key's kept bytes (``RenderedStyle``).
private struct RenderedParts: StyleParts {
    let rendered: RenderedStyle
    /// The fields that changed, worked out here; `nil` for a first style, whose `changed`
    /// (all its set fields) is kept too.
    let changed: StyleFieldSet?

    func writeStyle(to stream: inout JSONStream) { stream.raw(json: rendered.styleJSON) }

    var hasChanged: Bool { true }

    func writeChanged(to stream: inout JSONStream) {
        if let changed { writeFieldNames(changed, to: &stream) } else { stream.raw(json: rendered.allFieldsJSON) }
    }

    func writeRules(to stream: inout JSONStream) { stream.raw(json: rendered.rulesJSON) }
}

/// A style derived as it is written (or none: the empty style).
private struct DerivedParts: StyleParts {
    let derived: DerivedStyle?
    let changed: StyleFieldSet?

    func writeStyle(to stream: inout JSONStream) { (derived?.style ?? Style()).write(to: &stream) }

    var hasChanged: Bool { changed != nil }

    func writeChanged(to stream: inout JSONStream) {
        if let changed { writeFieldNames(changed, to: &stream) }
    }

    func writeRules(to stream: inout JSONStream) { writeRuleNames(derived?.rules ?? [], to: &stream) }
}

/// The layout itself, the style's parts written by `parts`. What comes before and after them
/// is two runs of the stream's pieces (``JSONStream/write(maximum:_:)``): a capacity check
/// each, not one a key and one a value.
private func writeLocationJSON(
    to stream: inout JSONStream, _ address: LocationAddress, _ parts: some StyleParts, values: [DomainValue],
    epoch: UInt64?, version: UInt64, updatedAt: LiveTimestamp?
) {
    typealias Cursor = JSONStream.Cursor
    address.withPathBytes { path in
        let id = UnsafeRawBufferPointer(rebasing: path[((path.lastIndex(of: UInt8(ascii: "/")) ?? -1) + 1)...])
        let maximum =
            3 + Cursor.maximum(key: "location") + Cursor.maximum(text: id.count) + Cursor.maximum(key: "topic")
            + address.jsonMaximum + Cursor.maximum(key: "style")
        stream.write(maximum: maximum) { json in
            json.beginObject()
            json.key("location")
            json.string(bytes: id)
            json.key("topic")
            address.write(to: &json)
            json.key("style")
        }
    }
    parts.writeStyle(to: &stream)
    writePosition(to: &stream, values)
    if parts.hasChanged {
        stream.key("changed")
        parts.writeChanged(to: &stream)
    }
    stream.key("rules")
    parts.writeRules(to: &stream)
    var maximum =
        Cursor.maximum(key: "live") + 2 + Cursor.maximum(key: "epoch") + Cursor.integerMaximum
        + Cursor.maximum(key: "version") + Cursor.integerMaximum + Cursor.maximum(key: "updatedAt")
        + Cursor.timestampMaximum + Cursor.maximum(key: "format") + Cursor.integerMaximum + 1
    for value in values where !value.stale {
        maximum += Cursor.maximum(text: value.domain.utf8.count) + 4 + Cursor.maximum(key: "timestamp") + Cursor.timestampMaximum
        for property in value.properties {
            maximum += Cursor.maximum(text: property.name.utf8.count) + Cursor.maximum(text: property.value.utf8.count)
        }
    }
    stream.write(maximum: maximum) { json in
        json.key("live")
        json.beginObject()
        for value in values where !value.stale {
            json.key(text: value.domain)
            json.beginObject()
            for property in value.properties {
                json.key(text: property.name)
                json.string(property.value)
            }
            json.key("timestamp")
            json.timestamp(value.timestamp)
            json.endObject()
        }
        json.endObject()
        if let epoch {
            json.key("epoch")
            json.integer(Int64(clamping: epoch))
        }
        json.key("version")
        json.integer(Int64(clamping: version))
        if let updatedAt {
            json.key("updatedAt")
            json.timestamp(updatedAt)
        }
        json.key("format")
        json.integer(Int64(WireFormat.version))
        json.endObject()
    }
}

/// `["occupied"]`: rule names, in application order.
private func writeRuleNames(_ rules: [String], to stream: inout JSONStream) {
    stream.beginArray()
    for rule in rules { stream.string(rule) }
    stream.endArray()
}

/// `"position": {"latitude": …, "longitude": …, "floorIndex": …}` from the fresh value of
/// the placement domain (``BuiltInDomain/placement``) among `values`, as numbers; nothing
/// without one. A property that is not a number is left out.
func writePosition(to stream: inout JSONStream, _ values: [DomainValue]) {
    guard let value = values.first(where: { !$0.stale && $0.domain == BuiltInDomain.placement.rawValue }) else { return }
    stream.key("position")
    stream.beginObject()
    for property in BuiltInDomain.placement.properties {
        switch property.type {
        case .integer:
            if let number = value.properties.int(property) { stream.add(text: property.name, number) }
        case .number, .boolean:
            if let number = value.properties.double(property), number.isFinite { stream.add(text: property.name, number) }
        }
    }
    stream.endObject()
}

extension LocationRecord {
    /// `{"location": …, "topic": {…}, "style": {…}, "rules": […], "live": {…}, "version": N}`
    public var json: String {
        var stream = JSONStream(capacity: 512)
        writeLocationJSON(to: &stream, address, published, changed: nil, values: fresh, version: version, updatedAt: nil)
        return stream.text
    }
}
