import CMosquitto
import Foundation
import LiveTopics

/// Publications handed over by other threads, in order, for the network thread to give to
/// libmosquitto (see ``ClientCore/handOver(_:then:payload:qos:retain:waiter:origin:)``).
///
/// Why the network thread makes the `mosquitto_publish` calls: libmosquitto's publication
/// path allocates the message, its topic, its payload and its packet, takes four of its
/// mutexes and walks the connection's list of messages in flight; the network thread
/// writes that packet, reads the acknowledgement, frees all of it and walks the list
/// again. Made on two threads, every one of those mutexes, list nodes and allocations
/// crossed between two processors for each publication. Made on one, they stay in its
/// cache and its heap, and what crosses is this buffer, written in order and read once.
///
/// A record is its header (the topic's length with its NUL, the payload's length, the QoS,
/// the retain flag), the topic NUL-terminated and the payload; its waiter and origin are
/// kept beside it, in order.
struct Outbox {
    private(set) var bytes: [UInt8] = []
    private(set) var waiters: [ClientCore.PublishAwaiter?] = []
    private(set) var origins: [MonotonicInstant?] = []

    var count: Int { origins.count }
    var isEmpty: Bool { origins.isEmpty }

    static let headerSize = MemoryLayout<Header>.size

    /// A record's header as it is written (10 bytes: no padding within its size).
    private struct Header {
        var topicLength: UInt32
        var payloadLength: UInt32
        var qos: UInt8
        var retain: UInt8
    }

    /// Adds one: the topic is `topic` followed by `rest`.
    mutating func append(
        _ topic: String, then rest: String, payload: UnsafeRawBufferPointer, qos: MQTTQoS, retain: Bool,
        waiter: ClientCore.PublishAwaiter?, origin: MonotonicInstant?
    ) {
        var topic = topic
        var rest = rest
        topic.withUTF8 { first in
            rest.withUTF8 { second in
                // Appended piece by piece: the array grows geometrically and nothing is written twice.
                let header = Header(
                    topicLength: UInt32(first.count + second.count + 1), payloadLength: UInt32(payload.count),
                    qos: UInt8(qos.rawValue), retain: retain ? 1 : 0)
                withUnsafeBytes(of: header) { bytes.append(contentsOf: $0) }
                bytes.append(contentsOf: first)
                bytes.append(contentsOf: second)
                bytes.append(0)
                bytes.append(contentsOf: payload)
            }
        }
        waiters.append(waiter)
        origins.append(origin)
    }

    /// One record, as the network thread reads it.
    struct Record {
        var topic: UnsafePointer<CChar>
        var topicLength: Int
        var payload: UnsafeRawPointer
        var payloadLength: Int
        var qos: Int32
        var retain: Bool
        /// Its header and bytes together.
        var size: Int { Outbox.headerSize + topicLength + 1 + payloadLength }
    }

    /// The record at `start` (records follow one another unaligned).
    static func record(at start: UnsafeRawPointer) -> Record {
        let topicLength = Int(start.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        return Record(
            topic: (start + headerSize).assumingMemoryBound(to: CChar.self), topicLength: topicLength - 1,
            payload: start + headerSize + topicLength, payloadLength: Int(start.loadUnaligned(fromByteOffset: 4, as: UInt32.self)),
            qos: Int32(start.load(fromByteOffset: 8, as: UInt8.self)), retain: start.load(fromByteOffset: 9, as: UInt8.self) != 0)
    }

    /// Moves `other`'s records after these; `other` is left empty, its room kept.
    mutating func take(from other: inout Outbox) {
        if isEmpty {
            swap(&self, &other)
            return
        }
        bytes.append(contentsOf: other.bytes)
        waiters.append(contentsOf: other.waiters)
        origins.append(contentsOf: other.origins)
        other.removeAll()
    }

    /// Drops the first `count` records, which took the first `size` bytes.
    mutating func removeFirst(_ count: Int, size: Int) {
        if count == self.count {
            removeAll()
            return
        }
        bytes.removeFirst(size)
        waiters.removeFirst(count)
        origins.removeFirst(count)
    }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: bytes.capacity <= Self.keptCapacity)
        waiters.removeAll(keepingCapacity: true)
        origins.removeAll(keepingCapacity: true)
    }

    /// The waiters of every record, which are then dropped.
    mutating func takeWaiters() -> [ClientCore.PublishAwaiter] {
        defer { removeAll() }
        return waiters.compactMap { $0 }
    }

    /// A buffer that grew past this (a burst while disconnected) is not kept once empty.
    static let keptCapacity = 4 << 20

    /// The topics of the publications handed to libmosquitto lately, one after the other
    /// in a ring, for the rare acknowledgement that refuses one: a place in it costs a
    /// copy of the topic's bytes, where a string of each would cost an allocation (a few
    /// percent of the output thread's samples). The window keeps far fewer in flight than
    /// the ring holds; a topic overwritten since is reported as such.
    struct KeptTopics {
        struct Place {
            /// Bytes written to the ring before this topic's.
            var start: UInt64
            var count: UInt32
        }

        private var ring = [UInt8](repeating: 0, count: KeptTopics.capacity)
        private var written: UInt64 = 0
        static let capacity = 1 << 16

        mutating func keep(_ topic: UnsafePointer<CChar>, count: Int) -> Place {
            let place = Place(start: written, count: UInt32(clamping: min(count, Self.capacity)))
            var source = UnsafeRawPointer(topic)
            var left = Int(place.count)
            ring.withUnsafeMutableBytes { ring in
                while left > 0 {
                    let at = Int(written % UInt64(Self.capacity))
                    let piece = min(left, Self.capacity - at)
                    (ring.baseAddress! + at).copyMemory(from: source, byteCount: piece)
                    source += piece
                    left -= piece
                    written += UInt64(piece)
                }
            }
            return place
        }

        /// The topic kept at `place`, or a note that it is no longer kept.
        func text(_ place: Place) -> String {
            guard written - place.start <= UInt64(Self.capacity) else { return "(a topic no longer kept)" }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(Int(place.count))
            for offset in 0..<UInt64(place.count) { bytes.append(ring[Int((place.start + offset) % UInt64(Self.capacity))]) }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}

extension ClientCore {
    /// What the network thread took from ``outbox`` and has not published yet, and the room
    /// it reuses: touched on the network thread alone.
    struct OutboxDrain {
        var taken = Outbox()
        var spare = Outbox()
        /// The records of a pass that libmosquitto took: their message id, index and offset.
        var published: [(mid: Int32, index: Int, offset: Int)] = []
        /// The topics of what was handed to libmosquitto, for its acknowledgements.
        var topics = Outbox.KeptTopics()
        /// When the current or last read pass began: the time of the acknowledgements it reads.
        var readAt = MonotonicInstant.now

        /// Moves what was just taken from the outbox (left in `spare`) after the rest.
        mutating func takeArrived() { taken.take(from: &spare) }
    }

    /// Hands a publication to the network thread, which gives it to libmosquitto in its
    /// next pass, after every one handed over before it on this connection. A publication
    /// without a waiter is refused with ``MQTTError/disconnected`` while not connected (the
    /// caller keeps it); one with a waiter waits for the connection.
    func handOver(
        _ topic: String, then rest: String, payload: UnsafeRawBufferPointer, qos: MQTTQoS, retain: Bool, waiter: PublishAwaiter?,
        origin: MonotonicInstant?
    ) throws(MQTTError) {
        if waiter == nil && !gateOpen.load(ordering: .relaxed) { throw .disconnected }
        // Counted before the hand-over: the window counts what the outbox holds.
        if qos != .atMostOnce {
            inFlight.add(1, ordering: .relaxed)
            sentCount.add(1, ordering: .relaxed)
        }
        if let waiter {
            // Under the state's lock: a client that ends empties the outbox after it marks
            // itself finished, so a waiter is either failed here or found there.
            let finished = state.withLock { state -> Bool in
                if state.finished { return true }
                outbox.withLock { outbox in
                    outbox.append(topic, then: rest, payload: payload, qos: qos, retain: retain, waiter: waiter, origin: origin)
                    outboxCount.add(1, ordering: .sequentiallyConsistent)
                }
                return false
            }
            if finished {
                if qos != .atMostOnce {
                    inFlight.subtract(1, ordering: .relaxed)
                    sentCount.subtract(1, ordering: .relaxed)
                }
                waiter.resume(throwing: MQTTError.disconnected)
                return
            }
        } else {
            outbox.withLock { outbox in
                outbox.append(topic, then: rest, payload: payload, qos: qos, retain: retain, waiter: nil, origin: origin)
                outboxCount.add(1, ordering: .sequentiallyConsistent)
            }
        }
        // The count moves with the records, under the outbox's lock (never below what it
        // holds), and sequentially consistent like the loop's arming: a loop that armed
        // before the count moved sees it, or this sees the loop armed and wakes it.
        signals.wakeNetworkLoop()
    }

    /// Publications wait in the outbox, and the connection can take them (while the gate
    /// is closed they wait, and the loop does not spin on them).
    var outboxWaits: Bool {
        gateOpen.load(ordering: .relaxed)
            && (outboxCount.load(ordering: .sequentiallyConsistent) > 0 || !outboxDrain.taken.isEmpty)
    }

    /// On the network thread, before a pass's writes: gives libmosquitto what the outbox
    /// holds, in order, while connected (the rest waits for the next connection's passes),
    /// and registers each for its acknowledgement. One the library refuses (too large for
    /// the broker's maximum packet size, an invalid topic) fails its waiter, or, without
    /// one, is counted in ``libraryRefusals``: the same bytes would be refused again.
    func publishOutbox() {
        guard outboxWaits else { return }
        outbox.withLock { outbox in
            swap(&outbox, &outboxDrain.spare)
            outboxCount.subtract(outboxDrain.spare.count, ordering: .relaxed)
        }
        outboxDrain.takeArrived()
        let total = outboxDrain.taken.count
        var done = 0
        var size = 0
        // Taken out, so that its storage is this one's alone and keeps its room.
        var published: [(mid: Int32, index: Int, offset: Int)] = []
        swap(&published, &outboxDrain.published)
        published.removeAll(keepingCapacity: true)
        var refusals: [(index: Int, error: MQTTError, topic: String)] = []
        outboxDrain.taken.bytes.withUnsafeBytes { raw in
            while done < total {
                let record = Outbox.record(at: raw.baseAddress! + size)
                var mid: Int32 = 0
                let code = mosquitto_publish_v5(
                    mosq, &mid, record.topic, Int32(record.payloadLength), record.payload, record.qos, record.retain, nil)
                // Without a connection, libmosquitto keeps a QoS 1 or 2 message (and sends it
                // after reconnecting): it is handed over. A QoS 0 one it drops: it waits here.
                if code == MOSQ_ERR_NO_CONN.raw && record.qos == 0 { break }
                if code == MOSQ_ERR_SUCCESS.raw || code == MOSQ_ERR_NO_CONN.raw {
                    published.append((mid, done, size))
                } else {
                    if record.qos != 0 {
                        inFlight.subtract(1, ordering: .relaxed)
                        sentCount.subtract(1, ordering: .relaxed)
                    }
                    let error = MQTTError.library(function: "mosquitto_publish_v5", code: code, reason: describeResult(code, errno: errno))
                    refusals.append((done, error, String(cString: record.topic)))
                }
                size += record.size
                done += 1
            }
        }
        if !published.isEmpty { register(published) }
        for refusal in refusals {
            if let waiter = outboxDrain.taken.waiters[refusal.index] {
                waiter.resume(throwing: refusal.error)
            } else {
                libraryRefusals.withLock { $0 = ($0.count + 1, "\(refusal.topic): \(refusal.error)") }
            }
        }
        outboxDrain.published = published
        outboxDrain.taken.removeFirst(done, size: size)
    }

    /// Registers a pass's publications for their acknowledgements, under one lock (an
    /// acknowledgement that came first completes its waiter now).
    private func register(_ published: [(mid: Int32, index: Int, offset: Int)]) {
        var early: [(PublishWaiter, Int32)] = []
        // Read from a copy of the records (a reference to the same storage): the ring of
        // topics is written meanwhile, and both are parts of the network thread's one property.
        let taken = outboxDrain.taken
        taken.bytes.withUnsafeBytes { raw in
            state.withLock { state in
                for (mid, index, offset) in published {
                    let record = Outbox.record(at: raw.baseAddress! + offset)
                    let waiter = PublishWaiter(
                        topic: outboxDrain.topics.keep(record.topic, count: record.topicLength), continuation: taken.waiters[index],
                        origin: taken.origins[index], inFlight: record.qos != 0)
                    if let reason = state.publishes.sent(mid: mid, waiter: waiter) { early.append((waiter, reason)) }
                }
            }
        }
        for (waiter, reason) in early { complete(waiter, reason: reason) }
    }

    /// The waiters of every publication still in the outbox, which is emptied (the client
    /// ends).
    func emptyOutbox() -> [PublishAwaiter] {
        var waiters = outbox.withLock { $0.takeWaiters() }
        outboxCount.store(0, ordering: .relaxed)
        waiters += outboxDrain.taken.takeWaiters()
        return waiters
    }
}
