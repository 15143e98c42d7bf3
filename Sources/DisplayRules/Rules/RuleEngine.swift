import LiveTopics
import Synchronization

/// The style a location gets from the rules, and which rules gave it.
public struct DerivedStyle: Hashable, Sendable {
    public var style: Style
    /// Names of the live rules that applied, in application order (the last wins).
    public var rules: [String]
    /// The legend title of the winning rule that has one, if any: the location's legend state.
    public var legendState: String?

    public init(style: Style = Style(), rules: [String] = [], legendState: String? = nil) {
        self.style = style
        self.rules = rules
        self.legendState = legendState
    }
}

/// Derives styles: main → type → location → live rules, each overriding field by field;
/// then labels are rendered and hidden layers made invisible.
///
/// Immutable; a class so that holding and passing it costs one reference, not a copy of
/// the whole rule set.
public final class RuleEngine: Sendable {
    public let ruleSet: RuleSet
    let program: RuleProgram
    private let ruleIndexes: [String: Int]
    /// The type templates, numbered.
    private let typeTemplates: [StyleTemplate]
    private let typeIndexes: [String: Int32]
    private let hasCatalog: Bool
    private let hasLocationTemplates: Bool
    /// The label and badge text templates of every layer.
    private let labels: LayeredTemplates
    private let badgeTexts: LayeredTemplates
    /// This engine's number, never another's in this process: what a style rendered under
    /// it and kept is checked against (a reload makes a new engine).
    public let generation = RuleEngine.generations.add(1, ordering: .relaxed).newValue
    private static let generations = Atomic<Int>(0)

    /// What a location's style depends on besides its key: its type in the catalog (the
    /// type's number, or -1 for none), or `nil` when it has a style template of its own.
    /// Equal keys at locations of equal variants mean equal styles, so what is derived from
    /// a key can be kept with it per variant.
    public func styleVariant(at address: LocationAddress) -> Int32? {
        guard hasCatalog || hasLocationTemplates else { return -1 }
        if hasLocationTemplates && ruleSet.locations[address.location] != nil { return nil }
        guard hasCatalog, let type = ruleSet.catalog[address.location]?.type else { return -1 }
        return typeIndexes[type] ?? -1
    }

    public init(_ ruleSet: RuleSet) {
        self.ruleSet = ruleSet
        program = RuleProgram(ruleSet.rules)
        let types = ruleSet.types.sorted { $0.key < $1.key }
        typeTemplates = types.map(\.value)
        typeIndexes = Dictionary(uniqueKeysWithValues: types.enumerated().map { ($1.key, Int32($0)) })
        hasCatalog = !ruleSet.catalog.isEmpty
        hasLocationTemplates = !ruleSet.locations.isEmpty
        labels = LayeredTemplates(.label, rules: ruleSet.rules, types: typeTemplates, main: ruleSet.main)
        badgeTexts = LayeredTemplates(.badgeText, rules: ruleSet.rules, types: typeTemplates, main: ruleSet.main)
        var indexes: [String: Int] = [:]
        for (index, rule) in ruleSet.rules.enumerated() { indexes[rule.name] = index }
        ruleIndexes = indexes
    }

    /// A stable fingerprint of everything that decides styles (styles, rules, domain settings,
    /// catalog): equal fingerprints derive equal styles from equal values, so a restart with
    /// the same rules need not re-derive every stored location.
    public var fingerprint: String {
        var text = "main \(ruleSet.main.style.json)\n"
        for (type, template) in ruleSet.types.sorted(by: { $0.key < $1.key }) { text += "type \(type) \(template.style.json)\n" }
        for (id, template) in ruleSet.locations.sorted(by: { $0.key < $1.key }) { text += "location \(id) \(template.style.json)\n" }
        for rule in ruleSet.rules {
            text += "rule \(rule.name) \(rule.domain ?? "-") \(rule.condition.source) \(rule.scope?.filter.string ?? "-") "
            text += "\(rule.style.style.json) \(rule.legend ?? "-") \(rule.layer ?? "-") \(rule.priority) \(rule.order)\n"
        }
        for (domain, settings) in ruleSet.domains.sorted(by: { $0.key < $1.key }) {
            text += "domain \(domain) \(settings.staleAfter.map { "\($0)" } ?? "-")"
            // Added to the line only when set, so that fingerprints of configs without it stay as they were.
            if let moves = settings.moves { text += " moves \(moves)" }
            text += "\n"
        }
        for (id, entry) in ruleSet.catalog.entries.sorted(by: { $0.key < $1.key }) {
            text += "catalog \(id) \(entry.type ?? "-") \(entry.capacity.map(String.init) ?? "-")\n"
        }
        // FNV-1a, 64 bits: stable across processes, unlike Hasher.
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01B3
        }
        return String(hash, radix: 16)
    }

    /// The style for a location with these live values.
    public func derive(_ address: LocationAddress, values: LiveValues, hiddenLayers: Set<String> = []) -> DerivedStyle {
        let result = evaluate(address, values: values, hiddenLayers: hiddenLayers)
        return derivedStyle(result.style, result.selection)
    }

    /// A derived style from an evaluation's result.
    public func derivedStyle(_ style: Style, _ selection: RuleSelection) -> DerivedStyle {
        var names: [String] = []
        names.reserveCapacity(selection.count)
        var legendState: String?
        for (word, bits) in selection.words.enumerated() where bits != 0 && word * 64 < program.ruleNames.count {
            for bit in 0..<64 where bits & (1 << UInt64(bit)) != 0 {
                names.append(program.ruleNames[word * 64 + bit])
                legendState = program.titlePerRule[word * 64 + bit]
            }
        }
        return DerivedStyle(style: style, rules: names, legendState: legendState)
    }

    /// The legend title of the last rule in a selection: the location's legend state.
    public func legendState(_ selection: RuleSelection) -> String? {
        legendStateID(selection).map { legendTitles[Int($0)] }
    }

    /// Distinct legend titles, in rule order; ``legendStateID(_:)`` indexes them.
    public var legendTitles: [String] { program.legendTitles }

    /// The index in ``legendTitles`` of the last selected rule's title, if any rule is selected.
    public func legendStateID(_ selection: RuleSelection) -> Int32? {
        // Runs on every update: read the words in place rather than through `words`,
        // which would build an array.
        func last(_ word: UInt64, _ offset: Int) -> Int32 { program.titleIDs[offset + 63 - word.leadingZeroBitCount] }
        if let overflow = selection.overflow {
            for index in overflow.indices.reversed() where overflow[index] != 0 { return last(overflow[index], 128 + index * 64) }
        }
        if selection.high != 0 { return last(selection.high, 64) }
        if selection.low != 0 { return last(selection.low, 0) }
        return nil
    }

    /// The index of a legend title, if a rule has it.
    public func legendStateID(title: String) -> Int32? {
        program.legendTitles.firstIndex(of: title).map(Int32.init)
    }

    /// The names of the selected rules, in application order.
    public func ruleNames(_ selection: RuleSelection) -> [String] {
        derivedStyle(Style(), selection).rules
    }

    /// The selection that a list of rule names means under these rules, or `nil` if one of
    /// the names is not a rule here (so it cannot be equal to any current selection).
    public func selection(named names: [String]) -> RuleSelection? {
        var selection = RuleSelection(ruleCount: program.ruleNames.count)
        var last = -1
        for name in names {
            guard let index = ruleIndexes[name], index > last else { return nil }
            selection.insert(index)
            last = index
        }
        return selection
    }

    /// The style and the applied rules, without building the list of names.
    ///
    /// With `previous` (the last result for this location) and `changedDomain` (the one
    /// domain whose value changed since), only the rules that read that domain are evaluated
    /// again; the others keep their result.
    public func evaluate(
        _ address: LocationAddress, values: LiveValues, hiddenLayers: Set<String>,
        previous: RuleSelection? = nil, changedDomain: String? = nil
    ) -> (style: Style, selection: RuleSelection) {
        let key = styleKey(address, values: values, hiddenLayers: hiddenLayers, previous: previous, changedDomain: changedDomain)
        return (style(key, at: address), key.selection)
    }

    /// What decides a location's style under these rules, without layering the style: which
    /// rules apply, the label and badge text they render, whether the style's layer is
    /// hidden. Equal keys at one location mean equal styles, so comparing keys is the diff;
    /// ``style(_:at:)`` builds the style when it is needed.
    ///
    /// With `previous` and `changedDomain`, as in ``evaluate(_:values:hiddenLayers:previous:changedDomain:)``.
    public func styleKey(
        _ address: LocationAddress, values: LiveValues, hiddenLayers: Set<String>,
        previous: RuleSelection? = nil, changedDomain: String? = nil
    ) -> StyleKey {
        styleKey(address, values: values, hiddenLayers: hiddenLayers, previous: previous, previousKey: nil, changedDomain: changedDomain)
    }

    /// ``styleKey(_:values:hiddenLayers:previous:changedDomain:)`` after `previous`, the
    /// location's last key: a label or badge text whose template is the one that won before
    /// and does not read the changed domain keeps its text without rendering it again.
    ///
    /// `outOfScope`: ``outOfScope(_:)`` of the address, when the caller keeps it.
    public func styleKey(
        _ address: LocationAddress, values: LiveValues, hiddenLayers: Set<String>, previous: StyleKey?,
        changedDomain: String?, outOfScope: RuleSelection? = nil
    ) -> StyleKey {
        styleKey(
            address, values: values, hiddenLayers: hiddenLayers, previous: previous?.selection, previousKey: previous,
            changedDomain: changedDomain, outOfScope: outOfScope)
    }

    /// The rules whose `where` criteria leave out a location whatever its values: the same
    /// for every derivation of it under these rules, so a caller deriving one location
    /// again and again can keep it and pass it to
    /// ``styleKey(_:values:hiddenLayers:previous:changedDomain:outOfScope:)``.
    public func outOfScope(_ address: LocationAddress) -> RuleSelection {
        program.outOfScope(address)
    }

    private func styleKey(
        _ address: LocationAddress, values: LiveValues, hiddenLayers: Set<String>,
        previous: RuleSelection?, previousKey: StyleKey?, changedDomain: String?, outOfScope: RuleSelection? = nil
    ) -> StyleKey {
        let location = locate(address, values)
        let changedIndex = changedDomain.flatMap { program.domainIndex($0) }
        let selection = select(
            address, location.values, previous: previous, changedDomain: changedDomain, index: changedIndex,
            outOfScope: outOfScope ?? program.outOfScope(address))
        let changedBit = RuleProgram.readBit(changedIndex)
        var hidden = false
        if !hiddenLayers.isEmpty, let layer = winning(selection, location, program.layerRules, \.style[text: .layer]) {
            hidden = hiddenLayers.contains(layer)
        }
        // Texts are kept from the last key only when one domain changed.
        let keptFrom = changedDomain == nil ? nil : previousKey
        return StyleKey(
            selection: selection,
            label: text(
                selection, location, program.labelRules, labels, program.labelReads, previous: keptFrom,
                previousText: keptFrom?.label, changedBit: changedBit),
            badgeText: text(
                selection, location, program.badgeTextRules, badgeTexts, program.badgeTextReads, previous: keptFrom,
                previousText: keptFrom?.badgeText, changedBit: changedBit),
            hidden: hidden)
    }

    /// The rendered text of the winning label (or badge text) template: from the highest
    /// selected rule among `rules` (those with one; `templates` and `reads` are per rule),
    /// else from the location's, type's or main template (`templates` holds those three
    /// last). A rule that also won `previous` (giving `previousText`) and does not read the
    /// domain of `changedBit` keeps that text without rendering it again.
    private func text(
        _ selection: RuleSelection, _ location: Location, _ rules: RuleSelection, _ templates: LayeredTemplates,
        _ reads: [UInt64], previous: StyleKey?, previousText: @autoclosure () -> String?, changedBit: UInt64
    ) -> String? {
        let template: LabelTemplate?
        if let winner = selection.last(in: rules) {
            if let previous, previous.selection.last(in: rules) == winner, reads[winner] & changedBit == 0 {
                return previousText()
            }
            template = templates.rules[winner]
        } else {
            template = templates.fallback(location)
        }
        guard let template else { return nil }
        return template.isConstant ? template.source : template.render { location.values[$0] }
    }

    /// The style a key stands for at a location, with the names of the rules behind it.
    public func derivedStyle(_ key: StyleKey, at address: LocationAddress) -> DerivedStyle {
        derivedStyle(style(key, at: address), key.selection)
    }

    /// The style a key stands for at a location: the layers of its rules, its label and
    /// badge text, made invisible when its layer is hidden.
    public func style(_ key: StyleKey, at address: LocationAddress) -> Style {
        let builder = layered(key.selection, locate(address, LiveValues(domains: [])))
        var style = builder.style
        if builder.label != nil { style[text: .label] = key.label }
        if builder.badgeText != nil { style[badge: .badge]?.text = key.badgeText }
        if key.hidden { style[flag: .visible] = false }
        return style
    }

    /// The key of a style derived under rules: the selection its rule names map to, its
    /// label and badge text, whether it was made invisible by a hidden layer. `nil` when the
    /// names do not map, or (`verified`) the style is not what these rules make of them.
    /// Without `verified` the caller vouches that the rules are these (equal fingerprints).
    public func styleKey(of derived: DerivedStyle, at address: LocationAddress, verified: Bool = true) -> StyleKey? {
        guard let selection = selection(named: derived.rules) else { return nil }
        let label = derived.style[text: .label]
        let badgeText = derived.style[badge: .badge]?.text
        guard verified else {
            return styleKey(trusting: selection, label: label, badgeText: badgeText, invisible: derived.style[flag: .visible] == false, at: address)
        }
        var key = StyleKey(selection: selection, label: label, badgeText: badgeText, hidden: false)
        if style(key, at: address) == derived.style { return key }
        key.hidden = true
        return style(key, at: address) == derived.style ? key : nil
    }

    /// The key of a style these very rules derived (the caller vouches for it: equal
    /// fingerprints), from the only parts of it the key needs: the selection its rule names
    /// map to, its label and badge text, and whether it is invisible. A restore reads no
    /// more of a stored style than this.
    public func styleKey(
        trusting selection: RuleSelection, label: String?, badgeText: String?, invisible: Bool, at address: LocationAddress
    ) -> StyleKey {
        var key = StyleKey(selection: selection, label: label, badgeText: badgeText, hidden: false)
        // Invisible, though the layers alone would show it: its layer was hidden.
        if invisible {
            let location = locate(address, LiveValues(domains: []))
            key.hidden = winning(selection, location, program.visibleRules, \.style[flag: .visible]) != false
        }
        return key
    }

    /// The value of one style field after layering: from the highest selected rule among
    /// `rules` (those that set it), else the location's, type's or main template.
    private func winning<Value>(
        _ selection: RuleSelection, _ location: Location, _ rules: RuleSelection, _ field: KeyPath<StyleTemplate, Value?>
    ) -> Value? {
        if let index = selection.last(in: rules) { return program.styles[index][keyPath: field] }
        return fallback(location, field)
    }

    /// The value of one style field from the location's, type's or main template, where no
    /// selected rule sets it.
    private func fallback<Value>(_ location: Location, _ field: KeyPath<StyleTemplate, Value?>) -> Value? {
        if let value = location.template?[keyPath: field] { return value }
        if location.type >= 0, let value = typeTemplates[Int(location.type)][keyPath: field] { return value }
        return ruleSet.main[keyPath: field]
    }

    /// What the catalog and the style layers say about one location.
    struct Location {
        var values: LiveValues
        /// Index of its type's template in `typeTemplates`, or -1.
        var type: Int32
        /// Its own template, if it has one.
        var template: StyleTemplate?
    }

    private func locate(_ address: LocationAddress, _ values: LiveValues) -> Location {
        // Most rule sets have neither a catalog nor location styles: nothing to look up.
        guard hasCatalog || hasLocationTemplates else { return Location(values: values, type: -1, template: nil) }
        let entry = hasCatalog ? ruleSet.catalog[address.location] : nil
        var values = values
        if values.catalogCapacity == nil, let capacity = entry?.capacity { values.catalogCapacity = String(capacity) }
        let type = entry?.type.flatMap { typeIndexes[$0] } ?? -1
        let template = hasLocationTemplates ? ruleSet.locations[address.location] : nil
        return Location(values: values, type: type, template: template)
    }

    /// One text template of every style layer: per rule, per type, and the main one.
    struct LayeredTemplates: Sendable {
        enum Field: Sendable {
            case label, badgeText

            func of(_ template: StyleTemplate) -> LabelTemplate? {
                switch self {
                case .label: template.label
                case .badgeText: template.badgeText
                }
            }
        }

        let field: Field
        let rules: [LabelTemplate?]
        let types: [LabelTemplate?]
        let main: LabelTemplate?

        init(_ field: Field, rules: [Rule], types: [StyleTemplate], main: StyleTemplate) {
            self.field = field
            self.rules = rules.map { field.of($0.style) }
            self.types = types.map { field.of($0) }
            self.main = field.of(main)
        }

        /// The template where no selected rule has one: the location's, its type's or the main one.
        func fallback(_ location: Location) -> LabelTemplate? {
            if let template = location.template.flatMap({ field.of($0) }) { return template }
            if location.type >= 0, let template = types[Int(location.type)] { return template }
            return main
        }
    }

    /// Which rules apply: all of them evaluated, or, with `previous` and `changedDomain`,
    /// only those the changed domain can affect (the others keep their previous result).
    private func select(
        _ address: LocationAddress, _ values: LiveValues, previous: RuleSelection?, changedDomain: String?, index: Int?,
        outOfScope: RuleSelection
    ) -> RuleSelection {
        var selection: RuleSelection
        let candidates: RuleSelection
        if let previous, let changedDomain {
            let recheck = program.recheck(changed: changedDomain, index: index)
            selection = previous.subtracting(recheck)
            candidates = recheck
        } else {
            selection = RuleSelection(ruleCount: program.rules.count)
            candidates = program.allRules
        }
        program.select(candidates.subtracting(outOfScope), into: &selection, values: values, address: address)
        return selection
    }

    /// The style layers of a location and its selected rules, in application order:
    /// main → type → location → rules, each overriding field by field.
    private func layered(_ selection: RuleSelection, _ location: Location) -> StyleBuilder {
        var builder = StyleBuilder(ruleSet.main)
        if location.type >= 0 { builder.apply(typeTemplates[Int(location.type)]) }
        if let template = location.template { builder.apply(template) }
        program.styles.withUnsafeBufferPointer { styles in
            for index in styles.indices where selection.contains(index) { builder.apply(styles[index]) }
        }
        return builder
    }
}

/// What decides a derived style besides the rules (see ``RuleEngine/styleKey(_:values:hiddenLayers:previous:changedDomain:)``).
public struct StyleKey: Hashable, Sendable {
    /// The rules that apply.
    public var selection: RuleSelection
    /// The rendered text of the winning label template, if any.
    public var label: String?
    /// The rendered text of the winning badge text template, if any.
    public var badgeText: String?
    /// The style's layer is hidden: the location is not visible.
    public var hidden: Bool

    /// Whether the key holds its parts inline, with no storage on the heap: texts short
    /// enough for a string's inline form (15 bytes of UTF-8) and at most 128 rules. Copies
    /// of such a key share no count of references (see `RecordCodec.PreparationCache`).
    package var isInline: Bool {
        selection.overflow == nil && (label?.utf8.count ?? 0) <= 15 && (badgeText?.utf8.count ?? 0) <= 15
    }
}

/// Accumulates style layers and the templates of the winning label and badge text.
struct StyleBuilder {
    var style: Style
    var label: LabelTemplate?
    var badgeText: LabelTemplate?

    init(_ base: StyleTemplate) {
        style = base.style
        label = base.label
        badgeText = base.badgeText
    }

    mutating func apply(_ template: borrowing StyleTemplate) {
        style.override(with: template.style)
        if let template = template.label { label = template }
        if let template = template.badgeText { badgeText = template }
    }
}

extension RuleProgram {
    /// Whether rule `index`'s `where` criteria allow this location.
    func inScope(_ index: Int, _ address: LocationAddress, values: LiveValues) -> Bool {
        // Criteria given as components are compared one by one without copying them out
        // of `scopes` (the same comparison as `TopicCriteria.matches`).
        if let domain = ruleDomains[index], let required = scopeComponents[index] {
            return required.withUnsafeBufferPointer { required in
                for (component, value) in required
                where !TopicCriteria.component(component, of: address, domain: domain, is: value) {
                    return false
                }
                return true
            }
        }
        guard let scope = scopes[index] else { return true }
        if let domain = ruleDomains[index] { return scope.matches(address, domain: domain) }
        return values.fresh.contains { scope.matches(address, domain: $0.domain) }
    }
}
