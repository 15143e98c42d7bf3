import LiveTopics
import Mosquitto

/// Turns received messages into output lines, and unreadable ones into warnings.
struct UpdatePrinter {
    let format: OutputFormat
    /// Column width of the location path, widened as longer ones show up so lines stay aligned.
    private var pathWidth = 24

    init(format: OutputFormat) {
        self.format = format
    }

    /// Decodes a message; prints a warning on standard error and returns `nil` if it cannot.
    func decode(_ message: MQTTMessage) -> LiveUpdate? {
        do {
            let topic = try LiveTopic(parsing: message.topic)
            return try LiveUpdate(topic: topic, payload: message.payload, receivedAt: .now)
        } catch {
            printError("warning: ignoring the message on \(message.topic): \(error)")
            return nil
        }
    }

    mutating func print(_ update: LiveUpdate, retained: Bool) {
        switch format {
        case .json: printLine(Self.json(update))
        case .text: printLine(text(update, retained: retained))
        }
    }

    /// One JSON object, keys in the documented order.
    static func json(_ update: LiveUpdate) -> String {
        var object = JSONObjectWriter()
        object.add("topic", update.topic.description)
        for component in LiveTopic.Component.allCases {
            object.add(component.rawValue, update.topic[component])
        }
        object.add("id", update.id)
        object.add("timestamp", update.timestamp.description)
        if let origin = update.originSourceId { object.add("originSourceId", origin) }
        object.add("properties", json: update.properties.json)
        if update.isRemoval { object.add("removed", true) }
        return object.json
    }

    /// `2026-11-21T10:15:03.120Z  ds1/hq/B/F3/R7/room-7    occupancy     nrOfPeople=3 capacity=8`
    mutating func text(_ update: LiveUpdate, retained: Bool) -> String {
        let path = update.topic.locationPath
        pathWidth = max(pathWidth, path.count)
        var line = update.timestamp.description + "  " + padded(path, pathWidth) + "  " + padded(update.topic.domain, 12)
        if update.isRemoval {
            line += "  (value removed)"
        } else {
            let values = update.properties.map { "\($0.name)=\(Self.quotedIfNeeded($0.value))" }
            line += "  " + values.joined(separator: " ")
        }
        if update.id != update.topic.location { line += "  id=\(update.id)" }
        if let origin = update.originSourceId { line += "  from \(origin)" }
        if retained { line += "  [retained]" }
        return line
    }

    private static func quotedIfNeeded(_ value: String) -> String {
        value.isEmpty || value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" }) ? jsonQuoted(value) : value
    }

    private func padded(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
