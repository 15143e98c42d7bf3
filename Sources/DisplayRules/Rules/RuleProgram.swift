import LiveTopics

/// Every rule condition of a rule set, compiled together into one flat array of plain
/// nodes, with each property the conditions read given a slot. Deriving a style fills the
/// slots once (one lookup and one number parse per property) and then evaluates the rules
/// without reference counting, allocation or string building.
///
/// Immutable after `init`; the buffers it reads on every update are only ever read, so it
/// is safe to share (hence `@unchecked`: they are pointers).
final class RuleProgram: @unchecked Sendable {
    struct Node {
        enum Kind: UInt8 {
            case number, string, boolean, property, exists, negate, arithmetic, compare, and, or, not, truth
            /// A numeric comparison of a property (slot `a`) with a number literal (`value`),
            /// the most common condition, evaluated without visiting two child nodes.
            case compareSlotWithNumber
        }

        var kind: Kind
        /// The operator of an `.arithmetic` node.
        var arithmetic: CompiledExpression.Arithmetic = .add
        /// The operator of a `.compare` or `.compareSlotWithNumber` node.
        var comparison: CompiledExpression.Comparison = .equal
        /// What a `.compare` node compares.
        var comparisonKind: CompiledExpression.ComparisonKind = .numeric
        /// A child node, a slot, or a string literal, by kind.
        var a: Int32 = 0
        var b: Int32 = 0
        /// A number literal, or a boolean literal as 0 or 1.
        var value: Double = 0
    }

    /// A rule as the evaluator sees it: plain values only.
    struct CompiledRule {
        /// Index into `domains`, or -1 for a rule without a domain.
        var domain: Int32
        var root: Int32
        /// Its `where` criteria must be checked against the values at every evaluation:
        /// a rule without a domain, in scope when any fresh domain is. (The scope of a rule
        /// with a domain depends on the address alone: see ``outOfScope(_:)``.)
        var hasValueScope: Bool
    }

    /// A slot's value during one derivation, read on first use. Plain data: where the
    /// text is among the values (not a copy of it) and the number parsed from it, so that
    /// filling and dropping slots costs no reference counting.
    struct SlotValue {
        /// 0 not read yet, 1 missing, 2 found.
        var state: UInt8 = 0
        var hasNumber = false
        var number: Double = 0
        var position = LiveValues.PropertySlot(domain: 0, property: 0)
    }

    /// Distinct domains the rules name, in first-seen order (at most 64 are told apart quickly).
    let domains: [String]
    let rules: [CompiledRule]
    let ruleNames: [String]
    /// Per rule, its legend title (its `legend`, else its name); ``legendTitles`` has each once.
    let titlePerRule: [String]
    let styles: [StyleTemplate]
    let scopes: [TopicCriteria?]
    /// Per rule, the components its `where` criteria require, to compare one by one with
    /// a location's; `nil` without criteria or for a raw filter.
    let scopeComponents: [[(LiveTopic.Component, String)]?]
    let ruleDomains: [String?]
    /// Per domain, the rules whose result can change when that domain's value changes: the
    /// rules of the domain and those that read it. Rules without a domain are in every set.
    let dependents: [String: RuleSelection]
    let everywhere: RuleSelection
    /// Every rule.
    let allRules: RuleSelection
    /// The rules with a domain and `where` criteria: whether they apply at a location
    /// depends on its address alone.
    let addressScoped: RuleSelection
    /// Per entry of `domains`, its dependents together with `everywhere`: what an update of
    /// that domain re-evaluates, found without hashing the domain's name.
    let recheckByDomain: [RuleSelection]
    /// The rules whose style sets a label, a badge text, a layer.
    let labelRules: RuleSelection
    let badgeTextRules: RuleSelection
    let layerRules: RuleSelection
    let visibleRules: RuleSelection
    /// Per rule, the domains its label and badge text templates read: bit `i` for
    /// `domains[i]` (of the first 63), bit 63 for any other or an unqualified reference.
    let labelReads: [UInt64]
    let badgeTextReads: [UInt64]
    /// Each distinct legend title once, in rule order, and each rule's index into it.
    let legendTitles: [String]
    let titleIDs: [Int32]

    // What every derivation reads, in buffers (see ``FrozenBuffer``).
    private let nodeBuffer: FrozenBuffer<Node>
    private let ruleBuffer: FrozenBuffer<CompiledRule>
    private let literalBuffer: FrozenBuffer<String>
    private let referenceBuffer: FrozenBuffer<PropertyReference>
    /// Per slot, its domain's index in `domains`, or -1 (not a rule domain, or unqualified).
    private let slotDomainBuffer: FrozenBuffer<Int32>
    private let domainBuffer: FrozenBuffer<String>
    private let domainTagBuffer: FrozenBuffer<UInt8>
    /// Whether a rule has no domain (it applies when any domain has a fresh value).
    private let hasRulesWithoutDomain: Bool

    init(_ rules: [Rule]) {
        var builder = Builder()
        var domains: [String] = []
        var compiled: [CompiledRule] = []
        for rule in rules {
            var domainIndex: Int32 = -1
            if let domain = rule.domain {
                if let existing = domains.firstIndex(of: domain) {
                    domainIndex = Int32(existing)
                } else {
                    domains.append(domain)
                    domainIndex = Int32(domains.count - 1)
                }
            }
            compiled.append(
                CompiledRule(
                    domain: domainIndex, root: builder.flatten(rule.condition.root),
                    hasValueScope: rule.scope != nil && rule.domain == nil))
        }
        self.domains = domains
        self.rules = compiled
        var dependents: [String: RuleSelection] = [:]
        var everywhere = RuleSelection(ruleCount: rules.count)
        for (index, rule) in rules.enumerated() {
            guard let domain = rule.domain else {
                everywhere.insert(index)
                continue
            }
            var read = Set([domain])
            for reference in rule.condition.references { if let other = reference.domain { read.insert(other) } }
            for name in read { dependents[name, default: RuleSelection(ruleCount: rules.count)].insert(index) }
        }
        self.dependents = dependents
        self.everywhere = everywhere
        allRules = RuleSelection.all(ruleCount: rules.count)
        var addressScoped = RuleSelection(ruleCount: rules.count)
        for (index, rule) in rules.enumerated() where rule.scope != nil && rule.domain != nil { addressScoped.insert(index) }
        self.addressScoped = addressScoped
        recheckByDomain = domains.map { (dependents[$0] ?? RuleSelection(ruleCount: rules.count)).union(everywhere) }
        func selecting(_ test: (StyleTemplate) -> Bool) -> RuleSelection {
            var selection = RuleSelection(ruleCount: rules.count)
            for (index, rule) in rules.enumerated() where test(rule.style) { selection.insert(index) }
            return selection
        }
        labelRules = selecting { $0.label != nil }
        badgeTextRules = selecting { $0.badgeText != nil }
        layerRules = selecting { $0.style[text: .layer] != nil }
        visibleRules = selecting { $0.style[flag: .visible] != nil }
        func reads(_ template: LabelTemplate?) -> UInt64 {
            guard let template else { return 0 }
            var mask: UInt64 = 0
            for (index, domain) in domains.enumerated() where index < 63 && template.reads(domain) { mask |= 1 << UInt64(index) }
            let elsewhere = template.references.contains { reference in
                guard let domain = reference.domain else { return true }
                return (domains.firstIndex(of: domain) ?? 63) >= 63
            }
            return elsewhere ? mask | 1 << 63 : mask
        }
        labelReads = rules.map { reads($0.style.label) }
        badgeTextReads = rules.map { reads($0.style.badgeText) }
        ruleNames = rules.map(\.name)
        styles = rules.map(\.style)
        scopes = rules.map(\.scope)
        scopeComponents = rules.map { rule in
            guard case .components(let values)? = rule.scope?.form else { return nil }
            return values.sorted { $0.key.rawValue < $1.key.rawValue }.map { ($0.key, $0.value) }
        }
        ruleDomains = rules.map(\.domain)
        titlePerRule = rules.map(\.legendTitle)
        var distinct: [String] = []
        titleIDs = rules.map { rule in
            if let index = distinct.firstIndex(of: rule.legendTitle) { return Int32(index) }
            distinct.append(rule.legendTitle)
            return Int32(distinct.count - 1)
        }
        legendTitles = distinct
        nodeBuffer = FrozenBuffer(builder.nodes)
        ruleBuffer = FrozenBuffer(compiled)
        literalBuffer = FrozenBuffer(builder.literals)
        referenceBuffer = FrozenBuffer(builder.slots)
        slotDomainBuffer = FrozenBuffer(
            builder.slots.map { reference in reference.domain.flatMap { domains.firstIndex(of: $0) }.map(Int32.init) ?? -1 })
        domainBuffer = FrozenBuffer(domains)
        domainTagBuffer = FrozenBuffer(domains.map { IdentifierTags.tag(of: $0) })
        hasRulesWithoutDomain = rules.contains { $0.domain == nil }
    }

    deinit {
        nodeBuffer.free()
        ruleBuffer.free()
        literalBuffer.free()
        referenceBuffer.free()
        slotDomainBuffer.free()
        domainBuffer.free()
        domainTagBuffer.free()
    }

    /// The index of a domain in `domains`, if a rule has it.
    func domainIndex(_ domain: String) -> Int? {
        for index in domains.indices where domains[index].isSameIdentifier(as: domain) { return index }
        return nil
    }

    /// The rules to evaluate again when `domain` (at `index` in `domains`) changed: those
    /// that read it and those without a domain.
    func recheck(changed domain: String, index: Int?) -> RuleSelection {
        if let index { return recheckByDomain[index] }
        return (dependents[domain] ?? RuleSelection(ruleCount: rules.count)).union(everywhere)
    }

    /// The rules whose `where` criteria leave out the location at `address`, among those
    /// for which that depends on the address alone (``addressScoped``): the same for every
    /// derivation of the location, so its store can work it out once.
    func outOfScope(_ address: LocationAddress) -> RuleSelection {
        var excluded = RuleSelection(ruleCount: rules.count)
        let none = LiveValues(domains: [])
        addressScoped.forEach { index in
            if !inScope(index, address, values: none) { excluded.insert(index) }
        }
        return excluded
    }

    /// Evaluates the conditions of the `candidates` over a location's values and adds the
    /// rules that apply to `selection`: those whose domain has a fresh value (any domain,
    /// for a rule without one), whose condition holds and, for a rule without a domain,
    /// whose `where` criteria allow the location (the caller leaves out the candidates
    /// that ``outOfScope(_:)`` excludes).
    func select(
        _ candidates: RuleSelection, into selection: inout RuleSelection, values: LiveValues, address: LocationAddress
    ) {
        let catalogCapacity = values.catalogCapacity
        let tags = values.domainTags
        values.domains.withUnsafeBufferPointer { domainValues in
            let domainCount = domainBuffer.count
            withUnsafeTemporaryAllocation(of: Int32.self, capacity: domainCount + 1) { valuesOfDomains in
                // Where each rule domain's fresh value is, looked up when first needed, so
                // that slots and rules find it without comparing names again.
                valuesOfDomains.initialize(repeating: DomainFinder.unknown)
                let finder = DomainFinder(
                    values: domainValues, tags: tags, names: domainBuffer.base, nameTags: domainTagBuffer.base,
                    found: valuesOfDomains.baseAddress!)
                let anyFresh = hasRulesWithoutDomain && domainValues.contains { !$0.stale }
                withUnsafeTemporaryAllocation(of: SlotValue.self, capacity: referenceBuffer.count + 1) { slotValues in
                    slotValues.initialize(repeating: SlotValue())
                    let evaluator = Evaluator(
                        nodes: nodeBuffer.base, literals: literalBuffer.base, references: referenceBuffer.base,
                        slots: slotValues.baseAddress!, values: domainValues, catalogCapacity: catalogCapacity,
                        domainsOfSlots: slotDomainBuffer.base, finder: finder)
                    candidates.forEach { index in
                        let rule = ruleBuffer[index]
                        if rule.domain >= 0 {
                            guard finder.value(ofDomain: Int(rule.domain)) >= 0 else { return }
                        } else if !anyFresh {
                            return
                        }
                        if rule.hasValueScope, !inScope(index, address, values: values) { return }
                        if evaluator.truth(rule.root) { selection.insert(index) }
                    }
                }
            }
        }
    }

    /// The bit of a domain (at `index` in `domains`) in `labelReads` and `badgeTextReads`.
    static func readBit(_ index: Int?) -> UInt64 {
        guard let index, index < 63 else { return 1 << 63 }
        return 1 << UInt64(index)
    }
}
