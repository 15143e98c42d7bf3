import Foundation
import Logging

/// Logs one line per event to standard error, written with one call so that lines from
/// different threads never interleave; journald adds its own timestamps, so this writes
/// `level [module] message key=value…`.
public struct LineLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = "\(event.level) [\(event.source)] \(Self.escaped("\(event.message)"))"
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(Self.escaped("\(value)"))" }
        line += "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// Text from outside (topics, payload fields, ids) with its control characters written
    /// as `\u{XX}`: a line in the journal stays one line and cannot forge another or move
    /// the terminal's cursor.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) })
        else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
