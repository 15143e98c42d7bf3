import Hummingbird

/// An HTML page with `{{name}}` placeholders, split once into its text and its
/// placeholders: a request then copies bytes and escapes only the values it fills in.
struct PageTemplate<Placeholder: RawRepresentable<String> & Sendable>: Sendable {
    enum Part: Sendable {
        case text([UInt8])
        case placeholder(Placeholder)
    }

    let parts: [Part]
    private let textByteCount: Int

    /// - Throws: `PageTemplateError` when a `{{` has no `}}` after it, or names no `Placeholder`.
    init(_ bytes: [UInt8]) throws(PageTemplateError) {
        // Two of `byte` at `offset`: the start or the end of a placeholder.
        func pair(_ byte: UInt8, at offset: Int) -> Bool {
            offset + 1 < bytes.count && bytes[offset] == byte && bytes[offset + 1] == byte
        }
        var parts: [Part] = []
        var textStart = 0
        var index = 0
        while index < bytes.count {
            guard pair(UInt8(ascii: "{"), at: index) else {
                index += 1
                continue
            }
            let nameStart = index + 2
            var nameEnd = nameStart
            while nameEnd < bytes.count && !pair(UInt8(ascii: "}"), at: nameEnd) { nameEnd += 1 }
            guard nameEnd < bytes.count else { throw .unclosedPlaceholder(offset: index) }
            let name = String(decoding: bytes[nameStart..<nameEnd], as: UTF8.self)
            guard let placeholder = Placeholder(rawValue: name) else { throw .unknownPlaceholder(name, offset: index) }
            if textStart < index { parts.append(.text(Array(bytes[textStart..<index]))) }
            parts.append(.placeholder(placeholder))
            index = nameEnd + 2
            textStart = index
        }
        if textStart < bytes.count { parts.append(.text(Array(bytes[textStart...]))) }
        self.parts = parts
        self.textByteCount = bytes.count
    }

    /// The page with each placeholder replaced by `value(placeholder)`, HTML-escaped.
    func render(_ value: (Placeholder) -> String) -> ByteBuffer {
        var page = ByteBuffer()
        page.reserveCapacity(textByteCount + 256)
        for part in parts {
            switch part {
            case .text(let bytes): page.writeBytes(bytes)
            case .placeholder(let placeholder): page.writeString(htmlEscaped(value(placeholder)))
            }
        }
        return page
    }
}

/// Why a page template was refused.
enum PageTemplateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A `{{` at this byte offset has no `}}` after it.
    case unclosedPlaceholder(offset: Int)
    /// `{{name}}` at this byte offset names no placeholder the page fills.
    case unknownPlaceholder(String, offset: Int)

    var description: String {
        switch self {
        case .unclosedPlaceholder(let offset):
            return "the placeholder at byte \(offset) has no closing }}"
        case .unknownPlaceholder(let name, let offset):
            return "{{\(name)}} at byte \(offset) is no placeholder of this page"
        }
    }
}
