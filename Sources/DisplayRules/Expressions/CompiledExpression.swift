import LiveTopics

/// A rule condition, parsed and type-checked once when the config loads, then evaluated
/// per update without parsing and without building strings.
///
/// Properties are strings; compared with a number (or used in arithmetic) they are read as
/// numbers, compared with `true`/`false` as booleans. A missing or unreadable value, or a
/// division by zero, makes the comparison it is part of false; it never throws.
public struct CompiledExpression: Sendable, CustomStringConvertible {
    enum Comparison: String {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="

        /// The comparison with its sides swapped: `a < b` is `b > a`.
        var mirrored: Comparison {
            switch self {
            case .less: .greater
            case .lessOrEqual: .greaterOrEqual
            case .greater: .less
            case .greaterOrEqual: .lessOrEqual
            case .equal, .notEqual: self
            }
        }

        var isOrdering: Bool { self != .equal && self != .notEqual }
    }

    enum ComparisonKind {
        case numeric, text, boolean
    }

    enum Arithmetic {
        case add, subtract, multiply, divide
    }

    indirect enum Node: Sendable {
        case number(Double)
        case string(String)
        case boolean(Bool)
        case property(PropertyReference)
        case exists(PropertyReference)
        case negate(Node)
        case arithmetic(Arithmetic, Node, Node)
        case compare(Comparison, ComparisonKind, Node, Node)
        case and(Node, Node)
        case or(Node, Node)
        case not(Node)
        /// A property used as a condition: true when it reads as `true`.
        case truth(Node)
    }

    public let source: String
    let root: Node

    /// Parses a condition. Bare names are properties of `domain`.
    /// - Throws: ``ExpressionError`` with the column of the problem.
    public init(_ source: String, domain: String?) throws(ExpressionError) {
        self.source = source
        root = try ExpressionParser.parse(source, domain: domain)
    }

    /// The properties the condition reads, in order of appearance.
    public var references: [PropertyReference] {
        var found: [PropertyReference] = []
        func walk(_ node: Node) {
            switch node {
            case .property(let reference), .exists(let reference): found.append(reference)
            case .negate(let inner), .not(let inner), .truth(let inner): walk(inner)
            case .arithmetic(_, let a, let b), .compare(_, _, let a, let b), .and(let a, let b), .or(let a, let b):
                walk(a)
                walk(b)
            case .number, .string, .boolean: break
            }
        }
        walk(root)
        return found
    }

    /// Whether the condition holds for these live values: a one-off check (rule sets are
    /// compiled together, once, by ``RuleEngine``), with the same evaluator.
    public func evaluate(_ values: LiveValues) -> Bool {
        var builder = RuleProgram.Builder()
        let root = builder.flatten(self.root)
        return builder.evaluate(root, values)
    }

    public var description: String { source }
}

/// Reads a property's text as a number: a fast path for plain decimals, `Double` otherwise.
///
/// The fast path reads the digits as one integer below 2^53 and divides it by an exact
/// power of ten, a single correctly rounded operation, so it gives the same `Double` as
/// `Double(text)` (Clinger's fast path). Text that does not start like a finite number
/// (after a sign, a digit or a point: `true`, `busy`) is not one, without asking `Double`.
@inline(__always)
func parseNumber(_ text: String) -> Double? {
    enum Fast {
        case number(Double)
        case notANumber
        case undecided
    }
    let fast = text.utf8.withContiguousStorageIfAvailable { bytes -> Fast in
        var index = 0
        var negative = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
            negative = bytes[index] == UInt8(ascii: "-")
            index += 1
        }
        guard index < bytes.count else { return .notANumber }
        let first = bytes[index]
        guard first == UInt8(ascii: ".") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) else {
            return .notANumber
        }
        var mantissa: Int64 = 0
        var digits = 0
        var fractionDigits = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            mantissa = mantissa &* 10 &+ Int64(bytes[index] &- UInt8(ascii: "0"))
            digits += 1
            index += 1
        }
        guard digits > 0 else { return .undecided }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                mantissa = mantissa &* 10 &+ Int64(bytes[index] &- UInt8(ascii: "0"))
                digits += 1
                fractionDigits += 1
                index += 1
            }
            guard fractionDigits > 0 else { return .undecided }
        }
        // 15 digits stay below 2^53, and 10^15 is exact.
        guard index == bytes.count, digits <= 15 else { return .undecided }
        let value = Double(mantissa) / exactPowersOfTen[fractionDigits]
        return .number(negative ? -value : value)
    }
    switch fast {
    case .number(let value): return value
    case .notANumber: return nil
    case .undecided, nil:
        guard let value = Double(text), value.isFinite else { return nil }
        return value
    }
}

/// 10^0 … 10^15, each exactly representable.
private let exactPowersOfTen: [Double] = (0...15).map { power in (0..<power).reduce(1.0) { value, _ in value * 10 } }
