import DisplayRules
import Foundation
import LiveTopics
import Yams

/// Reads the YAML tree into settings, collecting every problem with its line and column.
final class ConfigReader {
    let file: String
    private(set) var errors: [ConfigError] = []

    init(file: String) {
        self.file = file
    }

    func error(_ node: Node?, _ message: String, columnOffset: Int = 0, lineOffset: Int = 0) {
        let mark = node?.mark
        errors.append(
            ConfigError(
                file: file, line: (mark?.line ?? 1) + lineOffset, column: (mark?.column ?? 1) + columnOffset,
                message: message))
    }

    // MARK: - Shapes

    /// The members of a mapping, refusing keys not in `allowed` and duplicates.
    func mapping(_ node: Node, _ what: String, allowed: [String]?) -> [(key: String, keyNode: Node, value: Node)] {
        guard case .mapping(let mapping) = node else {
            if case .scalar(let scalar) = node, scalar.string.isEmpty, scalar.tag == .implicit { return [] }
            error(node, "\(what) must be a mapping of key: value, found \(describe(node))")
            return []
        }
        var members: [(String, Node, Node)] = []
        var seen = Set<String>()
        for (keyNode, value) in mapping {
            guard case .scalar(let scalar) = keyNode else {
                error(keyNode, "keys in \(what) must be plain words")
                continue
            }
            let key = scalar.string
            if let allowed, !allowed.contains(key) {
                let suggestion = closest(key, in: allowed).map { "did you mean \"\($0)\"? " } ?? ""
                error(keyNode, "unknown key \"\(key)\" in \(what) (\(suggestion)expected one of: \(allowed.joined(separator: ", ")))")
                continue
            }
            if !seen.insert(key).inserted {
                error(keyNode, "\"\(key)\" appears twice in \(what)")
                continue
            }
            members.append((key, keyNode, value))
        }
        return members
    }

    func sequence(_ node: Node, _ what: String) -> [Node] {
        switch node {
        case .sequence(let sequence): return Array(sequence)
        case .scalar(let scalar) where scalar.string.isEmpty && scalar.tag == .implicit: return []
        default:
            error(node, "\(what) must be a list (lines starting with '- '), found \(describe(node))")
            return []
        }
    }

    // MARK: - Scalars

    func string(_ node: Node, _ what: String) -> String? {
        guard case .scalar(let scalar) = node else {
            error(node, "\(what) must be text, found \(describe(node))")
            return nil
        }
        return scalar.string
    }

    func nonEmptyString(_ node: Node, _ what: String) -> String? {
        guard let text = string(node, what) else { return nil }
        guard !text.isEmpty else {
            error(node, "\(what) cannot be empty")
            return nil
        }
        return text
    }

    func bool(_ node: Node, _ what: String) -> Bool? {
        if case .scalar(let scalar) = node {
            switch scalar.string.lowercased() {
            case "true", "yes", "on": return true
            case "false", "no", "off": return false
            default: break
            }
        }
        error(node, "\(what) must be true or false, found \(describe(node))")
        return nil
    }

    func int(_ node: Node, _ what: String, range: ClosedRange<Int>? = nil) -> Int? {
        guard case .scalar(let scalar) = node, let value = Int(scalar.string) else {
            error(node, "\(what) must be a whole number, found \(describe(node))")
            return nil
        }
        if let range, !range.contains(value) {
            error(node, "\(what) must be between \(range.lowerBound) and \(range.upperBound), found \(value)")
            return nil
        }
        return value
    }

    func double(_ node: Node, _ what: String, range: ClosedRange<Double>? = nil) -> Double? {
        guard case .scalar(let scalar) = node, let value = Double(scalar.string), value.isFinite else {
            error(node, "\(what) must be a number, found \(describe(node))")
            return nil
        }
        if let range, !range.contains(value) {
            error(node, "\(what) must be between \(jsonNumber(range.lowerBound)) and \(jsonNumber(range.upperBound)), found \(scalar.string)")
            return nil
        }
        return value
    }

    /// The longest duration a setting takes: ten years. Longer ones (or `inf`) are mistakes,
    /// and would not fit the milliseconds the daemon counts in.
    static let maximumDuration: Duration = .seconds(10 * 365 * 86_400)

    /// `500ms`, `30s`, `15m`, `2h`, `1d`, or a number of seconds; at most ``maximumDuration``.
    func duration(_ node: Node, _ what: String, range: ClosedRange<Duration>) -> Duration? {
        guard let value = duration(node, what) else { return nil }
        guard range.contains(value) else {
            error(node, "\(what) must be between \(Self.text(range.lowerBound)) and \(Self.text(range.upperBound)), found \(Self.text(value))")
            return nil
        }
        return value
    }

    /// `10ms`, `1s`, `1.5s`, `3600s`.
    static func text(_ duration: Duration) -> String {
        let milliseconds = duration.milliseconds
        return milliseconds < 1000 ? "\(milliseconds)ms" : milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(Double(milliseconds) / 1000)s"
    }

    func duration(_ node: Node, _ what: String) -> Duration? {
        guard case .scalar(let scalar) = node else {
            error(node, "\(what) must be a duration such as 30s, 15m or 2h, found \(describe(node))")
            return nil
        }
        let text = scalar.string.trimmingCharacters(in: .whitespaces)
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        var seconds: Double?
        for (suffix, unit) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            if let value = Double(digits), !digits.isEmpty, digits.allSatisfy({ $0.isNumber || $0 == "." }) {
                seconds = value * unit
                break
            }
        }
        if seconds == nil, let value = Double(text) { seconds = value }
        guard let seconds, seconds.isFinite, seconds >= 0 else {
            error(node, "\(what) must be a duration such as 500ms, 30s, 15m or 2h, found \"\(text)\"")
            return nil
        }
        guard seconds <= Double(Self.maximumDuration.components.seconds) else {
            error(node, "\(what) must be at most 3650d (ten years), found \"\(text)\"")
            return nil
        }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    func color(_ node: Node, _ what: String) -> Color? {
        guard let text = string(node, what) else { return nil }
        guard let color = Color(text) else {
            error(node, "\(what) must be a color written #RRGGBB (quote it: \"#D64545\"), found \"\(text)\"")
            return nil
        }
        return color
    }

    /// Reports an expression or template error at its place inside the scalar.
    func error(_ node: Node, _ problem: ExpressionError, _ what: String) {
        var offset = problem.column - 1
        if case .scalar(let scalar) = node, scalar.style == .singleQuoted || scalar.style == .doubleQuoted { offset += 1 }
        error(node, "\(what): \(problem.message)", columnOffset: offset)
    }

    func describe(_ node: Node) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar(let scalar): return scalar.string.isEmpty ? "nothing" : "\"\(scalar.string)\""
        }
    }

    private func closest(_ key: String, in candidates: [String]) -> String? {
        let lowered = key.lowercased()
        let scored = candidates.map { ($0, editDistance(lowered, $0.lowercased())) }.min { $0.1 < $1.1 }
        guard let (candidate, distance) = scored, distance <= max(2, key.count / 3) else { return nil }
        return candidate
    }
}

private func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    var previous = Array(0...b.count)
    for i in 1...max(a.count, 1) where !a.isEmpty {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...max(b.count, 1) where !b.isEmpty {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
