import LiveTopics

/// What waits to be published while the broker takes publications more slowly than styles
/// change: at most one entry per topic, the newest (latest wins), in the order the topics
/// first waited. So its size is bounded by the number of topics (locations, floors,
/// buildings, datasets), never by the number of changes, and a location that changes ten
/// times while it waits is published once, with its newest style.
///
/// A derived change waits as the change itself, not as its JSON: the payload is built when
/// it leaves (``Publication`` bytes exist only for what the broker's window holds). When a
/// newer change of the same location replaces a waiting one, the newer keeps the older
/// one's "before", so that its `changed` fields are counted from the style last sent.
///
/// A location's change waits under its address, not under its topic: its topic is made
/// when it leaves, so that a waiting change costs no string of its own (a broker that takes
/// publications slowly can leave a large share of the locations waiting).
///
/// Pure bookkeeping: the caller puts, takes what the window has room for, and puts back
/// what the client could not take.
public struct PendingOutput {
    /// What an entry waits under: a location's style topic, by its address, or a topic.
    public enum Key: Hashable, Sendable {
        case style(LocationAddress)
        case topic(String)
    }

    public enum Item {
        case change(DerivedChange)
        case publication(Publication)
    }

    public struct Entry {
        public var item: Item
        /// When the oldest update behind it arrived (for the update-to-acknowledgement lag).
        public var since: MonotonicInstant?

        public init(item: Item, since: MonotonicInstant?) {
            self.item = item
            self.since = since
        }
    }

    private var entries: [Key: Entry] = [:]
    /// Keys in the order they first waited; `head` is the next to leave. A key appears once
    /// while it waits.
    private var order: [Key] = []
    private var head = 0
    /// Entries replaced by a newer one of their topic before they left.
    public private(set) var coalesced = 0
    /// Entries ever put in line.
    public private(set) var puts = 0

    public init() {}

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// Puts a publication in line for its topic, replacing whatever waited there.
    /// `key`: what it waits under (``OutputFormat/pendingKey(of:)``; by default its topic).
    public mutating func put(_ publication: Publication, under key: Key? = nil, since: MonotonicInstant? = nil) {
        put(key ?? .topic(publication.topic), .publication(publication), since: since)
    }

    /// Puts a derived change in line for its location's style topic.
    public mutating func put(_ change: DerivedChange, since: MonotonicInstant? = nil) {
        put(.style(change.address), .change(change), since: since)
    }

    private mutating func put(_ key: Key, _ item: Item, since: MonotonicInstant?) {
        puts += 1
        if var waiting = entries[key] {
            coalesced += 1
            var item = item
            if case .change(var newer) = item, case .change(let older) = waiting.item {
                newer.before = older.before
                item = .change(newer)
            }
            waiting.item = item
            waiting.since = Self.earlier(waiting.since, since)
            entries[key] = waiting
        } else {
            entries[key] = Entry(item: item, since: since)
            order.append(key)
        }
    }

    /// Takes the entry that has waited longest.
    public mutating func take() -> (key: Key, entry: Entry)? {
        while head < order.count {
            let key = order[head]
            head += 1
            if let entry = entries.removeValue(forKey: key) {
                compact()
                return (key, entry)
            }
        }
        compact()
        return nil
    }

    /// Puts back an entry just taken that could not leave (the connection dropped): first
    /// in line again, unless a newer one of its key came meanwhile.
    public mutating func putBack(_ key: Key, _ entry: Entry) {
        guard entries[key] == nil else { return }
        entries[key] = entry
        if head > 0 {
            head -= 1
            order[head] = key
        } else {
            order.insert(key, at: 0)
        }
    }

    /// Puts an entry at the end of the line as it is (moved from another line), unless one
    /// of its key waits already.
    public mutating func append(_ key: Key, _ entry: Entry) {
        guard entries[key] == nil else { return }
        entries[key] = entry
        order.append(key)
    }

    /// Drops the line's taken part once it is large, so that the array stays within twice
    /// what waits, and an emptied table's storage.
    private mutating func compact() {
        // A table that once held a long line keeps its size when emptied: let it go.
        if entries.isEmpty && entries.capacity > 4096 { entries = [:] }
        if head == order.count {
            order.removeAll(keepingCapacity: order.count <= 4096)
            head = 0
        } else if head > 4096 && head * 2 > order.count {
            order.removeSubrange(0..<head)
            head = 0
        }
    }

    private static func earlier(_ a: MonotonicInstant?, _ b: MonotonicInstant?) -> MonotonicInstant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }
}
