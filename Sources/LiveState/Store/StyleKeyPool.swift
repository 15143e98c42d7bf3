import DisplayRules
import LiveTopics
import Synchronization

/// A published style's key, one object for every location that shows that style.
final class SharedStyleKey: Sendable {
    let key: StyleKey
    /// The pool holds it. A key past the pool's limit is one location's (a label that
    /// differs everywhere): nothing rendered is kept for it, so that it costs no more.
    let pooled: Bool
    /// What a published change of this style writes that depends on the key alone, once
    /// rendered, per variant (see ``RenderedStyle``); at most ``variantLimit``.
    private let kept = Mutex<[RenderedStyle]>([])
    static let variantLimit = 8

    init(_ key: StyleKey, pooled: Bool = false) {
        self.key = key
        self.pooled = pooled
    }

    /// Whether this is `other`'s object: its key compared field by field where it is kept
    /// (`key == other` would copy the key out first, retaining its texts).
    @inline(__always)
    func holds(_ other: StyleKey) -> Bool {
        key.selection == other.selection && key.hidden == other.hidden && key.label == other.label
            && key.badgeText == other.badgeText
    }

    /// The style's published parts under `engine` at `address`, rendered the first time
    /// they are asked for there; `nil` when they cannot be kept: the key is not pooled, the
    /// location has a style of its own, or the parts kept have reached their budget.
    func rendered(under engine: RuleEngine, at address: LocationAddress) -> RenderedStyle? {
        guard pooled, let variant = engine.styleVariant(at: address) else { return nil }
        let generation = engine.generation
        return kept.withLock { kept -> RenderedStyle? in
            if let rendered = kept.first(where: { $0.generation == generation && $0.variant == variant }) { return rendered }
            // Parts of earlier rules are of no more use.
            kept.removeAll { $0.generation != generation }
            guard kept.count < Self.variantLimit, let made = RenderedStyle(key, engine: engine, variant: variant, at: address) else {
                return nil
            }
            kept.append(made)
            return made
        }
    }
}

/// The parts of a published change that a style key decides: the style, its JSON, the
/// names of its rules, and the `changed` list of a location's first style (every set
/// field). Rendered once per pooled key (and catalog type) and kept with it, so that a change writes them as
/// bytes: layering the style, listing its rules and writing its fields was half the work
/// of publishing a change.
///
/// The bytes kept by all keys together are bounded (``budget``): past it, a change renders
/// its style as it goes.
package final class RenderedStyle: Sendable {
    let generation: Int
    /// ``RuleEngine/styleVariant(at:)`` of the locations it serves.
    let variant: Int32
    /// The style and the names of its rules.
    package let derived: DerivedStyle
    var style: Style { derived.style }
    let styleJSON: [UInt8]
    let rulesJSON: [UInt8]
    /// `changed` when nothing was published before: the style's set fields.
    let allFieldsJSON: [UInt8]

    /// The bytes all kept parts may take.
    static let budget = 8 << 20
    private static let keptBytes = Atomic<Int>(0)

    init?(_ key: StyleKey, engine: RuleEngine, variant: Int32, at address: LocationAddress) {
        let derived = engine.derivedStyle(key, at: address)
        var stream = JSONStream(capacity: 256)
        derived.style.write(to: &stream)
        styleJSON = stream.bytes
        stream.reset()
        stream.beginArray()
        for rule in derived.rules { stream.string(rule) }
        stream.endArray()
        rulesJSON = stream.bytes
        stream.reset()
        writeFieldNames(derived.style.setFields, to: &stream)
        allFieldsJSON = stream.bytes
        let size = styleJSON.count + rulesJSON.count + allFieldsJSON.count + 256
        guard Self.keptBytes.add(size, ordering: .relaxed).newValue <= Self.budget else {
            Self.keptBytes.subtract(size, ordering: .relaxed)
            return nil
        }
        generation = engine.generation
        self.variant = variant
        self.derived = derived
    }

    deinit {
        Self.keptBytes.subtract(styleJSON.count + rulesJSON.count + allFieldsJSON.count + 256, ordering: .relaxed)
    }
}

/// `["polygonFillColor", "label"]`: fields by name, in field order.
func writeFieldNames(_ fields: StyleFieldSet, to stream: inout JSONStream) {
    stream.beginArray()
    for field in fields { stream.string(field.rawValue) }
    stream.endArray()
}

/// The style keys the locations hold, one object per distinct key: a location holds a
/// reference (8 bytes) where a key takes 57, and a venue shows few distinct styles (the
/// rules' combinations and the labels' texts: "3/8", "CO2 1200"). At a million locations
/// that is 50 MB.
///
/// Keys no location holds any more are dropped when the pool has doubled since the last
/// sweep. Past ``limit`` distinct keys (labels that differ per location), new keys are no
/// longer pooled: each such location holds an object of its own, so a pool never grows
/// without bound.
struct StyleKeyPool {
    private var pool: [StyleKey: SharedStyleKey] = [:]
    /// The last one shared: a restore reads locations in address order, and a room's or a
    /// floor's neighbours tend to show the same style.
    private var last: SharedStyleKey?
    /// Keys shared lately, one per slot of ``slot(of:)``: a venue's changes mostly come
    /// back to a few styles (occupied with 1 to 8 people, vacant), which the last one alone
    /// misses as they take turns, and the dictionary then hashes the whole key (its texts
    /// too) for each. A slot's key is compared whole, so a wrong slot only costs a look.
    private var recent = [SharedStyleKey?](repeating: nil, count: Self.recentSlots)
    private var sweepAt = 1024
    static let limit = 1 << 16
    static let recentSlots = 64

    /// The shared object of `key`.
    mutating func share(_ key: StyleKey) -> SharedStyleKey {
        if let last, last.holds(key) { return last }
        let slot = Self.slot(of: key)
        if let cached = recent[slot], cached.holds(key) {
            last = cached
            return cached
        }
        let shared = pooled(key)
        last = shared
        if shared.pooled { recent[slot] = shared }
        return shared
    }

    /// A key's slot among the ``recent`` ones: its rules, and its texts' lengths and first
    /// bytes (labels such as "3" and "4" differ there), mixed.
    private static func slot(of key: StyleKey) -> Int {
        var mix = key.selection.fingerprint &* 0x9E37_79B9_7F4A_7C15
        if let label = key.label { mix = (mix ^ leadingBytes(label)) &* 0xA076_1D64_78BD_642F }
        if let text = key.badgeText { mix = (mix ^ leadingBytes(text)) &* 0xE703_7ED1_A0B4_28DB }
        if key.hidden { mix = ~mix }
        return Int(truncatingIfNeeded: mix >> 58) & (recentSlots - 1)
    }

    /// A text's first seven bytes and its length, as one word.
    private static func leadingBytes(_ text: String) -> UInt64 {
        text.utf8.withContiguousStorageIfAvailable { bytes in
            var word = UInt64(truncatingIfNeeded: bytes.count) << 56
            for index in 0..<min(bytes.count, 7) { word |= UInt64(bytes[index]) << (8 * UInt64(index)) }
            return word
        } ?? UInt64(truncatingIfNeeded: text.utf8.count)
    }

    private mutating func pooled(_ key: StyleKey) -> SharedStyleKey {
        if let existing = pool[key] { return existing }
        if pool.count >= sweepAt { sweep() }
        let pooled = pool.count < Self.limit
        let made = SharedStyleKey(key, pooled: pooled)
        if pooled { pool[key] = made }
        return made
    }

    /// How many distinct keys the pool holds.
    var count: Int { pool.count }

    /// Drops the keys that only the pool holds.
    private mutating func sweep() {
        for key in Array(pool.keys) {
            guard var object = pool.removeValue(forKey: key) else { continue }
            if !isKnownUniquelyReferenced(&object) { pool[key] = object }
        }
        sweepAt = max(1024, pool.count * 2)
    }
}

/// A location's last published style, as a record of it is written
/// (``LiveStore/forEachRecord(_:in:_:)``).
package enum RecordStyle {
    /// None was published.
    case none
    /// Its key's kept rendering: every location that shows this object shows the same style.
    case kept(RenderedStyle)
    /// Derived for this location alone (a style of its own, or a key with nothing kept).
    case derived(DerivedStyle)

    package var derived: DerivedStyle? {
        switch self {
        case .none: nil
        case .kept(let rendered): rendered.derived
        case .derived(let derived): derived
        }
    }
}
