/// Why an expression or a label template was refused, and where (column in its text, from 1).
public struct ExpressionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var column: Int

    public init(message: String, column: Int) {
        self.message = message
        self.column = column
    }

    public var description: String { "column \(column): \(message)" }
}
