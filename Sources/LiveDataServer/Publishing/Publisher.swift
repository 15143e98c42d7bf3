import LiveState
import LiveTopics
import Mosquitto

/// Hands publications to the MQTT client, from the pipeline's one place, no faster than the
/// broker takes them.
///
/// Everything to publish waits in a ``PendingOutput`` (latest wins per topic) and leaves
/// while the broker's in-flight window has room: libmosquitto is never handed more than its
/// window holds, so its own queue stays empty, and what waits here is one entry per
/// location however fast styles change. A derived change's JSON is built as it leaves;
/// while nothing waits and the window has room, it goes to the client at once.
///
/// A client of several connections has a line and a window per connection: a location's
/// styles (and the clearing of its topic) always go on the connection its address hashes
/// to, so that they keep their order; summaries, legends and the status on the first.
///
/// Also counts what went out. A publication the library refuses (too large for the
/// broker, an invalid topic) is dropped by the client and counted there
/// (``MQTTClient/refusedSends``): the same bytes would be refused for ever.
struct Publisher {
    /// The connection publications go out on: the daemon's output connection, or, for the
    /// active replica of a failover partition, the connection that holds its lease (what
    /// it had in flight then dies with the lease, never sent on a later connection).
    var client: MQTTClient {
        didSet {
            guard client !== oldValue else { return }
            droppedBefore += oldValue.refusedSends.count - droppedBaseline
            droppedBaseline = client.refusedSends.count
            regroup()
        }
    }
    /// Publications the library refused on this publisher's clients while they were its:
    /// dropped by the client, the same bytes would be refused again.
    var dropped: Int { droppedBefore + client.refusedSends.count - droppedBaseline }
    /// The last of them: its topic and the library's error.
    var lastDropped: String? { client.refusedSends.last }
    private var droppedBefore = 0
    private var droppedBaseline: Int
    let qos: MQTTQoS
    /// The formats, with the failover epoch the payloads carry (see ``OutputFormat/epoch``).
    var topics: OutputFormat
    /// Where a derived change's JSON is written on its way to the client: one buffer for
    /// all of them.
    private var scratch = JSONStream(capacity: 1024)
    /// Derived changes handed to the client.
    private(set) var changes = 0
    /// Summaries put in line.
    private(set) var summaries = 0
    /// What waits, one line per connection of the client.
    private var lines: [PendingOutput]
    /// Everything ever put in line or sent at once.
    var puts: Int { lines.reduce(0) { $0 + $1.puts } + sentAtOnce + discardedPuts }
    /// Entries replaced by a newer one of their topic before they left.
    var coalesced: Int { lines.reduce(0) { $0 + $1.coalesced } }
    /// ``PendingOutput/puts`` of lines discarded by ``discardWaiting()``.
    private var discardedPuts = 0
    /// Derived changes handed to the client as they came, past the line.
    private var sentAtOnce = 0
    /// How many more may go at once, per connection: the window's room at the end of the
    /// last ``drain()``, less what went since (acknowledgements only make more room meanwhile).
    private var roomAtOnce: [Int]
    /// The publications handed to the client since the last sync marker the broker
    /// acknowledged (see ``LivePipeline``'s markers), by the location whose style topic each
    /// went to (`nil` for any other topic: a summary, a legend, a marker): what a broker
    /// that resumed the session may still lack, if it lost what it acknowledged last.
    /// `recent[0]` is the publication numbered `recentBase` (publications handed over are
    /// numbered from 0). Addresses, not topics: a change's address is a reference the
    /// change holds already, where its topic would be a string made for each.
    private(set) var recent: [LocationAddress?] = []
    private var recentBase = 0
    /// Publications handed to the client so far (the next one's number).
    private(set) var handedOver = 0
    /// `recent` was full (``recentLimit``) when this one was handed over: it and what came
    /// after are missing from it, until a marker sent after them is acknowledged.
    private var overflowedAt: Int?
    static let recentLimit = 1_000_000

    /// Whether ``recent`` holds every topic handed over since the last acknowledged marker.
    var recentIsWhole: Bool { overflowedAt == nil }

    /// The broker acknowledged a marker handed over after the first `position`
    /// publications: those are stored at the broker and need no sending again.
    mutating func forgetRecent(before position: Int) {
        let drop = min(max(0, position - recentBase), recent.count)
        recent.removeFirst(drop)
        recentBase += drop
        if overflowedAt != nil && position >= handedOver {
            overflowedAt = nil
            recent.removeAll()
            recentBase = handedOver
        }
    }
    /// At most this many publications leave in one ``drain()`` at QoS 0 (no window), so
    /// that the pipeline gets back to its updates.
    static let unwindowedBatch = 4096

    init(client: MQTTClient, qos: MQTTQoS, topics: OutputFormat) {
        self.client = client
        droppedBaseline = client.refusedSends.count
        self.qos = qos
        self.topics = topics
        lines = Array(repeating: PendingOutput(), count: client.connectionCount)
        roomAtOnce = Array(repeating: 0, count: client.connectionCount)
    }

    /// The connection a publication waiting under `key` goes on: a location's by its
    /// identity, its dataset and id (FNV-1a of both: the same in every run), so that a
    /// location that moves clears its old topic and publishes at the new one on one
    /// connection, in that order (a style topic names its location's identity, so each
    /// topic is always on one connection too); anything else on the first.
    func connection(for key: PendingOutput.Key) -> Int {
        guard lines.count > 1, case .style(let address) = key else { return 0 }
        let hash = address.withPathBytes { path -> UInt64 in
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325
            let firstSlash = path.firstIndex(of: UInt8(ascii: "/")) ?? path.count
            let lastSlash = path.lastIndex(of: UInt8(ascii: "/")) ?? -1
            for byte in path[..<firstSlash] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            for byte in path[(lastSlash + 1)...] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
            return hash
        }
        return Int(hash % UInt64(lines.count))
    }

    /// Lines for another client's connections, with what waited in them.
    private mutating func regroup() {
        let old = lines
        lines = Array(repeating: PendingOutput(), count: client.connectionCount)
        roomAtOnce = Array(repeating: 0, count: client.connectionCount)
        for var line in old {
            while let (key, entry) = line.take() { lines[connection(for: key)].append(key, entry) }
        }
    }

    /// Derived changes and other publications waiting for the window.
    var waiting: Int { lines.reduce(0) { $0 + $1.count } }

    /// What waits on the connection with the fewest waiting.
    var shortestLine: Int { lines.lazy.map(\.count).min() ?? 0 }

    /// Puts a derived change in line; `since` is when the update behind it arrived.
    mutating func send(change: DerivedChange, since: MonotonicInstant? = nil) {
        let key = PendingOutput.Key.style(change.address)
        let connection = connection(for: key)
        guard roomAtOnce[connection] > 0, lines[connection].isEmpty else { return lines[connection].put(change, since: since) }
        roomAtOnce[connection] -= 1
        sentAtOnce += 1
        // Lent as it is: wrapped in an entry only when it has to wait (a copy of the change,
        // a retain of each of its references and a release at its end, for every change).
        do throws(MQTTError) {
            try write(change, since: since, on: connection)
            handedOver(styleOf: change.address)
        } catch {
            // Not connected (the one error a send throws): it leaves after the next connection.
            lines[connection].putBack(key, PendingOutput.Entry(item: .change(change), since: since))
            roomAtOnce[connection] = 0
        }
    }

    /// A derived change already built (it waited for `output.minInterval`).
    mutating func send(changePublication publication: Publication) {
        send(publication)
        changes += 1
    }

    mutating func send(summary: Publication) {
        lines[0].put(summary)
        summaries += 1
    }

    mutating func send(_ publication: Publication) {
        let key = topics.pendingKey(of: publication)
        lines[connection(for: key)].put(publication, under: key)
    }

    mutating func send(_ item: PendingOutput.Item, since: MonotonicInstant? = nil) {
        switch item {
        case .change(let change): send(change: change, since: since)
        case .publication(let publication): send(publication)
        }
    }

    /// Hands the client what waits, oldest first on each connection, while its window has room.
    mutating func drain() -> Drained {
        for connection in roomAtOnce.indices { roomAtOnce[connection] = 0 }
        guard client.state == .connected else { return waiting == 0 ? .empty : .disconnected }
        let windowed = qos != .atMostOnce
        let window = self.window
        return client.withBatchedSends { () -> Drained in
            var left = false
            for connection in lines.indices {
                var room = windowed ? window - client.inFlight(connection: connection) : Self.unwindowedBatch
                while room > 0, let (key, entry) = lines[connection].take() {
                    guard handOver(key, entry, on: connection) else { return .disconnected }
                    room -= 1
                }
                if lines[connection].isEmpty {
                    roomAtOnce[connection] = max(room, 0)
                } else {
                    left = true
                }
            }
            if !left { return .empty }
            return windowed ? .windowFull : .more
        }
    }

    /// How many publications may await acknowledgement on each connection: the broker's
    /// window (its Receive Maximum), and with several connections a share of
    /// ``outputInFlight``: the output as a whole has that many in flight (about what one
    /// connection with a window of 1,000 had), and libmosquitto, which walks a connection's
    /// list of them on every publish and acknowledgement, walks a shorter one.
    var window: Int {
        let broker = client.session.sendWindow
        let connections = lines.count
        return connections > 1 ? min(broker, max(Self.outputInFlight / connections, 16)) : broker
    }

    static let outputInFlight = 1024

    /// A connection with publications waiting has half its window or more free (the
    /// acknowledgements that made it so woke nobody: the drain was not armed yet).
    var halfOpen: Bool {
        let half = window / 2
        return lines.indices.contains { !lines[$0].isEmpty && client.inFlight(connection: $0) <= half }
    }

    /// Gives one publication to the client; one it cannot take for want of a connection
    /// goes back first in line (`false`).
    private mutating func handOver(_ key: PendingOutput.Key, _ entry: PendingOutput.Entry, on connection: Int) -> Bool {
        let styleOf: LocationAddress?
        do throws(MQTTError) {
            switch entry.item {
            case .change(let change):
                try write(change, since: entry.since, on: connection)
                styleOf = change.address
            case .publication(let ready):
                let topic = ready.topic
                let retain = ready.retain
                let sent = ready.payload.withUnsafeBytes { bytes in
                    Result { () throws(MQTTError) in
                        try client.send(topic, bytes: bytes, qos: qos, retain: retain, origin: entry.since, connection: connection)
                    }
                }
                try sent.get()
                styleOf = topics.address(ofStyleTopic: topic)
            }
        } catch {
            lines[connection].putBack(key, entry)
            return false
        }
        handedOver(styleOf: styleOf)
        return true
    }

    /// Hands a derived change's style to the client: written into the one reused buffer and
    /// lent to the client, which copies it; the topic is the style prefix and the address,
    /// put together by the client.
    private mutating func write(_ change: DerivedChange, since: MonotonicInstant?, on connection: Int) throws(MQTTError) {
        let retain = topics.retain
        scratch.reset()
        change.write(to: &scratch, epoch: topics.epoch)
        try scratch.withUnsafeBytes { (bytes) throws(MQTTError) in
            try client.send(
                topics.stylePrefix, then: change.address.path, bytes: bytes, qos: qos, retain: retain, origin: since,
                connection: connection)
        }
        changes += 1
    }

    /// Counts a publication handed over, and notes its location for the sync markers.
    private mutating func handedOver(styleOf: LocationAddress?) {
        if recent.count < Self.recentLimit && overflowedAt == nil {
            recent.append(styleOf)
        } else if overflowedAt == nil {
            overflowedAt = handedOver
        }
        handedOver += 1
    }

    /// Drops everything that waits (a replica that stops publishing: the one that takes
    /// over converges from its own state); returns how many.
    mutating func discardWaiting() -> Int {
        let count = waiting
        discardedPuts += lines.reduce(0) { $0 + $1.puts }
        lines = Array(repeating: PendingOutput(), count: lines.count)
        for connection in roomAtOnce.indices { roomAtOnce[connection] = 0 }
        return count
    }
}
