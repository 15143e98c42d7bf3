import LiveTopics

/// A live rule: when its condition holds for a location's live values, its style applies.
public struct Rule: Sendable {
    public var name: String
    /// The domain whose values the rule is about; bare names in `condition` are its properties.
    /// The rule applies only where this domain has a value. Without one, it applies to every
    /// location with any value, and bare names are looked up in every domain.
    public var domain: String?
    public var condition: CompiledExpression
    /// Optional criteria limiting which locations the rule applies to.
    public var scope: TopicCriteria?
    public var style: StyleTemplate
    /// Legend title (default: the rule's name).
    public var legend: String?
    public var layer: String?
    /// Higher wins; equal priorities apply in file order (the later one wins).
    public var priority: Int
    /// Position in the config file.
    public var order: Int

    public init(
        name: String, domain: String?, condition: CompiledExpression, scope: TopicCriteria? = nil,
        style: StyleTemplate, legend: String? = nil, layer: String? = nil, priority: Int = 0, order: Int = 0
    ) {
        self.name = name
        self.domain = domain
        self.condition = condition
        self.scope = scope
        self.style = style
        self.legend = legend
        self.layer = layer
        self.priority = priority
        self.order = order
        // A rule's layer is the layer of the style it gives, unless the style names one.
        if self.style.style[text: .layer] == nil, let layer { self.style.style[text: .layer] = layer }
    }

    /// The title this rule shows in the legend.
    public var legendTitle: String { legend ?? name }
}
