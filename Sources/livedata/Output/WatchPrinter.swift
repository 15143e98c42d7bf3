import Foundation
import LiveDataClient
import LiveTopics

/// What `livedata watch` shows: a table redrawn in place on a terminal (at most every
/// `redrawInterval`), a line per change when piped, or a JSON object per change; contract
/// violations as warnings on standard error.
struct WatchPrinter {
    let format: OutputFormat
    let showHidden: Bool
    let terminal: Bool
    private var lastDraw = Date.distantPast
    private var pending = false
    private var warnedFormat = false
    static let redrawInterval: TimeInterval = 0.5

    init(format: OutputFormat, showHidden: Bool, terminal: Bool) {
        self.format = format
        self.showHidden = showHidden
        self.terminal = terminal
    }

    mutating func report(_ outcome: MapClientState.Outcome, in state: MapClientState) {
        if let newer = state.newerFormat, !warnedFormat {
            warnedFormat = true
            printError("warning: the daemon writes wire format \(newer); this client knows \(MapClientState.knownFormat) (it shows what it can read)")
        }
        if case .violation(let topic, let problem) = outcome {
            printError("warning: \(topic): the payload breaks the contract: \(problem)")
            return
        }
        switch (format, terminal) {
        case (.json, _): if let line = json(outcome, state) { printLine(line) }
        case (.text, false): if let line = text(outcome, state) { printLine(line) }
        case (.text, true):
            pending = true
            if Date().timeIntervalSince(lastDraw) >= Self.redrawInterval { draw(state) }
        }
    }

    /// The last table, once the watch ends.
    mutating func finish(_ state: MapClientState) {
        if format == .text && terminal && pending { draw(state) }
    }

    private func row(_ entry: MapClientState.Entry, _ state: MapClientState) -> [String] {
        let place = entry.place
        return [
            entry.place.location, "\(place.dataset)/\(place.venue)/\(place.building)/\(place.floor)/\(place.room)",
            state.state(of: entry) ?? "-", entry.change.style.label ?? "", entry.change.style.badge?.text ?? "",
            Self.age(entry.change.updatedAt),
        ]
    }

    /// Seconds since a change was made (`updatedAt`), for people: `4s`, `3m`, `2h`.
    static func age(_ updatedAt: String?, now: Date = Date()) -> String {
        guard let updatedAt, let made = try? Date(updatedAt, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true))
        else { return "" }
        let seconds = max(0, Int(now.timeIntervalSince(made)))
        return seconds < 120 ? "\(seconds)s" : seconds < 7200 ? "\(seconds / 60)m" : "\(seconds / 3600)h"
    }

    private mutating func draw(_ state: MapClientState) {
        lastDraw = Date()
        pending = false
        let entries = state.locations.sorted { $0.key < $1.key }.map(\.value).filter { showHidden || !$0.hidden }
        var rows = [["LOCATION", "PLACE", "STATE", "LABEL", "BADGE", "AGE"]] + entries.prefix(200).map { row($0, state) }
        if entries.count > 200 { rows.append(["… \(entries.count - 200) more", "", "", "", "", ""]) }
        var widths = Array(repeating: 0, count: 6)
        for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
        var screen = "\u{1B}[H\u{1B}[2J"
        let statuses = state.statuses.sorted { $0.key < $1.key }.map { ($0.key.isEmpty ? "daemon" : $0.key) + ($0.value ? " online" : " OFFLINE") }
        let leases = state.leases.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.instance) (epoch \($0.value.epoch))" }
        screen += "\(entries.count) locations · " + (statuses + leases).joined(separator: " · ")
        screen += " · \(state.droppedOlder) older dropped · \(state.violations) contract violations\n\n"
        for row in rows {
            screen += zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ") + "\n"
        }
        writeOutput(screen)
    }

    private func text(_ outcome: MapClientState.Outcome, _ state: MapClientState) -> String? {
        let time = Date().formatted(Date.ISO8601FormatStyle().time(includingFractionalSeconds: false))
        switch outcome {
        case .applied(let key, let movedFrom):
            guard let entry = state.locations[key], showHidden || !entry.hidden else { return nil }
            let cells = row(entry, state)
            let moved = movedFrom.map { " (moved from \($0.building)/\($0.floor)/\($0.room))" } ?? ""
            return "\(time)  \(cells[0])  \(cells[1])  \(cells[2])  \(cells[3])  \(cells[4])\(moved)"
        case .removed(let key, let place):
            return "\(time)  \(key.location)  \(place.dataset)/\(place.venue)/\(place.building)/\(place.floor)/\(place.room)  removed"
        case .status(let instance, let online):
            return "\(time)  \(instance ?? "daemon") is \(online ? "online" : "offline")"
        case .lease(let partition, let lease):
            return "\(time)  partition \(partition): \(lease.instance) holds epoch \(lease.epoch)\(lease.released == true ? ", released" : "")"
        default:
            return nil
        }
    }

    private func json(_ outcome: MapClientState.Outcome, _ state: MapClientState) -> String? {
        var object = JSONObjectWriter()
        switch outcome {
        case .applied(let key, let movedFrom):
            guard let entry = state.locations[key] else { return nil }
            object.add("event", "applied")
            object.add("dataset", key.dataset)
            object.add("location", key.location)
            object.add("place", entry.place.path)
            if let movedFrom { object.add("movedFrom", movedFrom.path) }
            if let title = state.state(of: entry) { object.add("state", title) }
            if let label = entry.change.style.label { object.add("label", label) }
            if let badge = entry.change.style.badge?.text { object.add("badge", badge) }
            object.add("hidden", entry.hidden)
            object.add("epoch", Int(clamping: entry.change.epoch ?? 0))
            object.add("version", Int(clamping: entry.change.version))
        case .removed(let key, let place):
            object.add("event", "removed")
            object.add("dataset", key.dataset)
            object.add("location", key.location)
            object.add("place", place.path)
        case .older(let key, let held, let received):
            object.add("event", "dropped")
            object.add("dataset", key.dataset)
            object.add("location", key.location)
            object.add("held", held.description)
            object.add("received", received.description)
        case .status(let instance, let online):
            object.add("event", "status")
            if let instance { object.add("instance", instance) }
            object.add("online", online)
        case .lease(let partition, let lease):
            object.add("event", "lease")
            object.add("partition", partition)
            object.add("instance", lease.instance)
            object.add("epoch", Int(clamping: lease.epoch))
        case .staleClear, .legend, .violation, .ignored:
            return nil
        }
        return object.json
    }
}
