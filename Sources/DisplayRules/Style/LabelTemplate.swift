import LiveTopics

/// A label such as `"{nrOfPeople}/{capacity}"`: text with property references in braces.
///
/// Parsed once at load. A reference is a property of the rule's domain or, qualified, of
/// another domain (`{availability.available}`); `{{` and `}}` are literal braces. A missing
/// value renders as empty text.
public struct LabelTemplate: Hashable, Sendable, CustomStringConvertible {
    public enum Part: Hashable, Sendable {
        case text(String)
        case property(PropertyReference)
    }

    public let source: String
    public let parts: [Part]
    /// Whether the template has no references (it renders to the same text every time).
    public let isConstant: Bool

    /// Parses a template; bare names belong to `domain` (`nil` for styles outside rules,
    /// where every reference must be qualified or is looked up in every domain).
    /// - Throws: ``ExpressionError`` with the column of an unclosed or empty brace.
    public init(_ source: String, domain: String?) throws(ExpressionError) {
        var parts: [Part] = []
        var text = ""
        var index = source.startIndex
        var column = 1
        while index < source.endIndex {
            let character = source[index]
            let next = source.index(after: index)
            if character == "{", next < source.endIndex, source[next] == "{" {
                text.append("{")
                index = source.index(after: next)
                column += 2
                continue
            }
            if character == "}", next < source.endIndex, source[next] == "}" {
                text.append("}")
                index = source.index(after: next)
                column += 2
                continue
            }
            if character == "{" {
                guard let close = source[next...].firstIndex(of: "}") else {
                    throw ExpressionError(message: "'{' is not closed by '}'", column: column)
                }
                let name = source[next..<close].trimmingWhitespace()
                guard let reference = PropertyReference(name, domain: domain) else {
                    throw ExpressionError(
                        message: "\"{\(name)}\" is not a property name (write {name} or {domain.name})", column: column)
                }
                if !text.isEmpty { parts.append(.text(text)) }
                text = ""
                parts.append(.property(reference))
                column += source[index...close].count
                index = source.index(after: close)
                continue
            }
            if character == "}" {
                throw ExpressionError(message: "'}' without '{' (write '}}' for a literal brace)", column: column)
            }
            text.append(character)
            index = next
            column += 1
        }
        if !text.isEmpty { parts.append(.text(text)) }
        self.source = source
        self.parts = parts
        isConstant = !parts.contains { if case .property = $0 { true } else { false } }
    }

    /// Whether a value of `domain` can change the rendered text.
    func reads(_ domain: String) -> Bool {
        references.contains { $0.domain == nil || $0.domain == domain }
    }

    /// The references, in order.
    public var references: [PropertyReference] {
        parts.compactMap { if case .property(let reference) = $0 { reference } else { nil } }
    }

    /// The text with every reference replaced by its value (empty when missing).
    public func render(_ value: (PropertyReference) -> String?) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .text(let text): out += text
            case .property(let reference): out += value(reference) ?? ""
            }
        }
        return out
    }

    public var description: String { source }
}

/// A property of a domain: `nrOfPeople` (of the rule's domain) or `availability.available`.
public struct PropertyReference: Hashable, Sendable, CustomStringConvertible {
    /// `nil` only outside a rule, for an unqualified name.
    public var domain: String?
    public var name: String

    public init(domain: String?, name: String) {
        self.domain = domain
        self.name = name
    }

    /// Parses `name` or `domain.name`; bare names get `domain`.
    init?(_ text: Substring, domain: String?) {
        let pieces = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(pieces.count), pieces.allSatisfy({ isIdentifier($0) }) else { return nil }
        if pieces.count == 2 {
            self.domain = String(pieces[0])
            self.name = String(pieces[1])
        } else {
            self.domain = domain
            self.name = String(pieces[0])
        }
    }

    public var description: String { domain.map { "\($0).\(name)" } ?? name }
}

func isIdentifier(_ text: Substring) -> Bool {
    guard let first = text.unicodeScalars.first, first == "_" || first.properties.isAlphabetic else { return false }
    return text.unicodeScalars.allSatisfy { $0 == "_" || $0.properties.isAlphabetic || ("0"..."9").contains($0) }
}

extension Substring {
    func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first.isWhitespace { result = result.dropFirst() }
        while let last = result.last, last.isWhitespace { result = result.dropLast() }
        return result
    }
}
