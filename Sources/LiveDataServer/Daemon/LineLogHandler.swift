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
        var line = "\(event.level) [\(event.source)] \(event.message)"
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line += "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
