import DisplayRules
import LiveTopics

/// Everything the store knows about one location, as a value: what persistence writes and
/// what callers get to read.
public struct LocationRecord: Hashable, Sendable {
    public var address: LocationAddress
    /// The latest value per domain; stale ones are flagged.
    public var values: [DomainValue]
    /// The last published style; `nil` until the first change is published.
    public var published: DerivedStyle?
    public var version: UInt64

    public init(address: LocationAddress, values: [DomainValue] = [], published: DerivedStyle? = nil, version: UInt64 = 0) {
        self.address = address
        self.values = values
        self.published = published
        self.version = version
    }

    /// The fresh values, as rules read them.
    public var fresh: [DomainValue] { values.filter { !$0.stale } }
}

/// A location's record with its row in the state file: a number the store gives the
/// location when it first sees it, in order of arrival, and keeps as long as it tracks it
/// (a move keeps its row). Rows start at 1.
public struct LocationRow: Sendable, Equatable {
    public var row: Int64
    public var record: LocationRecord

    public init(row: Int64, record: LocationRecord) {
        self.row = row
        self.record = record
    }
}

/// A location inside the store: a reference, so that an update changes it in place
/// without copying (or re-hashing) anything. Kept small: at a million locations every
/// byte here is a megabyte. Only its store changes it, so its properties opt out of the
/// run-time exclusivity check as the store's do.
final class LocationState {
    // Stored properties are laid out in this order: what finding a location and its value
    // for an update's domain reads comes first, so that it is one line of memory.
    /// Where it is now (its identity, dataset and id, never changes; see ``LiveStore/apply(_:now:)``).
    @exclusivity(unchecked) var address: LocationAddress
    /// Its values; entries are added, removed or replaced by the methods below, which keep
    /// `domainTags` and `acceptedDomains` in step (an entry's other fields may be changed
    /// in place).
    @exclusivity(unchecked) var values: [DomainValue]
    /// The tags of the values' domains, to find a domain without reading every value.
    @exclusivity(unchecked) private(set) var domainTags: IdentifierTags
    /// Bit `i`: the topic of `values[i]`'s domain was accepted by the subscriptions of
    /// `acceptedGeneration` (see ``LiveStore/isAccepted(_:generation:)``).
    @exclusivity(unchecked) var acceptedDomains: UInt64 = 0
    @exclusivity(unchecked) var acceptedGeneration: UInt32 = 0
    /// The rules whose `where` criteria leave it out under the current rules
    /// (``RuleEngine/outOfScope(_:)``), as their number in the store's shared selections:
    /// 0 until worked out.
    @exclusivity(unchecked) var outOfScope: UInt32 = 0
    /// Changed since the last write.
    @exclusivity(unchecked) var dirty = false
    /// Its first style waits in the output's ``FirstStyles`` rather than as a change in
    /// line; in the padding after `dirty`.
    @exclusivity(unchecked) var firstStyleWaits = false
    /// The convergence that last saw its style at the broker (``SeenLocations``); in the
    /// padding after the flags.
    @exclusivity(unchecked) var seenBy: UInt16 = 0
    /// Its row in the state file (``LocationRow``); in the padding after the flags.
    @exclusivity(unchecked) var row: UInt32 = 0
    @exclusivity(unchecked) var version: UInt64
    /// One bit per domain with a `staleAfter` (the store numbers them) that has an entry in
    /// the expiry queue: at most one entry per value.
    @exclusivity(unchecked) var scheduledExpiries: UInt64 = 0
    /// What it adds to its floor and building summaries.
    @exclusivity(unchecked) var contribution: SummaryTracker.Contribution?
    /// Its floor's summary totals (and through it, its building's).
    @exclusivity(unchecked) var floorSummary: SummaryTracker.Aggregate
    /// The last published style, as its key under the current rules (shared with the
    /// locations that show the same style, see ``StyleKeyPool``): `nil` until the first
    /// change is published, and while `foreign` stands in for it.
    @exclusivity(unchecked) var published: SharedStyleKey?
    /// A published style that the current rules do not make (restored from a file written
    /// under other rules, or published before a reload), until the next derivation.
    @exclusivity(unchecked) var foreign: ForeignStyle?

    init(
        _ address: LocationAddress, values: [DomainValue], version: UInt64, published: PublishedStyle, floor: SummaryTracker.Aggregate,
        keys: inout StyleKeyPool
    ) {
        self.address = address
        self.values = values
        domainTags = IdentifierTags(values.lazy.map(\.domain))
        self.version = version
        floorSummary = floor
        setPublished(published, keys: &keys)
    }

    /// `keys`: the store's pool, that the key of a style the current rules make goes into.
    func setPublished(_ published: PublishedStyle, keys: inout StyleKeyPool) {
        switch published {
        case .none:
            self.published = nil
            foreign = nil
        case .key(let key):
            self.published = keys.share(key)
            foreign = nil
        case .foreign(let style):
            self.published = nil
            foreign = style
        }
    }

    /// The last published style and its rules, as `ruleEngine` (the current rules) tells them.
    func publishedStyle(_ ruleEngine: RuleEngine) -> DerivedStyle? { recordStyle(ruleEngine).derived }

    /// Whether the last published style's JSON is `json` (`false` when none is).
    func publishedStyle(_ ruleEngine: RuleEngine, isJSON json: UnsafeRawBufferPointer) -> Bool {
        switch recordStyle(ruleEngine) {
        case .none: false
        // The JSON its key keeps: compared without writing it again.
        case .kept(let rendered): rendered.styleJSON.elementsEqual(json)
        case .derived(let derived): derived.style.json.utf8.elementsEqual(json)
        }
    }

    /// The last published style as ``LiveStore/forEachRecord(_:in:_:)`` gives it: the
    /// rendering its key keeps when there is one (shared by every location of that style),
    /// so that a writer of many records encodes each kept style once.
    func recordStyle(_ ruleEngine: RuleEngine) -> RecordStyle {
        if let foreign { return .derived(foreign.derived) }
        guard let shared = published else { return .none }
        if let rendered = shared.rendered(under: ruleEngine, at: address) { return .kept(rendered) }
        return .derived(ruleEngine.derivedStyle(shared.key, at: address))
    }

    func record(_ ruleEngine: RuleEngine) -> LocationRecord {
        LocationRecord(address: address, values: values, published: publishedStyle(ruleEngine), version: version)
    }

    /// Where a domain's value is in `values` (`tag`: the domain's, when the caller has it).
    func index(of domain: String, tag: UInt8? = nil) -> Int? {
        values.withUnsafeBufferPointer { LiveValues.index(ofDomain: domain, tag: tag, in: $0, tags: domainTags) }
    }

    /// Where a domain's value is in `values`, found by the bytes of its name.
    func index(ofBytes domain: UnsafeRawBufferPointer) -> Int? {
        values.withUnsafeBufferPointer { values in
            domainTags.firstIndex(tag: IdentifierTags.tag(of: domain), count: values.count) {
                values[$0].domain.isSameIdentifier(asBytes: domain)
            }
        }
    }

    private static let headcountDomain = BuiltInDomain.headcount.rawValue
    private static let headcountTag = IdentifierTags.tag(of: headcountDomain)

    /// Where the value of the domain that counts people is (the summaries read it after
    /// most updates).
    var headcountIndex: Int? { index(of: Self.headcountDomain, tag: Self.headcountTag) }

    /// Replaces every value (what was remembered by position is forgotten).
    func setValues(_ newValues: [DomainValue]) {
        values = newValues
        domainTags = IdentifierTags(newValues.lazy.map(\.domain))
        acceptedDomains = 0
    }

    /// Adds the value of a domain that has none.
    func appendValue(_ value: DomainValue) {
        domainTags.set(IdentifierTags.tag(of: value.domain), at: values.count)
        values.append(value)
    }

    /// Removes the value at `index`; the later ones move down, so what was remembered by
    /// position is forgotten.
    func removeValue(at index: Int) {
        values.remove(at: index)
        domainTags = IdentifierTags(values.lazy.map(\.domain))
        acceptedDomains = 0
    }
}

/// A location's last published style, as the store keeps it.
package enum PublishedStyle: Sendable {
    case none
    /// A style the current rules make from this key.
    case key(StyleKey)
    /// A style the current rules do not make.
    case foreign(ForeignStyle)

    /// What to keep of a style published under `ruleEngine`'s rules (`trusted`: the rules
    /// have not changed since, so the style is what they make of its rule names and texts)
    /// or under other rules.
    package init(_ derived: DerivedStyle?, at address: LocationAddress, ruleEngine: RuleEngine, trusted: Bool) {
        guard let derived else {
            self = .none
            return
        }
        if let key = ruleEngine.styleKey(of: derived, at: address, verified: !trusted) {
            self = .key(key)
        } else {
            self = .foreign(ForeignStyle(derived, selection: ruleEngine.selection(named: derived.rules)))
        }
    }
}

/// A published style that the current rules do not make, with its rule names mapped onto
/// the current rules where they all exist (for the legend state until it is replaced).
package final class ForeignStyle: Sendable {
    let derived: DerivedStyle
    let selection: RuleSelection?

    init(_ derived: DerivedStyle, selection: RuleSelection?) {
        self.derived = derived
        self.selection = selection
    }
}
