import Foundation

/// What a map client holds, and how it applies the daemon's output: the rules of
/// `docs/protocol.md` ("What a map client does"), as a value that is given each message and
/// says what it did. A payload that breaks the contract is an outcome, never a crash.
public struct MapClientState: Sendable {
    /// A location, keyed by dataset and id (a moving one arrives at a new topic before its
    /// old one is cleared).
    public struct Key: Hashable, Sendable, Comparable {
        public var dataset: String
        public var location: String

        public init(dataset: String, location: String) {
            self.dataset = dataset
            self.location = location
        }

        public static func < (a: Key, b: Key) -> Bool { (a.dataset, a.location) < (b.dataset, b.location) }
    }

    public struct Entry: Sendable, Equatable {
        public var change: StyleMessage
        /// When this client applied it.
        public var receivedAt: Date
        public var place: StyleMessage.Place { change.topic }
        /// Hidden by its layer (`"visible": false`).
        public var hidden: Bool { change.style.visible == false }
    }

    public enum Outcome: Sendable, Equatable {
        /// A change applied; `movedFrom` when it moved the location.
        case applied(Key, movedFrom: StyleMessage.Place?)
        /// A clear of the place the location was at: it is gone.
        case removed(Key, StyleMessage.Place)
        /// Older than (or the same as) the change held: dropped.
        case older(Key, held: Order, received: Order)
        /// A clear of a place the location already left (it moved), or of one never seen.
        case staleClear(topic: String)
        case legend(dataset: String)
        case status(instance: String?, online: Bool)
        case lease(partition: String, LeaseMessage)
        /// A payload that breaks the contract: its topic and what is wrong.
        case violation(topic: String, problem: String)
        /// A topic outside the daemon's output.
        case ignored(topic: String)
    }

    /// The wire format this client knows (`format` in every payload).
    public static let knownFormat = 1

    public let prefix: String
    public private(set) var locations: [Key: Entry] = [:]
    public private(set) var legends: [String: LegendMessage] = [:]
    /// `online` or `offline`, per instance (nil: a daemon alone on its prefix).
    public private(set) var statuses: [String: Bool] = [:]
    public private(set) var leases: [String: LeaseMessage] = [:]
    /// Changes dropped for being older than the one held.
    public private(set) var droppedOlder = 0
    public private(set) var violations = 0
    /// A newer wire format than this client knows was seen (said once).
    public private(set) var newerFormat: Int?

    public init(prefix: String = "livedata") {
        self.prefix = prefix
    }

    /// Applies one message of the daemon's output.
    public mutating func apply(topic: String, payload: [UInt8], now: Date = Date()) -> Outcome {
        let prefixLevels = prefix.split(separator: "/", omittingEmptySubsequences: false).count
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard levels.count > prefixLevels, levels[..<prefixLevels].joined(separator: "/") == prefix else {
            return .ignored(topic: topic)
        }
        let rest = Array(levels[prefixLevels...])
        switch rest[0] {
        case "style" where rest.count == 7:
            return applyStyle(topic: topic, levels: Array(rest[1...]), payload: payload, now: now)
        case "legend" where rest.count == 2:
            if payload.isEmpty {
                legends[rest[1]] = nil
                return .legend(dataset: rest[1])
            }
            guard let legend = decode(LegendMessage.self, payload, topic: topic) else { return violation(topic, lastProblem) }
            noteFormat(legend.format)
            legends[rest[1]] = legend
            return .legend(dataset: rest[1])
        case "status" where rest.count <= 2:
            let text = String(decoding: payload, as: UTF8.self)
            guard text == "online" || text == "offline" else {
                return violation(topic, "a status is `online` or `offline`, not \(text.prefix(40).debugDescription)")
            }
            let instance = rest.count == 2 ? rest[1] : nil
            statuses[instance ?? ""] = text == "online"
            return .status(instance: instance, online: text == "online")
        case "owner" where rest.count == 2:
            guard let lease = decode(LeaseMessage.self, payload, topic: topic) else { return violation(topic, lastProblem) }
            leases[rest[1]] = lease
            return .lease(partition: rest[1], lease)
        default:
            return .ignored(topic: topic)
        }
    }

    private mutating func applyStyle(topic: String, levels: [String], payload: [UInt8], now: Date) -> Outcome {
        let place = StyleMessage.Place(
            dataset: levels[0], venue: levels[1], building: levels[2], floor: levels[3], room: levels[4], location: levels[5])
        let key = Key(dataset: place.dataset, location: place.location)
        guard !payload.isEmpty else {
            // A clear removes the location from that place only: one that moved is elsewhere now.
            guard let held = locations[key], held.place == place else { return .staleClear(topic: topic) }
            locations[key] = nil
            return .removed(key, place)
        }
        guard let change = decode(StyleMessage.self, payload, topic: topic) else { return violation(topic, lastProblem) }
        guard change.topic == place, change.location == place.location else {
            return violation(topic, "the payload's topic \(change.topic.path) is not the topic it came on")
        }
        noteFormat(change.format)
        if let held = locations[key], change.order <= held.change.order {
            droppedOlder += 1
            return .older(key, held: held.change.order, received: change.order)
        }
        let movedFrom = locations[key].map(\.place).flatMap { $0 == place ? nil : $0 }
        locations[key] = Entry(change: change, receivedAt: now)
        return .applied(key, movedFrom: movedFrom)
    }

    /// The legend title of a location's state: the first entry of its dataset's legend
    /// whose rules include one that applies to it.
    public func state(of entry: Entry) -> String? {
        guard let legend = legends[entry.place.dataset] else { return nil }
        return legend.entries.first { item in item.rules.contains { entry.change.rules.contains($0) } }?.title
    }

    private var lastProblem = ""

    private mutating func decode<T: Decodable>(_ type: T.Type, _ payload: [UInt8], topic: String) -> T? {
        do {
            return try JSONDecoder().decode(type, from: Data(payload))
        } catch let DecodingError.keyNotFound(key, context) {
            lastProblem = "\(Self.path(context.codingPath + [key])) is missing"
        } catch let DecodingError.typeMismatch(_, context) {
            lastProblem = "\(Self.path(context.codingPath)): \(context.debugDescription)"
        } catch let DecodingError.valueNotFound(_, context) {
            lastProblem = "\(Self.path(context.codingPath)) is null"
        } catch DecodingError.dataCorrupted(let context) {
            lastProblem = context.codingPath.isEmpty ? "not JSON" : "\(Self.path(context.codingPath)): \(context.debugDescription)"
        } catch {
            lastProblem = "\(error)"
        }
        return nil
    }

    /// `$.style.label` for a decoding error's place.
    private static func path(_ keys: [any CodingKey]) -> String {
        "$" + keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }

    private mutating func violation(_ topic: String, _ problem: String) -> Outcome {
        violations += 1
        return .violation(topic: topic, problem: problem)
    }

    private mutating func noteFormat(_ format: Int?) {
        if let format, format > Self.knownFormat, newerFormat == nil { newerFormat = format }
    }
}
