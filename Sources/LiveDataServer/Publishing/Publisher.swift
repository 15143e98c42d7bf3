import LiveState
import LiveTopics
import Mosquitto

/// Hands publications to the MQTT client, from the pipeline's one place, no faster than the
/// broker takes them.
///
/// Everything to publish waits in a ``PendingOutput`` (latest wins per topic) and leaves
/// while the broker's in-flight window has room (``MQTTSession/sendWindow`` less what
/// awaits acknowledgement): libmosquitto is never handed more than its window holds, so its
/// own queue (unbounded, and walked on every acknowledgement) stays empty, and what waits
/// here is one entry per location however fast styles change. A derived change's JSON is
/// built as it leaves. While nothing waits and the window had room at the last look, a
/// derived change goes to the client at once, not through the line (a table insertion and
/// removal per change, keyed by its address's text, for nothing).
///
/// Also counts what went out, and remembers whose legend is published. One publication the
/// library refuses (too large for the broker's Maximum Packet Size, an invalid topic) is
/// tried ``maximumAttempts`` times in all, then dropped and counted: it would be refused
/// for ever.
struct Publisher {
    /// The connection publications go out on: the daemon's output connection, or, for the
    /// active replica of a failover partition, the connection that holds its lease (what
    /// it had in flight then dies with the lease, never sent on a later connection).
    var client: MQTTClient
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
    /// The datasets whose legend was published (or found retained as it is) since the last
    /// (re)connection or reload; `nil` from a (re)connection until the convergence has read
    /// the retained legends (see ``holdLegends()``): none goes out meanwhile.
    private var legends: Set<String>?
    private(set) var pending = PendingOutput()
    /// Everything ever put in line or sent at once.
    var puts: Int { pending.puts + sentAtOnce + discardedPuts }
    /// ``PendingOutput/puts`` of lines discarded by ``discardWaiting()``.
    private var discardedPuts = 0
    /// Derived changes handed to the client as they came, past the line.
    private var sentAtOnce = 0
    /// How many more may go at once: the window's room at the end of the last ``drain()``,
    /// less what went since (acknowledgements only make more room meanwhile).
    private var roomAtOnce = 0
    /// The topics handed to the client since the last sync marker the broker acknowledged
    /// (see ``LivePipeline``'s markers): what a broker that resumed the session may still
    /// lack, if it lost what it acknowledged last. `recent[0]` is the publication numbered
    /// `recentBase` (publications handed over are numbered from 0).
    private(set) var recent: [String] = []
    private var recentBase = 0
    /// Publications handed to the client so far (the next one's number).
    private(set) var handedOver = 0
    /// `recent` was full (``recentLimit``) when this one was handed over: it and what came
    /// after are missing from it, until a marker sent after them is acknowledged.
    private var overflowedAt: Int?
    static let recentLimit = 1_000_000

    /// The retained topics cleared lately (an empty retained payload), oldest first, at most
    /// ``clearsLimit``: a bridge that lost some while its link was down gets them again
    /// (see `LivePipeline+Handover.swift`).
    private(set) var clears: [String] = []
    static let clearsLimit = 100_000

    private mutating func rememberClear(_ topic: String) {
        if clears.count >= 2 * Self.clearsLimit { clears.removeFirst(Self.clearsLimit) }
        clears.append(topic)
    }

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
    /// Publications the library refused, tried again on the pipeline's tick.
    private var refused: [(key: PendingOutput.Key, entry: PendingOutput.Entry)] = []
    /// Publications dropped after ``maximumAttempts`` refusals, and the last reason.
    private(set) var dropped = 0
    private(set) var lastDropped: String?
    static let maximumAttempts = 3
    /// At most this many publications leave in one ``drain()`` at QoS 0 (no window), so
    /// that the pipeline gets back to its updates.
    static let unwindowedBatch = 4096

    init(client: MQTTClient, qos: MQTTQoS, topics: OutputFormat) {
        self.client = client
        self.qos = qos
        self.topics = topics
    }

    /// Why ``drain()`` stopped.
    enum Drained: Equatable {
        /// Nothing waits.
        case empty
        /// The window is full: an acknowledgement makes room.
        case windowFull
        /// Not connected: what waits leaves after the next connection.
        case disconnected
        /// The QoS 0 batch bound: call again.
        case more
    }

    /// Derived changes and other publications waiting for the window.
    var waiting: Int { pending.count + refused.count }

    /// Puts a derived change in line; `since` is when the update behind it arrived.
    mutating func send(change: DerivedChange, since: ContinuousClock.Instant? = nil) {
        guard roomAtOnce > 0, pending.isEmpty else { return pending.put(change, since: since) }
        roomAtOnce -= 1
        sentAtOnce += 1
        if handOver(.style(change.address), PendingOutput.Entry(item: .change(change), since: since)) == .disconnected {
            roomAtOnce = 0
        }
    }

    /// A derived change already built (it waited for `output.minInterval`).
    mutating func send(changePublication publication: Publication) {
        pending.put(publication, under: topics.pendingKey(of: publication))
        changes += 1
    }

    mutating func send(summary: Publication) {
        pending.put(summary)
        summaries += 1
    }

    mutating func send(_ publication: Publication) {
        pending.put(publication, under: topics.pendingKey(of: publication))
    }

    mutating func send(_ item: PendingOutput.Item, since: ContinuousClock.Instant? = nil) {
        switch item {
        case .change(let change): send(change: change, since: since)
        case .publication(let publication): send(publication)
        }
    }

    /// Hands the client what waits, oldest first, while the window has room.
    mutating func drain() -> Drained {
        roomAtOnce = 0
        guard client.state == .connected else { return pending.isEmpty ? .empty : .disconnected }
        let windowed = qos != .atMostOnce
        var room = windowed ? client.session.sendWindow - client.inFlight : Self.unwindowedBatch
        guard room > 0 else { return pending.isEmpty ? .empty : .windowFull }
        return client.withBatchedSends { () -> Drained in
            while room > 0 {
                guard let (key, entry) = pending.take() else {
                    roomAtOnce = room
                    return .empty
                }
                switch handOver(key, entry) {
                case .sent: room -= 1
                case .disconnected: return .disconnected
                case .refused: break
                }
            }
            if pending.isEmpty { return .empty }
            return windowed ? .windowFull : .more
        }
    }

    private enum HandOver { case sent, disconnected, refused }

    /// Gives one publication to the client; one it cannot take for want of a connection
    /// goes back first in line, one it refuses is tried again later or dropped.
    private mutating func handOver(_ key: PendingOutput.Key, _ entry: PendingOutput.Entry) -> HandOver {
        let topic: String
        let retain: Bool
        do throws(MQTTError) {
            switch entry.item {
            case .change(let change):
                // Written into the one reused buffer and lent to the client, which copies it.
                topic = topics.style(change.address)
                retain = topics.retain
                scratch.reset()
                change.write(to: &scratch, epoch: topics.epoch)
                let sent = scratch.withUnsafeBytes { bytes in
                    Result { () throws(MQTTError) in
                        try client.send(topic, bytes: bytes, qos: qos, retain: retain, origin: entry.since)
                    }
                }
                try sent.get()
                changes += 1
            case .publication(let ready):
                topic = ready.topic
                retain = ready.retain
                try client.send(topic, payload: ready.payload, qos: qos, retain: retain, origin: entry.since)
                if retain && ready.payload.isEmpty { rememberClear(topic) }
            }
            if recent.count < Self.recentLimit && overflowedAt == nil {
                recent.append(topic)
            } else if overflowedAt == nil {
                overflowedAt = handedOver
            }
            handedOver += 1
            return .sent
        } catch .disconnected {
            pending.putBack(key, entry)
            return .disconnected
        } catch {
            var entry = entry
            entry.refusals += 1
            if entry.refusals < Self.maximumAttempts {
                refused.append((key, entry))
            } else {
                dropped += 1
                lastDropped = "\(topic): \(error)"
            }
            return .refused
        }
    }

    /// Whether `dataset`'s legend still needs publishing; marks it published. Never while
    /// the legends are held.
    mutating func needsLegend(_ dataset: String) -> Bool { legends?.insert(dataset).inserted ?? false }

    /// Every legend is to be published again (once compared with the retained ones, or after
    /// a reload).
    mutating func forgetLegends() { legends = [] }

    /// No legend goes out until ``forgetLegends()``: after a (re)connection, until the
    /// convergence has read what the broker retains, so that a legend is published only
    /// when it differs.
    mutating func holdLegends() { legends = nil }

    /// Drops everything that waits (a replica that stops publishing: the one that takes
    /// over converges from its own state); returns how many.
    mutating func discardWaiting() -> Int {
        let count = waiting
        discardedPuts += pending.puts
        pending = PendingOutput()
        refused.removeAll()
        roomAtOnce = 0
        return count
    }

    /// Puts what the library refused back in line (on the pipeline's tick): each one is
    /// tried at most ``maximumAttempts`` times in all.
    mutating func retryRefused() {
        let again = refused
        refused.removeAll()
        for (key, entry) in again {
            pending.putBack(key, entry)
        }
    }
}
