/// Splits an expression into tokens, each with the column where it starts.
struct ExpressionLexer {
    enum Token: Equatable {
        case number(Double)
        case string(String)
        case identifier(String)
        case symbol(String)
        case end
    }

    struct Located: Equatable {
        var token: Token
        var column: Int
    }

    static func tokens(_ source: String) throws(ExpressionError) -> [Located] {
        let scalars = Array(source.unicodeScalars)
        var tokens: [Located] = []
        var index = 0
        func column(_ index: Int) -> Int { index + 1 }
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar.properties.isWhitespace {
                index += 1
                continue
            }
            let start = index
            if ("0"..."9").contains(scalar) || (scalar == "." && index + 1 < scalars.count && ("0"..."9").contains(scalars[index + 1])) {
                while index < scalars.count, ("0"..."9").contains(scalars[index]) || scalars[index] == "." { index += 1 }
                if index < scalars.count, scalars[index] == "e" || scalars[index] == "E" {
                    index += 1
                    if index < scalars.count, scalars[index] == "+" || scalars[index] == "-" { index += 1 }
                    while index < scalars.count, ("0"..."9").contains(scalars[index]) { index += 1 }
                }
                let text = String(String.UnicodeScalarView(scalars[start..<index]))
                guard let value = Double(text) else {
                    throw ExpressionError(message: "\"\(text)\" is not a number", column: column(start))
                }
                tokens.append(Located(token: .number(value), column: column(start)))
                continue
            }
            if scalar == "\"" || scalar == "'" {
                let quote = scalar
                index += 1
                var text = String.UnicodeScalarView()
                while index < scalars.count, scalars[index] != quote {
                    if scalars[index] == "\\", index + 1 < scalars.count {
                        index += 1
                    }
                    text.append(scalars[index])
                    index += 1
                }
                guard index < scalars.count else {
                    throw ExpressionError(message: "the string is not closed by \(quote)", column: column(start))
                }
                index += 1
                tokens.append(Located(token: .string(String(text)), column: column(start)))
                continue
            }
            if scalar == "_" || scalar.properties.isAlphabetic {
                while index < scalars.count,
                    scalars[index] == "_" || scalars[index] == "." || scalars[index].properties.isAlphabetic
                        || ("0"..."9").contains(scalars[index])
                {
                    index += 1
                }
                let text = String(String.UnicodeScalarView(scalars[start..<index]))
                tokens.append(Located(token: .identifier(text), column: column(start)))
                continue
            }
            let two = index + 1 < scalars.count ? String(String.UnicodeScalarView([scalar, scalars[index + 1]])) : ""
            if ["==", "!=", "<=", ">=", "&&", "||"].contains(two) {
                let symbol = two == "&&" ? "and" : two == "||" ? "or" : two
                tokens.append(Located(token: two == "&&" || two == "||" ? .identifier(symbol) : .symbol(symbol), column: column(start)))
                index += 2
                continue
            }
            if "<>+-*/()!,".unicodeScalars.contains(scalar) {
                tokens.append(Located(token: scalar == "!" ? .identifier("not") : .symbol(String(scalar)), column: column(start)))
                index += 1
                continue
            }
            if scalar == "=" {
                throw ExpressionError(message: "'=' is not an operator; compare with '=='", column: column(start))
            }
            throw ExpressionError(message: "unexpected character '\(scalar)'", column: column(start))
        }
        tokens.append(Located(token: .end, column: column(scalars.count)))
        return tokens
    }
}
