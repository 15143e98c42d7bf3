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
        /// Arithmetic or comparison operator.
        var op: UInt8 = 0
        /// Comparison kind: 0 numeric, 1 text, 2 boolean.
        var compareKind: UInt8 = 0
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
        layerRules = selecting { $0.style.layer != nil }
        visibleRules = selecting { $0.style.visible != nil }
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

    /// Flattens condition trees into plain nodes, giving each property read a slot.
    struct Builder {
        private(set) var nodes: [Node] = []
        private(set) var literals: [String] = []
        private(set) var slots: [PropertyReference] = []
        private var slotIndex: [PropertyReference: Int32] = [:]

        /// Adds a condition's nodes.
        /// - Returns: the index of its root.
        mutating func flatten(_ node: CompiledExpression.Node) -> Int32 {
            switch node {
            case .number(let value): return add(Node(kind: .number, value: value))
            case .string(let text):
                literals.append(text)
                return add(Node(kind: .string, a: Int32(literals.count - 1)))
            case .boolean(let value): return add(Node(kind: .boolean, value: value ? 1 : 0))
            case .property(let reference): return add(Node(kind: .property, a: slot(reference)))
            case .exists(let reference): return add(Node(kind: .exists, a: slot(reference)))
            case .negate(let inner): return add(Node(kind: .negate, a: flatten(inner)))
            case .arithmetic(let op, let x, let y):
                let code: UInt8 = switch op {
                case .add: 0
                case .subtract: 1
                case .multiply: 2
                case .divide: 3
                }
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .arithmetic, op: code, a: a, b: b))
            case .compare(let op, let kind, let x, let y):
                let code: UInt8 = switch op {
                case .equal: 0
                case .notEqual: 1
                case .less: 2
                case .lessOrEqual: 3
                case .greater: 4
                case .greaterOrEqual: 5
                }
                let kindCode: UInt8 = switch kind {
                case .numeric: 0
                case .text: 1
                case .boolean: 2
                }
                if case .numeric = kind {
                    // `property op number`, or `number op property` turned around.
                    if case .property(let reference) = x, case .number(let value) = y {
                        return add(Node(kind: .compareSlotWithNumber, op: code, a: slot(reference), value: value))
                    }
                    if case .number(let value) = x, case .property(let reference) = y {
                        let mirrored: UInt8 = switch op {
                        case .less: 4
                        case .lessOrEqual: 5
                        case .greater: 2
                        case .greaterOrEqual: 3
                        default: code
                        }
                        return add(Node(kind: .compareSlotWithNumber, op: mirrored, a: slot(reference), value: value))
                    }
                }
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .compare, op: code, compareKind: kindCode, a: a, b: b))
            case .and(let x, let y):
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .and, a: a, b: b))
            case .or(let x, let y):
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .or, a: a, b: b))
            case .not(let inner): return add(Node(kind: .not, a: flatten(inner)))
            case .truth(let inner): return add(Node(kind: .truth, a: flatten(inner)))
            }
        }

        private mutating func slot(_ reference: PropertyReference) -> Int32 {
            if let index = slotIndex[reference] { return index }
            slots.append(reference)
            slotIndex[reference] = Int32(slots.count - 1)
            return Int32(slots.count - 1)
        }

        private mutating func add(_ node: Node) -> Int32 {
            nodes.append(node)
            return Int32(nodes.count - 1)
        }

        /// Evaluates the condition rooted at `root` against `values`.
        func evaluate(_ root: Int32, _ values: LiveValues) -> Bool {
            withUnsafeTemporaryAllocation(of: SlotValue.self, capacity: max(slots.count, 1)) { slotValues in
                slotValues.initialize(repeating: SlotValue())
                return nodes.withUnsafeBufferPointer { nodes in
                    literals.withUnsafeBufferPointer { literals in
                        slots.withUnsafeBufferPointer { references in
                            values.domains.withUnsafeBufferPointer { domains in
                                Evaluator(
                                    nodes: nodes.baseAddress!, literals: literals.baseAddress, references: references.baseAddress,
                                    slots: slotValues.baseAddress!, values: domains, catalogCapacity: values.catalogCapacity
                                ).truth(root)
                            }
                        }
                    }
                }
            }
        }
    }

    /// Finds where each rule domain's fresh value is among a location's values, once per
    /// domain and only for the domains a derivation needs, using the values' domain tags
    /// when they are known.
    struct DomainFinder {
        static let unknown: Int32 = -2

        let values: UnsafeBufferPointer<DomainValue>
        let tags: IdentifierTags?
        /// The rule domains and their tags.
        let names: UnsafePointer<String>
        let nameTags: UnsafePointer<UInt8>
        /// Per rule domain: the index of its fresh value, -1 for none, or `unknown`.
        let found: UnsafeMutablePointer<Int32>

        /// The index among the values of rule domain `domain`'s fresh value, or -1.
        @inline(__always)
        func value(ofDomain domain: Int) -> Int32 {
            if found[domain] == Self.unknown { found[domain] = look(for: domain) }
            return found[domain]
        }

        private func look(for domain: Int) -> Int32 {
            guard let found = LiveValues.index(ofDomain: names[domain], tag: nameTags[domain], in: values, tags: tags),
                !values[found].stale
            else { return -1 }
            return Int32(found)
        }
    }

    /// Evaluates conditions, reading each slot's property on first use.
    struct Evaluator {
        let nodes: UnsafePointer<Node>
        let literals: UnsafePointer<String>?
        let references: UnsafePointer<PropertyReference>?
        let slots: UnsafeMutablePointer<SlotValue>
        /// The location's values, and the catalog's capacity as `occupancy.capacity`'s default.
        let values: UnsafeBufferPointer<DomainValue>
        let catalogCapacity: String?
        /// Where the rules' domains are among the values, when the caller can tell: per
        /// slot its domain's index in `domains` (or -1), and where each domain's fresh value
        /// is, so that a slot is found without comparing names.
        var domainsOfSlots: UnsafePointer<Int32>?
        var finder: DomainFinder?

        init(
            nodes: UnsafePointer<Node>, literals: UnsafePointer<String>?, references: UnsafePointer<PropertyReference>?,
            slots: UnsafeMutablePointer<SlotValue>, values: UnsafeBufferPointer<DomainValue>, catalogCapacity: String?,
            domainsOfSlots: UnsafePointer<Int32>? = nil, finder: DomainFinder? = nil
        ) {
            self.nodes = nodes
            self.literals = literals
            self.references = references
            self.slots = slots
            self.values = values
            self.catalogCapacity = catalogCapacity
            self.domainsOfSlots = domainsOfSlots
            self.finder = finder
        }

        @inline(__always)
        func slot(_ index: Int32) -> SlotValue {
            let index = Int(index)
            if slots[index].state == 0 { fill(index) }
            return slots[index]
        }

        private func fill(_ index: Int) {
            let reference = references.unsafelyUnwrapped + index
            let position: LiveValues.PropertySlot?
            if let domainsOfSlots, let finder, domainsOfSlots[index] >= 0 {
                let value = finder.value(ofDomain: Int(domainsOfSlots[index]))
                position = LiveValues.position(
                    of: reference.pointee, inValueAt: value >= 0 ? Int(value) : nil, in: values, catalogCapacity: catalogCapacity)
            } else {
                position = LiveValues.position(of: reference.pointee, in: values, catalogCapacity: catalogCapacity)
            }
            guard let position else {
                slots[index].state = 1
                return
            }
            let number = parseNumber(LiveValues.text(at: position, in: values, catalogCapacity: catalogCapacity))
            slots[index] = SlotValue(state: 2, hasNumber: number != nil, number: number ?? 0, position: position)
        }

        /// A slot's text, if its property has a value.
        func text(_ index: Int32) -> String? {
            let slot = slot(index)
            return slot.state == 2 ? LiveValues.text(at: slot.position, in: values, catalogCapacity: catalogCapacity) : nil
        }

        func truth(_ index: Int32) -> Bool {
            let node = nodes[Int(index)]
            switch node.kind {
            case .boolean: return node.value != 0
            case .and: return truth(node.a) && truth(node.b)
            case .or: return truth(node.a) || truth(node.b)
            case .not: return !truth(node.a)
            case .exists: return slot(node.a).state == 2
            case .truth: return boolean(node.a) ?? false
            case .compareSlotWithNumber:
                let slot = slot(node.a)
                return slot.hasNumber && Self.compare(slot.number, node.op, node.value)
            case .compare:
                switch node.compareKind {
                case 0:
                    guard let x = number(node.a), let y = number(node.b) else { return false }
                    return Self.compare(x, node.op, y)
                case 1:
                    guard let equal = textEqual(node.a, node.b) else { return false }
                    return node.op == 0 ? equal : !equal
                default:
                    guard let x = boolean(node.a), let y = boolean(node.b) else { return false }
                    return node.op == 0 ? x == y : x != y
                }
            default:
                return false
            }
        }

        /// `x op y` for a comparison operator's code (see `Builder.flatten`).
        @inline(__always)
        static func compare(_ x: Double, _ op: UInt8, _ y: Double) -> Bool {
            switch op {
            case 0: x == y
            case 1: x != y
            case 2: x < y
            case 3: x <= y
            case 4: x > y
            default: x >= y
            }
        }

        func number(_ index: Int32) -> Double? {
            let node = nodes[Int(index)]
            switch node.kind {
            case .number: return node.value
            case .property:
                let slot = slot(node.a)
                return slot.hasNumber ? slot.number : nil
            case .negate: return number(node.a).map { -$0 }
            case .arithmetic:
                guard let x = number(node.a), let y = number(node.b) else { return nil }
                switch node.op {
                case 0: return x + y
                case 1: return x - y
                case 2: return x * y
                default: return y == 0 ? nil : x / y
                }
            default: return nil
            }
        }

        private func textEqual(_ a: Int32, _ b: Int32) -> Bool? {
            func text(_ index: Int32) -> String? {
                let node = nodes[Int(index)]
                switch node.kind {
                case .string: return literals.unsafelyUnwrapped[Int(node.a)]
                case .property: return self.text(node.a)
                default: return nil
                }
            }
            guard let x = text(a), let y = text(b) else { return nil }
            return x == y
        }

        private func boolean(_ index: Int32) -> Bool? {
            let node = nodes[Int(index)]
            switch node.kind {
            case .boolean: return node.value != 0
            case .property:
                switch text(node.a) {
                case "true", "True", "TRUE", "1": return true
                case "false", "False", "FALSE", "0": return false
                default: return nil
                }
            default: return nil
            }
        }
    }
}
