/// Parses an expression into the compiled tree, checking types as it goes.
///
/// Precedence, loosest first: `or`, `and`, `not`, comparisons, `+ -`, `* /`, unary `-`.
struct ExpressionParser {
    /// What a sub-expression is known to be before any live value is seen.
    enum StaticType: String {
        case number = "a number"
        case string = "a string"
        case boolean = "a boolean"
        /// A property: text that can be read as a number or a boolean when compared with one.
        case property = "a property"
    }

    struct Typed {
        var node: CompiledExpression.Node
        var type: StaticType
        var column: Int
    }

    private let tokens: [ExpressionLexer.Located]
    private let domain: String?
    private var position = 0
    /// Parentheses, `not` and unary `-` inside each other: each one is a level of recursion
    /// here and when the condition is evaluated, so a hostile config cannot nest without end.
    private var depth = 0
    static let maximumDepth = 32
    /// The longest condition, in characters (a long chain of `and` is a deep tree too).
    static let maximumLength = 4_096

    init(tokens: [ExpressionLexer.Located], domain: String?) {
        self.tokens = tokens
        self.domain = domain
    }

    static func parse(_ source: String, domain: String?) throws(ExpressionError) -> CompiledExpression.Node {
        guard source.count <= maximumLength else {
            throw ExpressionError(message: "the condition is longer than \(maximumLength) characters", column: 1)
        }
        var parser = ExpressionParser(tokens: try ExpressionLexer.tokens(source), domain: domain)
        if parser.current.token == .end {
            throw ExpressionError(message: "the condition is empty", column: 1)
        }
        let expression = try parser.orExpression()
        guard parser.current.token == .end else {
            throw ExpressionError(message: "unexpected \(parser.describe(parser.current.token))", column: parser.current.column)
        }
        return try parser.condition(expression)
    }

    private var current: ExpressionLexer.Located { tokens[position] }

    /// Goes one nesting level down, refusing one too deep; the caller comes back up with
    /// `defer { depth -= 1 }`.
    private mutating func descend(at column: Int) throws(ExpressionError) {
        guard depth < Self.maximumDepth else {
            throw ExpressionError(message: "the condition nests deeper than \(Self.maximumDepth) levels", column: column)
        }
        depth += 1
    }

    private mutating func advance() -> ExpressionLexer.Located {
        defer { position += 1 }
        return tokens[position]
    }

    private func isKeyword(_ word: String) -> Bool {
        if case .identifier(let name) = current.token { return name == word }
        return false
    }

    private func isSymbol(_ symbol: String) -> Bool {
        current.token == .symbol(symbol)
    }

    /// A sub-expression used as a condition: a boolean, or a property read as one.
    private func condition(_ typed: Typed) throws(ExpressionError) -> CompiledExpression.Node {
        switch typed.type {
        case .boolean: return typed.node
        case .property: return .truth(typed.node)
        case .number, .string:
            throw ExpressionError(
                message: "a condition must be true or false, not \(typed.type.rawValue) (compare it, e.g. nrOfPeople > 0)",
                column: typed.column)
        }
    }

    private mutating func orExpression() throws(ExpressionError) -> Typed {
        var left = try andExpression()
        while isKeyword("or") {
            _ = advance()
            let right = try andExpression()
            left = Typed(node: .or(try condition(left), try condition(right)), type: .boolean, column: left.column)
        }
        return left
    }

    private mutating func andExpression() throws(ExpressionError) -> Typed {
        var left = try notExpression()
        while isKeyword("and") {
            _ = advance()
            let right = try notExpression()
            left = Typed(node: .and(try condition(left), try condition(right)), type: .boolean, column: left.column)
        }
        return left
    }

    private mutating func notExpression() throws(ExpressionError) -> Typed {
        if isKeyword("not") {
            let column = advance().column
            try descend(at: column)
            defer { depth -= 1 }
            let operand = try notExpression()
            return Typed(node: .not(try condition(operand)), type: .boolean, column: column)
        }
        return try comparison()
    }

    private mutating func comparison() throws(ExpressionError) -> Typed {
        let left = try sum()
        guard case .symbol(let symbol) = current.token,
            let op = CompiledExpression.Comparison(rawValue: symbol)
        else { return left }
        let opColumn = advance().column
        let right = try sum()
        let kind: CompiledExpression.ComparisonKind
        switch (left.type, right.type) {
        case (.number, .number), (.number, .property), (.property, .number):
            kind = .numeric
        case (.property, .property):
            kind = op.isOrdering ? .numeric : .text
        case (.string, .string), (.string, .property), (.property, .string):
            guard !op.isOrdering else {
                throw ExpressionError(message: "'\(symbol)' compares numbers, not strings", column: opColumn)
            }
            kind = .text
        case (.boolean, .boolean), (.boolean, .property), (.property, .boolean):
            guard !op.isOrdering else {
                throw ExpressionError(message: "'\(symbol)' compares numbers, not booleans", column: opColumn)
            }
            kind = .boolean
        default:
            throw ExpressionError(
                message: "'\(symbol)' cannot compare \(left.type.rawValue) with \(right.type.rawValue)", column: opColumn)
        }
        return Typed(node: .compare(op, kind, left.node, right.node), type: .boolean, column: left.column)
    }

    private mutating func sum() throws(ExpressionError) -> Typed {
        var left = try product()
        while case .symbol(let symbol) = current.token, symbol == "+" || symbol == "-" {
            let column = advance().column
            let right = try product()
            try requireNumeric(left, symbol, column)
            try requireNumeric(right, symbol, column)
            left = Typed(
                node: .arithmetic(symbol == "+" ? .add : .subtract, left.node, right.node), type: .number,
                column: left.column)
        }
        return left
    }

    private mutating func product() throws(ExpressionError) -> Typed {
        var left = try unary()
        while case .symbol(let symbol) = current.token, symbol == "*" || symbol == "/" {
            let column = advance().column
            let right = try unary()
            try requireNumeric(left, symbol, column)
            try requireNumeric(right, symbol, column)
            left = Typed(
                node: .arithmetic(symbol == "*" ? .multiply : .divide, left.node, right.node), type: .number,
                column: left.column)
        }
        return left
    }

    private func requireNumeric(_ operand: Typed, _ symbol: String, _ column: Int) throws(ExpressionError) {
        guard operand.type == .number || operand.type == .property else {
            throw ExpressionError(message: "'\(symbol)' works on numbers, not \(operand.type.rawValue)", column: column)
        }
    }

    private mutating func unary() throws(ExpressionError) -> Typed {
        if isSymbol("-") {
            let column = advance().column
            try descend(at: column)
            defer { depth -= 1 }
            let operand = try unary()
            try requireNumeric(operand, "-", column)
            if case .number(let value) = operand.node { return Typed(node: .number(-value), type: .number, column: column) }
            return Typed(node: .negate(operand.node), type: .number, column: column)
        }
        return try primary()
    }

    private mutating func primary() throws(ExpressionError) -> Typed {
        let token = advance()
        switch token.token {
        case .number(let value):
            return Typed(node: .number(value), type: .number, column: token.column)
        case .string(let text):
            return Typed(node: .string(text), type: .string, column: token.column)
        case .symbol("("):
            try descend(at: token.column)
            defer { depth -= 1 }
            let inner = try orExpression()
            guard isSymbol(")") else {
                throw ExpressionError(message: "expected ')' to close the '(' at column \(token.column)", column: current.column)
            }
            _ = advance()
            return Typed(node: inner.node, type: inner.type, column: token.column)
        case .identifier(let name):
            switch name {
            case "true", "false":
                return Typed(node: .boolean(name == "true"), type: .boolean, column: token.column)
            case "and", "or", "not":
                throw ExpressionError(message: "'\(name)' needs a condition before it", column: token.column)
            case "exists":
                guard isSymbol("(") else {
                    throw ExpressionError(message: "exists needs a property in parentheses: exists(co2Level)", column: current.column)
                }
                _ = advance()
                let argument = advance()
                guard case .identifier(let propertyName) = argument.token,
                    let reference = PropertyReference(Substring(propertyName), domain: domain)
                else {
                    throw ExpressionError(message: "exists needs a property name", column: argument.column)
                }
                guard isSymbol(")") else {
                    throw ExpressionError(message: "expected ')' after the property name", column: current.column)
                }
                _ = advance()
                return Typed(node: .exists(reference), type: .boolean, column: token.column)
            default:
                if isSymbol("(") {
                    throw ExpressionError(message: "unknown function '\(name)' (the one function is exists)", column: token.column)
                }
                guard let reference = PropertyReference(Substring(name), domain: domain) else {
                    throw ExpressionError(
                        message: "\"\(name)\" is not a property name (write name or domain.name)", column: token.column)
                }
                return Typed(node: .property(reference), type: .property, column: token.column)
            }
        case .end:
            throw ExpressionError(message: "the condition ends too early", column: token.column)
        default:
            throw ExpressionError(message: "unexpected \(describe(token.token))", column: token.column)
        }
    }

    private func describe(_ token: ExpressionLexer.Token) -> String {
        switch token {
        case .number(let value): "number \(value)"
        case .string(let text): "string \"\(text)\""
        case .identifier(let name): "'\(name)'"
        case .symbol(let symbol): "'\(symbol)'"
        case .end: "end"
        }
    }
}
