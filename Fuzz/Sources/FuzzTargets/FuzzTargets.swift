import DisplayRules
import Foundation
import LiveDataConfiguration
import LiveState
import LiveStatePersistence
import LiveTopics

/// What each fuzz target does with one input: the parsers of outside input, each with the
/// properties that must hold of whatever they accept. A broken property stops the process
/// (libFuzzer reports the input). The `Fuzz/` package wraps each one for libFuzzer
/// (`scripts/fuzz TARGET SECONDS`); the unit tests run every file of `Fuzz/Corpus/TARGET`
/// through it, so CI checks what fuzzing found.
public enum FuzzTargets {
    public static let names = ["payload", "topic", "expression", "config", "record", "journal"]

    /// Runs target `name` on one input.
    public static func run(_ name: String, _ input: UnsafeRawBufferPointer) {
        switch name {
        case "payload": payload(input)
        case "topic": topic(input)
        case "expression": expression(input)
        case "config": config(input)
        case "record": record(input)
        case "journal": journal(input)
        default: preconditionFailure("no fuzz target \(name); the targets: \(names.joined(separator: ", "))")
        }
    }

    /// A live-update payload: decoded within the limits, the same whether or not the
    /// source fields are kept.
    public static func payload(_ input: UnsafeRawBufferPointer) {
        let limits = PayloadLimits.standard
        guard let kept = try? LivePayload(input, limits: limits, keepingSource: true) else {
            precondition((try? LivePayload(input, limits: limits, keepingSource: false)) == nil, "refused only when keeping the source")
            return
        }
        precondition(kept.properties.count <= limits.properties, "more properties than the limit")
        for property in kept.properties {
            precondition(
                property.name.utf8.count <= limits.nameLength && property.value.utf8.count <= limits.valueLength,
                "a property past its length limit")
        }
        guard let lean = try? LivePayload(input, limits: limits, keepingSource: false) else {
            preconditionFailure("accepted only when keeping the source")
        }
        precondition(
            lean.properties == kept.properties && lean.timestamp == kept.timestamp && lean.isRemoval == kept.isRemoval,
            "the two decodings differ")
    }

    /// A topic and a filter (the input's two lines): a parsed topic prints back as itself,
    /// and the index matches exactly what the filter alone matches.
    public static func topic(_ input: UnsafeRawBufferPointer) {
        let text = String(decoding: input, as: UTF8.self)
        let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let topic = String(parts[0])
        if let parsed = try? LiveTopic(parsing: topic) {
            precondition((try? LiveTopic(parsing: parsed.description)) == parsed, "a parsed topic does not print back")
        }
        guard parts.count > 1, let filter = try? TopicFilter(String(parts[1])) else { return }
        var index = TopicIndex<Int>()
        _ = index.add(filter, 1)
        _ = try? index.add("+/+/+/+/+/+/+", 2)
        guard let matched = try? index.matches(topic) else { return }
        precondition(matched.contains(1) == filter.matches(topic), "the index and the filter disagree")
    }

    /// A rule condition: parsed (or refused with a reason), and evaluated without trapping.
    public static func expression(_ input: UnsafeRawBufferPointer) {
        guard let condition = try? CompiledExpression(String(decoding: input, as: UTF8.self), domain: "occupancy") else { return }
        _ = condition.evaluate(values)
        _ = condition.evaluate(LiveValues(domains: []))
    }

    private static let values = LiveValues(domains: [
        DomainValue(
            domain: "occupancy", properties: ["nrOfPeople": "3", "capacity": "8", "note": "busy", "x": "1e308"],
            timestamp: LiveTimestamp(millisecondsSince1970: 0)),
        DomainValue(domain: "co2", properties: ["co2Level": "-0"], timestamp: LiveTimestamp(millisecondsSince1970: 0)),
    ])

    /// A config file: loaded, or refused with file:line:column errors, never a trap.
    public static func config(_ input: UnsafeRawBufferPointer) {
        do {
            _ = try LiveDataConfig.parse(yaml: String(decoding: input, as: UTF8.self), file: "fuzz.yaml")
        } catch {
            precondition(!error.errors.isEmpty, "refused without saying why")
        }
    }

    /// A stored location: decoded or refused; what decodes encodes back to the same record.
    public static func record(_ input: UnsafeRawBufferPointer) {
        guard let record = try? RecordCodec.decode(input) else { return }
        let encoded = RecordCodec.encode(record)
        let again = encoded.withUnsafeBytes { try? RecordCodec.decode($0) }
        precondition(again == record, "a decoded record does not survive encoding: \(record) became \(String(describing: again))")
    }

    /// A journal segment: opened and replayed without trapping; records come in order,
    /// each at least a header long, and a second open finds the same records.
    public static func journal(_ input: UnsafeRawBufferPointer) {
        let folder = journalFolder
        let segment = folder + "/0000000000000000.journal"
        try? FileManager.default.removeItem(atPath: segment)
        guard FileManager.default.createFile(atPath: segment, contents: Data(input)) else { preconditionFailure("cannot write \(segment)") }
        func replay() -> [UInt64] {
            guard let journal = try? IntakeJournal(directory: folder, syncInterval: nil) else { return [] }
            defer { journal.close() }
            var ends: [UInt64] = []
            _ = try? journal.replayInPlace(from: 0) { batch in ends += batch.map(\.end) }
            return ends
        }
        let ends = replay()
        var previous: UInt64 = 0
        for end in ends {
            precondition(end >= previous + 8, "records out of order or shorter than a header")
            previous = end
        }
        precondition(previous <= UInt64(input.count), "a record past the end of the file")
        precondition(replay() == ends, "a second open found other records")
    }

    private static let journalFolder: String = {
        let folder = NSTemporaryDirectory() + "livedata-fuzz-journal-\(getpid())"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }()
}
