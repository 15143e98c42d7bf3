import LiveTopics

/// A configured style with its label and badge text parsed into templates.
public struct StyleTemplate: Sendable {
    public var style: Style
    public var label: LabelTemplate?
    public var badgeText: LabelTemplate?

    /// Parses the style's templates; bare names in them belong to `domain`.
    /// - Throws: ``ExpressionError`` for a malformed template.
    public init(_ style: Style, domain: String?) throws(ExpressionError) {
        self.style = style
        label = try style[text: .label].map { text throws(ExpressionError) in try LabelTemplate(text, domain: domain) }
        badgeText = try style[badge: .badge]?.text.map { text throws(ExpressionError) in try LabelTemplate(text, domain: domain) }
    }

    public static let empty = try! StyleTemplate(Style(), domain: nil)
}
