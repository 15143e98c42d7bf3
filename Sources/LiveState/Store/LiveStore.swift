import DisplayRules
import LiveTopics

/// The current state of every location: the latest value per domain, the derived style,
/// a version. After every change it re-derives the style and reports a ``DerivedChange``
/// only when the style (or the rules behind it) really differs from the last published one.
///
/// Pure logic: time comes in as `now`, so staleness and summaries are testable with a
/// controllable clock; persistence reads ``takeDirty()``.
public struct LiveStore: Sendable {
    /// What happened to an update.
    public enum Outcome: Sendable, Equatable {
        /// Older than the stored value for the same location and domain.
        case ignoredOutOfOrder
        /// Applied; the style stayed the same, so nothing is published.
        case unchanged
        /// Applied, and the style changed.
        case changed(DerivedChange)
    }

    public struct Counters: Sendable, Equatable {
        public var applied = 0
        public var ignoredOutOfOrder = 0
        public var removals = 0
        public var expired = 0
        public var changes = 0

        public init() {}
    }

    public private(set) var engine: RuleEngine
    public private(set) var hiddenLayers = Set<String>()
    public private(set) var counters = Counters()
    public private(set) var summaries: SummaryTracker
    private var records: [LocationAddress: LocationRecord] = [:]
    private var expiries = ExpiryQueue()
    private var dirty = Set<LocationAddress>()

    public init(engine: RuleEngine, summaryInterval: Duration = .seconds(1)) {
        self.engine = engine
        summaries = SummaryTracker(interval: summaryInterval)
    }

    /// How many locations are tracked.
    public var count: Int { records.count }

    public subscript(address: LocationAddress) -> LocationRecord? { records[address] }

    /// Every tracked location.
    public var locations: Dictionary<LocationAddress, LocationRecord>.Values { records.values }

    /// When the next value goes stale, if any will.
    public var nextExpiry: LiveTimestamp? { expiries.next }

    // MARK: - Updates

    /// Applies one update: stores its value (or removes it, for an empty payload) and
    /// re-derives the location's style.
    public mutating func apply(_ update: LiveUpdate, now: LiveTimestamp) -> Outcome {
        let address = LocationAddress(update.topic)
        let domain = update.topic.domain
        var record = records[address] ?? LocationRecord(address: address)
        if update.isRemoval {
            guard let index = record.index(of: domain) else { return .unchanged }
            record.values.remove(at: index)
            counters.removals += 1
        } else {
            let staleAfter = engine.ruleSet.domains[domain]?.staleAfter
            let stale = staleAfter.map { update.timestamp.adding($0) <= now } ?? false
            let value = StoredValue(
                value: DomainValue(domain: domain, properties: update.properties, timestamp: update.timestamp),
                stale: stale)
            if let index = record.index(of: domain) {
                if update.timestamp < record.values[index].value.timestamp {
                    counters.ignoredOutOfOrder += 1
                    return .ignoredOutOfOrder
                }
                record.values[index] = value
            } else {
                record.values.append(value)
            }
            if let staleAfter, !stale {
                expiries.push(
                    .init(deadline: update.timestamp.adding(staleAfter), address: address, domain: domain, timestamp: update.timestamp))
            }
        }
        counters.applied += 1
        dirty.insert(address)
        let outcome = rederive(&record, now: now)
        records[address] = record
        return outcome
    }

    /// Marks values whose `staleAfter` has passed as absent and re-derives their locations.
    /// - Returns: the changes that causes.
    public mutating func expire(now: LiveTimestamp) -> [DerivedChange] {
        var changes: [DerivedChange] = []
        for entry in expiries.popDue(now) {
            guard var record = records[entry.address], let index = record.index(of: entry.domain),
                record.values[index].value.timestamp == entry.timestamp, !record.values[index].stale
            else { continue }
            record.values[index].stale = true
            counters.expired += 1
            dirty.insert(entry.address)
            if case .changed(let change) = rederive(&record, now: now) { changes.append(change) }
            records[entry.address] = record
        }
        return changes
    }

    // MARK: - Whole-store changes

    /// Hides or shows a layer; locations in it are re-published (as not visible when hidden).
    public mutating func setLayer(_ layer: String, hidden: Bool, now: LiveTimestamp) -> [DerivedChange] {
        let changed = hidden ? hiddenLayers.insert(layer).inserted : hiddenLayers.remove(layer) != nil
        return changed ? rederiveAll(now: now) : []
    }

    /// Takes new rules (a reloaded config) and re-derives every location.
    public mutating func replaceEngine(_ engine: RuleEngine, now: LiveTimestamp) -> [DerivedChange] {
        self.engine = engine
        return rederiveAll(now: now)
    }

    /// Re-derives every location (after a restore, a rules change, a layer toggle).
    public mutating func rederiveAll(now: LiveTimestamp) -> [DerivedChange] {
        var changes: [DerivedChange] = []
        for address in Array(records.keys) {
            var record = records[address]!
            if case .changed(let change) = rederive(&record, now: now) {
                changes.append(change)
                dirty.insert(address)
            }
            records[address] = record
        }
        return changes
    }

    // MARK: - Persistence

    /// The locations changed since the last call, for the write-behind writer.
    public mutating func takeDirty() -> [LocationRecord] {
        defer { dirty.removeAll(keepingCapacity: true) }
        return dirty.compactMap { records[$0] }
    }

    /// Marks locations for writing again (after a failed write).
    public mutating func markDirty(_ addresses: [LocationAddress]) {
        dirty.formUnion(addresses)
    }

    /// Whether changes wait to be written.
    public var hasDirty: Bool { !dirty.isEmpty }

    /// Puts back persisted locations: values, last published style and version. Staleness is
    /// rescheduled; call ``expire(now:)`` and ``rederiveAll(now:)`` after it to catch up.
    public mutating func restore(_ restored: [LocationRecord]) {
        records.reserveCapacity(restored.count)
        for record in restored {
            records[record.address] = record
            for stored in record.values where !stored.stale {
                if let staleAfter = engine.ruleSet.domains[stored.value.domain]?.staleAfter {
                    expiries.push(
                        .init(
                            deadline: stored.value.timestamp.adding(staleAfter), address: record.address,
                            domain: stored.value.domain, timestamp: stored.value.timestamp))
                }
            }
            summaries.update(record.address, contribution(record, record.published))
        }
    }

    // MARK: - Deriving

    private mutating func rederive(_ record: inout LocationRecord, now: LiveTimestamp) -> Outcome {
        let fresh = record.fresh
        let values = LiveValues(domains: fresh)
        let derived = engine.derive(record.address, values: values, hiddenLayers: hiddenLayers)
        summaries.update(record.address, contribution(record, derived, values: values))
        if let published = record.published, published.style == derived.style, published.rules == derived.rules {
            // The legend state follows the rules, so it is unchanged too.
            return .unchanged
        }
        let changed = derived.style.changedFields(from: record.published?.style ?? Style())
        record.published = derived
        record.version += 1
        counters.changes += 1
        return .changed(
            DerivedChange(
                address: record.address, derived: derived, changed: changed, live: fresh, version: record.version,
                updatedAt: now))
    }

    private func contribution(
        _ record: LocationRecord, _ derived: DerivedStyle?, values: LiveValues? = nil
    ) -> SummaryTracker.Contribution {
        let values = values ?? LiveValues(domains: record.fresh)
        let catalogCapacity = engine.ruleSet.catalog[record.address.location]?.capacity
        let occupancy = "occupancy"
        let people = values[PropertyReference(domain: occupancy, name: "nrOfPeople")].flatMap { Int($0) } ?? 0
        let capacity = values[PropertyReference(domain: occupancy, name: "capacity")].flatMap { Int($0) } ?? catalogCapacity ?? 0
        return .init(state: derived?.legendState ?? SummaryTracker.noState, people: people, capacity: capacity)
    }

    /// Summaries due for publishing (see ``SummaryTracker/takeDue(now:)``).
    public mutating func takeDueSummaries(now: LiveTimestamp) -> [SummaryTracker.Summary] {
        summaries.takeDue(now: now)
    }
}

extension LiveTimestamp {
    /// This time plus a duration.
    public func adding(_ duration: Duration) -> LiveTimestamp {
        LiveTimestamp(millisecondsSince1970: millisecondsSince1970 + duration.milliseconds)
    }
}
