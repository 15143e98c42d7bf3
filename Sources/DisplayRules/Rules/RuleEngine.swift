import LiveTopics

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
public struct RuleEngine: Sendable {
    public let ruleSet: RuleSet

    public init(_ ruleSet: RuleSet) {
        self.ruleSet = ruleSet
    }

    /// The style for a location with these live values.
    public func derive(_ address: LocationAddress, values: LiveValues, hiddenLayers: Set<String> = []) -> DerivedStyle {
        var style = ruleSet.main.style
        var label = ruleSet.main.label
        var badgeText = ruleSet.main.badgeText
        func apply(_ template: StyleTemplate) {
            style.override(with: template.style)
            if let template = template.label { label = template }
            if let template = template.badgeText { badgeText = template }
        }
        let entry = ruleSet.catalog[address.location]
        var values = values
        if values.catalogCapacity == nil, let capacity = entry?.capacity { values.catalogCapacity = String(capacity) }
        if let type = entry?.type, let template = ruleSet.types[type] { apply(template) }
        if let template = ruleSet.locations[address.location] { apply(template) }
        var applied: [String] = []
        var legendState: String?
        for rule in ruleSet.rules where rule.applies(to: address, values: values) {
            apply(rule.style)
            applied.append(rule.name)
            legendState = rule.legendTitle
        }
        if let label { style.label = label.isConstant ? label.source : label.render { values[$0] } }
        if let badgeText { style.badge?.text = badgeText.isConstant ? badgeText.source : badgeText.render { values[$0] } }
        if let layer = style.layer, hiddenLayers.contains(layer) { style.visible = false }
        return DerivedStyle(style: style, rules: applied, legendState: legendState)
    }
}
