import Logging
import Mosquitto
import Synchronization

/// Reads back what the broker holds retained under the daemon's prefix (styles, summaries,
/// legends), over connections of its own (clean sessions, so nothing of them lingers), in
/// batches through a bounded ``IntakeQueue``.
///
/// Nothing of it waits on the daemon's own connection, whose network thread a backlog of
/// updates can hold up: the reader subscribes to every filter at once while its caller
/// already takes what arrives (retained messages start to flow before the last SUBACK),
/// and once every filter is granted, it publishes its end marker itself, to a topic only it
/// subscribes to. The broker queues a subscription's retained messages for a client while
/// it handles the SUBSCRIBE, before its SUBACK, and delivers a client's messages in order:
/// so the marker arrives after the last retained message.
///
/// The marker goes on a second connection (`{clientId}-converge-2`), which sends nothing
/// else. What the reading connection sends after its SUBSCRIBEs waits behind its
/// acknowledgements of the retained messages, and a broker reads them slowly: mosquitto
/// reads one packet of a connection per pass of its loop, and lets a whole window of queued
/// messages out for each acknowledgement it reads, so a large read's retained messages all
/// arrive long before their PUBACKs are read, and a marker behind them could come past the
/// quiet timeout. The second connection's marker is read at once, and takes its place in
/// the reading session's queue behind the retained messages.
///
/// Once its filters are granted, the read needs them no more (the broker queues a filter's
/// retained messages as it handles the SUBSCRIBE, and what is queued stays queued after an
/// UNSUBSCRIBE), and keeping them would bring it every live publication under the prefix
/// as well: the daemon's own, many when a convergence publishes again what a crash left
/// behind. Those that follow the marker do not hold the read up, but a broker counts them
/// against the session's queue, and one may close a session whose queue is long
/// (ejabberd's `max_queue`). So the reader unsubscribes
/// from all but the marker's filter as it publishes the marker, without waiting for it: an
/// UNSUBSCRIBE waits at mosquitto behind the read's acknowledgements like anything else the
/// reading connection sends, and takes effect only near the read's end there.
///
/// Every wait is bounded: when nothing arrives for `quietTimeout` (a broker that stopped
/// sending, a connection that hangs) the read fails with ``Failure/stalled``, and so does
/// a connection or subscription that fails; a read that fails is never taken as complete.
///
/// A broker drops what comes for a client whose queue is full (mosquitto's
/// `max_queued_messages`), the end marker too: a read of about as many retained messages
/// as that limit, with the daemon's own live publications matching its filters, can find
/// its queue full when the marker comes. Its retained messages all arrive, and then
/// nothing: so while nothing arrives, the marker goes again every ``markerAgainAfter`` (a
/// marker can only come after the messages the subscriptions queued), instead of the whole
/// read failing at `quietTimeout` and starting over. Were retained messages dropped too,
/// the caller's check of a sample of the styles it did not see finds the read short.
final class RetainedReader: Sendable {
    enum Failure: Error, CustomStringConvertible {
        /// Connecting or subscribing failed.
        case cannotRead(String)
        /// Nothing arrived for this long before the end marker, which went again `markersAgain` times.
        case stalled(Duration, received: Int, markersAgain: Int = 0)

        var description: String {
            switch self {
            case .cannotRead(let reason): reason
            case .stalled(let quiet, let received, let markersAgain) where markersAgain > 0:
                "nothing arrived for \(quiet) after \(received) retained messages, before the end of the read, though its end marker went \(markersAgain + 1) times: the broker delivers nothing more to the read's session (\(RetainedReader.fullQueueCause))"
            case .stalled(let quiet, let received, _):
                "nothing arrived for \(quiet) after \(received) retained messages, before the end of the read"
            }
        }
    }

    let client: MQTTClient
    let queue: IntakeQueue
    let marker: String
    let filters: [String]
    private let failure = Mutex<Failure?>(nil)
    private let received = Atomic<Int>(0)
    private let markerSent = Atomic<Bool>(false)
    /// The end marker came: the read is complete.
    private let reachedEnd = Atomic<Bool>(false)
    private let markersAgain = Atomic<Int>(0)

    /// The connection that publishes the end marker.
    static let markerConnection = 1
    /// What the end marker carries.
    static let markerPayload = Array("end".utf8)
    /// How long nothing arrives before the end marker goes again.
    static let markerAgainAfter: Duration = .seconds(2)
    /// Why a broker may not deliver an end marker, for the messages that say it did not.
    static let fullQueueCause =
        "one cause is a full queue: with mosquitto, max_queued_messages must be well above the retained messages under the prefix, which a read counts against it"
    /// Tests: the first end marker is not published, as if the broker had dropped it.
    let losesFirstMarker: Bool

    /// - Parameter filters: what to read; the end marker's topic is added.
    init(
        configuration: MQTTConfiguration, prefix: String, filters: [String], logger: Logger, losesFirstMarker: Bool = false
    ) throws(MQTTError) {
        self.losesFirstMarker = losesFirstMarker
        var configuration = configuration
        let id = (configuration.clientID ?? "livedata") + "-converge"
        configuration.clientID = id
        configuration.cleanStart = true
        // The first reads; the second (`{id}-2`) publishes the end marker (see above).
        configuration.connections = 2
        configuration.will = nil
        configuration.maximumPacketSize = nil
        let marker = "\(prefix)/converge/\(id)"
        let queue = IntakeQueue(capacity: 10_000, byteCapacity: 32 << 20)
        self.queue = queue
        self.marker = marker
        self.filters = filters + [marker]
        // A read pass's messages in one buffer, handed over at its end (see ``ReadPass``).
        let pass = Mutex(ReadPass(keptCapacity: 10_000))
        client = try MQTTClient(
            configuration: configuration, logger: logger,
            onMessage: { message in
                pass.withLock { $0.add(message) }
                return .taken
            },
            onReadEnd: {
                // The queue closes when the read ends (what comes after its marker is no part of
                // it) or fails: either way nothing more is wanted, and ``end()`` stops the client.
                pass.withLock { if !$0.isEmpty { _ = $0.hand(to: queue) } }
                return .taken
            })
    }

    /// Messages read so far, the end marker included.
    var count: Int { received.load(ordering: .relaxed) }

    /// Times the end marker went again (see ``markerAgainAfter``).
    var markersSentAgain: Int { markersAgain.load(ordering: .relaxed) }

    /// Reads to the end marker, handing `body` each batch of retained messages (and the
    /// few live ones that came between a subscription and the marker), while the start
    /// (connect, subscribe, marker) and a watch of the connection run beside it as child
    /// tasks (the queue is bounded). A read that did not end is never taken as complete.
    /// - Throws: `CancellationError` when the caller's task was cancelled; ``Failure`` when
    ///   the read failed or stalled.
    ///
    /// `body` runs on `isolation` (the caller's actor), one batch at a time.
    func read(
        isolation: isolated (any Actor)? = #isolation, quietTimeout: Duration = .seconds(10),
        _ body: nonisolated(nonsending) ([IntakeMessage]) async -> Void
    ) async throws {
        enum Child { case started, watched }
        let events = client.events
        try await withThrowingTaskGroup(of: Child.self) { group in
            // Captured, so that this body (and `body`) runs on the caller's actor.
            _ = isolation
            group.addTask {
                await self.start()
                return .started
            }
            group.addTask {
                await self.watchConnection(events)
                return .watched
            }
            while let batch = await next(quietTimeout: quietTimeout), !Task.isCancelled { await body(batch) }
            // A failed read stops its client first: the start may be waiting for a SUBACK
            // that a broker which keeps closing the connection never sends. So does one that
            // ended: a marker sent again may have ended it while the start still waits for
            // the first one's acknowledgement, which a broker dropping what comes for the
            // session never sends (what the start then fails with comes after the end).
            if failed != nil || reachedEnd.load(ordering: .acquiring) { await stop() }
            while let child = try await group.next(), child != .started {}
            await stop()
            group.cancelAll()
        }
        try Task.checkCancellation()
        if let failed { throw failed }
    }

    /// Connects, subscribes to every filter at once, then publishes the end marker on the
    /// second connection as it unsubscribes from all but the marker's filter on the first;
    /// a failure ends the read (``next(quietTimeout:)`` returns `nil` and ``failed`` says
    /// why).
    private func start() async {
        do {
            try await client.connect()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for filter in filters {
                    group.addTask { _ = try await self.client.subscribe(filter, qos: .atLeastOnce) }
                }
                try await group.waitForAll()
            }
            // From now on the marker may go again: its acknowledgement can come late, or not
            // at all from a broker that stalls.
            markerSent.store(true, ordering: .releasing)
            try await withThrowingTaskGroup(of: Void.self) { group in
                if !losesFirstMarker {
                    group.addTask {
                        try await self.client.publish(
                            self.marker, payload: Self.markerPayload, qos: .atLeastOnce, connection: Self.markerConnection)
                    }
                }
                for filter in filters where filter != marker {
                    group.addTask { try await self.client.unsubscribe(filter) }
                }
                try await group.waitForAll()
            }
        } catch {
            // What a start still waiting when the read ended fails with is ignored (see ``fail(_:)``).
            fail(.cannotRead("\(error)"))
        }
    }

    /// A broker that closes the read's connection (ejabberd does, when more retained
    /// messages wait for a client than its `max_queue`) fails the read: the client would
    /// connect again and read it all again, and again, and never finish.
    private func watchConnection(_ events: AsyncStream<MQTTEvent>) async {
        // The stream holds every event since the client was made: the first connection's too.
        var connected = false
        for await event in events {
            if case .state(.connected) = event { connected = true }
            if case .state(.connecting) = event, connected {
                fail(.cannotRead("the broker closed the read's connection after \(count) retained messages (a broker limit on a client's queue, such as ejabberd's max_queue?)"))
                return
            }
            if case .state(.closed) = event { return }
        }
    }

    /// Why the read failed, if it did.
    var failed: Failure? { failure.withLock { $0 } }

    private func fail(_ reason: Failure) {
        // A read that ended is complete, whatever happens to its connections afterwards.
        guard !reachedEnd.load(ordering: .acquiring) else { return }
        failure.withLock { $0 = $0 ?? reason }
        queue.close()
    }

    /// The next batch of retained messages; `nil` after the end marker, when the read
    /// failed (see ``failed``), or when the caller's task is cancelled.
    private func next(quietTimeout: Duration) async -> [IntakeMessage]? {
        let next = await withTaskGroup(of: Void.self) { group -> [IntakeMessage]? in
            group.addTask { await self.watchQuiet(quietTimeout) }
            defer { group.cancelAll() }
            return await withTaskCancellationHandler(operation: { await queue.next() }, onCancel: { queue.close() })
        }
        guard var batch = next else { return nil }
        received.add(batch.count, ordering: .relaxed)
        if let end = batch.firstIndex(where: { !$0.retain && $0.withTopic { $0.elementsEqual(marker.utf8) } }) {
            batch.removeSubrange(end...)
            reachedEnd.store(true, ordering: .releasing)
            queue.close()
            // What is still queued came after the marker: not retained messages of this read.
            while await queue.next() != nil {}
        }
        return batch
    }

    /// While nothing arrives: the end marker again every ``markerAgainAfter``, and the read
    /// failed after `quietTimeout`. Ends when cancelled (a batch came).
    private func watchQuiet(_ quietTimeout: Duration) async {
        var waited = Duration.zero
        while waited < quietTimeout {
            let step = min(Self.markerAgainAfter, quietTimeout - waited)
            do { try await Task.sleep(for: step) } catch { return }
            waited += step
            if waited < quietTimeout { sendMarkerAgain() }
        }
        fail(.stalled(quietTimeout, received: count, markersAgain: markersSentAgain))
    }

    /// The end marker again, once the first has gone (without waiting for its acknowledgement:
    /// a stalled broker must not hold up the quiet timeout).
    private func sendMarkerAgain() {
        guard markerSent.load(ordering: .acquiring) else { return }
        if (try? client.send(marker, payload: Self.markerPayload, qos: .atLeastOnce, connection: Self.markerConnection)) != nil {
            markersAgain.add(1, ordering: .relaxed)
        }
    }

    private func stop() async {
        queue.close()
        await client.disconnect()
    }
}
