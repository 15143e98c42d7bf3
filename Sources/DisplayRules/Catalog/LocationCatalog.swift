/// What is known about locations beforehand: `id,name,type,capacity` from a CSV file.
public struct LocationCatalog: Sendable {
    public struct Entry: Hashable, Sendable {
        public var id: String
        public var name: String?
        public var type: String?
        public var capacity: Int?

        public init(id: String, name: String? = nil, type: String? = nil, capacity: Int? = nil) {
            self.id = id
            self.name = name
            self.type = type
            self.capacity = capacity
        }
    }

    /// Why a catalog line was refused, with its line number (from 1).
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var message: String

        public init(line: Int, message: String) {
            self.line = line
            self.message = message
        }

        public var description: String { "line \(line): \(message)" }
    }

    public private(set) var entries: [String: Entry] = [:]

    public init(_ entries: [Entry] = []) {
        for entry in entries { self.entries[entry.id] = entry }
    }

    public subscript(id: String) -> Entry? { entries[id] }
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// Parses CSV with a header row naming the columns: `id` is required, `name`, `type` and
    /// `capacity` are optional, in any order. Fields may be quoted (`"a, b"`, `""` for a quote).
    /// - Throws: ``ParseError`` naming the line.
    public init(csv text: String) throws(ParseError) {
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated()
            .map { ($0.offset + 1, String($0.element)) }
            .filter { !$0.1.trimmingCharacters(in: " \t").isEmpty && !$0.1.hasPrefix("#") }
        guard !lines.isEmpty else { return }
        let (headerLine, headerText) = lines.removeFirst()
        let header = try Self.fields(headerText, line: headerLine).map { $0.lowercased() }
        guard let idColumn = header.firstIndex(of: "id") else {
            throw ParseError(line: headerLine, message: "the header needs an \"id\" column (id,name,type,capacity)")
        }
        for column in header where !["id", "name", "type", "capacity"].contains(column) {
            throw ParseError(line: headerLine, message: "unknown column \"\(column)\" (expected id, name, type, capacity)")
        }
        let nameColumn = header.firstIndex(of: "name")
        let typeColumn = header.firstIndex(of: "type")
        let capacityColumn = header.firstIndex(of: "capacity")
        for (number, text) in lines {
            let fields = try Self.fields(text, line: number)
            guard fields.count == header.count else {
                throw ParseError(line: number, message: "\(fields.count) fields, but the header has \(header.count)")
            }
            let id = fields[idColumn]
            guard !id.isEmpty else { throw ParseError(line: number, message: "the id is empty") }
            var capacity: Int?
            if let capacityColumn, !fields[capacityColumn].isEmpty {
                guard let value = Int(fields[capacityColumn]), value >= 0 else {
                    throw ParseError(line: number, message: "capacity \"\(fields[capacityColumn])\" is not a whole number")
                }
                capacity = value
            }
            if entries[id] != nil { throw ParseError(line: number, message: "location \"\(id)\" is listed twice") }
            entries[id] = Entry(
                id: id, name: nameColumn.map { fields[$0] }.flatMap { $0.isEmpty ? nil : $0 },
                type: typeColumn.map { fields[$0] }.flatMap { $0.isEmpty ? nil : $0 }, capacity: capacity)
        }
    }

    private static func fields(_ line: String, line number: Int) throws(ParseError) -> [String] {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var iterator = Array(line).makeIterator()
        var pending: Character? = nil
        while let character = pending ?? iterator.next() {
            pending = nil
            if quoted {
                if character == "\"" {
                    if let next = iterator.next() {
                        if next == "\"" {
                            field.append("\"")
                        } else {
                            quoted = false
                            pending = next
                        }
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
            } else if character == "\"" && field.isEmpty {
                quoted = true
            } else if character == "," {
                fields.append(field.trimmingCharacters(in: " \t"))
                field = ""
            } else {
                field.append(character)
            }
        }
        if quoted { throw ParseError(line: number, message: "a quoted field is not closed") }
        fields.append(field.trimmingCharacters(in: " \t"))
        return fields
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        var result = Substring(self)
        while let first = result.first, set.contains(first) { result = result.dropFirst() }
        while let last = result.last, set.contains(last) { result = result.dropLast() }
        return String(result)
    }
}
