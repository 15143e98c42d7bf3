import LiveTopics
import Mosquitto

/// The messages of one network read pass, on their way to an ``IntakeQueue``: their topics
/// and payloads copied one after another into one buffer as they come, and handed over at
/// the pass's end as ``IntakeMessage``s that point into it (see ``IntakeMessage`` for why).
/// The network thread's alone.
struct ReadPass {
    private struct Entry {
        var start: Int
        var topicCount: Int
        var payloadCount: Int
        var receivedAt: LiveTimestamp
        var retain: Bool
        var journalEnd: UInt64
        var arrived: MonotonicInstant
    }

    private var bytes: [UInt8] = []
    private var entries: [Entry] = []
    /// The messages handed over, their storage kept from pass to pass.
    private var messages: [IntakeMessage] = []
    /// The most messages whose storage is kept for the next pass: a pass that read a flood
    /// (a backlog the broker sends at once after a restart) would otherwise hold its
    /// storage, tens of megabytes, for as long as the daemon runs.
    private let keptCapacity: Int
    /// The most bytes a pass's buffer starts with.
    static let keptBytes = 1 << 20

    init(keptCapacity: Int) {
        self.keptCapacity = keptCapacity
    }

    var isEmpty: Bool { entries.isEmpty }

    /// The clocks' last reading, which the pass's messages since share.
    private var reading = (arrived: MonotonicInstant.now, receivedAt: LiveTimestamp.now)
    /// A pass reads the clocks for its first message and again every this many: what it
    /// reads came in within a few milliseconds and is read in less, and two clock reads a
    /// message are a cost worth saving (docs/performance.md).
    static let messagesPerReading = 32

    /// When the next message arrived: its arrival on the monotonic clock (for the metrics of
    /// time spent) and its receipt on the wall clock (the time it is kept with).
    mutating func arrival() -> (arrived: MonotonicInstant, receivedAt: LiveTimestamp) {
        if entries.count % Self.messagesPerReading == 0 { reading = (.now, .now) }
        return reading
    }

    /// Copies a message (still in libmosquitto's memory) into the pass.
    mutating func add(
        _ message: MQTTIncomingMessage, receivedAt: LiveTimestamp = .now, journalEnd: UInt64 = 0, arrived: MonotonicInstant = .now
    ) {
        let start = bytes.count
        bytes.append(contentsOf: message.topic)
        bytes.append(contentsOf: message.payload)
        entries.append(
            Entry(
                start: start, topicCount: message.topic.count, payloadCount: message.payload.count, receivedAt: receivedAt,
                retain: message.retain, journalEnd: journalEnd, arrived: arrived))
    }

    /// Forgets the pass (its messages are not handed over).
    mutating func discard() {
        entries.removeAll(keepingCapacity: entries.capacity <= keptCapacity)
        bytes.removeAll()
    }

    /// Hands the pass's messages to `queue` (waiting while it is full) and starts the next
    /// pass. - Returns: `false` when the queue is closed (they were not taken).
    mutating func hand(to queue: IntakeQueue) -> Bool {
        // The pass's bytes go with its messages; the next pass starts a buffer of about this
        // one's size (within bounds: a flood's is not kept).
        let size = bytes.count
        let shared = IntakeBytes(bytes)
        bytes = []
        bytes.reserveCapacity(min(size, Self.keptBytes))
        for entry in entries {
            messages.append(
                IntakeMessage(
                    shared, start: entry.start, topicCount: entry.topicCount, payloadCount: entry.payloadCount,
                    receivedAt: entry.receivedAt, retain: entry.retain, journalEnd: entry.journalEnd, arrived: entry.arrived))
        }
        entries.removeAll(keepingCapacity: entries.capacity <= keptCapacity)
        let taken = queue.push(moving: &messages)
        if messages.capacity > keptCapacity { messages = [] }
        messages.removeAll(keepingCapacity: true)
        return taken
    }
}
