import Foundation
import LiveState
import LiveTopics
import NIOCore
import Synchronization

/// The floor view's live feed (`GET /v1/events`): Server-Sent Events per viewer.
///
/// The pipeline hands every derived change, removal and summary to ``publish(_:place:json:)``
/// as it publishes it; the hub frames it once (`id:`, `event:`, `data:`), keeps the last
/// ``history`` frames for viewers that reconnect, and gives the frame to every viewer whose
/// scope holds the place. A viewer's buffer is bounded: one that falls behind is dropped (its
/// stream ends after what it has; EventSource reconnects with Last-Event-ID and is resumed
/// from the history, or given a fresh snapshot). The pipeline never waits for a viewer.
///
/// An event id is `{epoch}-{n}`: the epoch (the hub's start, in milliseconds) makes an id
/// from before a restart ask for a snapshot rather than resume in another numbering.
public final class EventHub: Sendable {
    /// What a viewer follows: the components given, from the dataset down.
    public struct Scope: Sendable, Equatable {
        public var dataset: String?
        public var venue: String?
        public var building: String?
        public var floor: String?

        public init(dataset: String? = nil, venue: String? = nil, building: String? = nil, floor: String? = nil) {
            self.dataset = dataset
            self.venue = venue
            self.building = building
            self.floor = floor
        }

        /// Whether a place (a location's, or a summary's: its floor `nil` for a building)
        /// is in this scope.
        func holds(_ place: Place) -> Bool {
            (dataset == nil || dataset == place.dataset) && (venue == nil || venue == place.venue)
                && (building == nil || building == place.building) && (floor == nil || place.floor == nil || floor == place.floor)
        }
    }

    /// Where an event happens.
    public struct Place: Sendable {
        public var dataset: String
        public var venue: String
        public var building: String
        public var floor: String?

        public init(dataset: String, venue: String, building: String, floor: String?) {
            self.dataset = dataset
            self.venue = venue
            self.building = building
            self.floor = floor
        }
    }

    /// A viewer's stream of frames, and whether it started with a snapshot or resumed.
    public struct Subscription: Sendable {
        public let frames: AsyncStream<ByteBuffer>
        public let resumed: Bool
        let id: Int
    }

    public struct Statistics: Sendable {
        public var viewers = 0
        /// Viewers dropped for falling behind.
        public var dropped = 0
        /// Viewers resumed from the history, and given a snapshot.
        public var resumed = 0
        public var snapshots = 0
    }

    private final class Viewer: Sendable {
        let scope: Scope
        let continuation: AsyncStream<ByteBuffer>.Continuation

        init(scope: Scope, continuation: AsyncStream<ByteBuffer>.Continuation) {
            self.scope = scope
            self.continuation = continuation
        }
    }

    private struct Frame {
        var number: UInt64
        var place: Place
        var bytes: ByteBuffer
    }

    private struct State {
        var next: UInt64 = 1
        /// Frames `[first, next)` from `historyStart` on, oldest first: the history a viewer
        /// can resume from.
        var history: [Frame] = []
        var historyStart = 0
        var viewers: [Int: Viewer] = [:]
        var nextViewer = 0
        /// No viewer watched since this number: frames were not kept.
        var unwatched = true
        var statistics = Statistics()

        /// The number of the oldest frame kept (`next` when none is).
        var first: UInt64 { historyStart < history.count ? history[historyStart].number : next }
    }

    /// Frames kept for viewers that reconnect.
    public let history: Int
    /// Frames a viewer may have waiting before it is dropped.
    public let viewerBuffer: Int
    private let epoch: Int64
    private let state = Mutex(State())
    private let viewerCount = Atomic<Int>(0)

    public init(history: Int = 4096, viewerBuffer: Int = 1024, epoch: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) {
        self.history = max(history, 1)
        self.viewerBuffer = max(viewerBuffer, 2)
        self.epoch = epoch
    }

    /// Whether anyone watches: when nobody does, publishing costs one atomic load.
    public var hasViewers: Bool { viewerCount.load(ordering: .relaxed) > 0 }

    public var statistics: Statistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.viewers = state.viewers.count
            return statistics
        }
    }

    /// Hands an event to the viewers whose scope holds `place`, and keeps it for those that
    /// reconnect. `kind` is the SSE event name (`change`, `remove`, `summary`).
    public func publish(_ kind: StaticString, place: Place, json: [UInt8]) {
        guard hasViewers else { return }
        let dropped = state.withLock { state -> [Viewer] in
            let number = state.next
            state.next += 1
            var bytes = ByteBuffer()
            bytes.reserveCapacity(json.count + 64)
            bytes.writeString("id: \(epoch)-\(number)\nevent: ")
            bytes.writeStaticString(kind)
            bytes.writeStaticString("\ndata: ")
            bytes.writeBytes(json)
            bytes.writeStaticString("\n\n")
            keep(Frame(number: number, place: place, bytes: bytes), in: &state)
            var dropped: [Viewer] = []
            for (id, viewer) in state.viewers where viewer.scope.holds(place) {
                if case .dropped = viewer.continuation.yield(bytes) { dropped.append(drop(id, in: &state)) }
            }
            return dropped
        }
        // Outside the lock: ending a stream runs its termination handler, which takes it.
        for viewer in dropped { viewer.continuation.finish() }
    }

    /// Sends a comment to every viewer, so that proxies keep idle streams open (and a
    /// viewer that went away is noticed).
    public func heartbeat() {
        guard hasViewers else { return }
        let dropped = state.withLock { state -> [Viewer] in
            let bytes = ByteBuffer(staticString: ": heartbeat\n\n")
            var dropped: [Viewer] = []
            for (id, viewer) in state.viewers {
                if case .dropped = viewer.continuation.yield(bytes) { dropped.append(drop(id, in: &state)) }
            }
            return dropped
        }
        for viewer in dropped { viewer.continuation.finish() }
    }

    /// Opens a viewer's stream: the frames after `lastEventID` when the history still has
    /// them all, else `snapshot()` (called under the hub's lock, so that no event falls
    /// between it and the stream: the caller makes sure no event is published meanwhile,
    /// as the pipeline's actor does).
    public func subscribe(_ scope: Scope, lastEventID: String?, snapshot: () -> [UInt8]) -> Subscription {
        let (frames, continuation) = AsyncStream<ByteBuffer>.makeStream(bufferingPolicy: .bufferingOldest(viewerBuffer))
        return state.withLock { state in
            if state.unwatched {
                // Frames were not kept while nobody watched: no id from before resumes.
                state.history.removeAll()
                state.historyStart = 0
                state.next += 1
                state.unwatched = false
            }
            let resumed: Bool
            if let after = resumePoint(lastEventID, state), after + 1 >= state.first {
                resumed = true
                state.statistics.resumed += 1
                for frame in state.history[state.historyStart...] where frame.number > after && scope.holds(frame.place) {
                    continuation.yield(frame.bytes)
                }
            } else {
                resumed = false
                state.statistics.snapshots += 1
                var bytes = ByteBuffer()
                bytes.writeString("id: \(epoch)-\(state.next - 1)\nevent: snapshot\ndata: ")
                bytes.writeBytes(snapshot())
                bytes.writeStaticString("\n\n")
                continuation.yield(bytes)
            }
            let id = state.nextViewer
            state.nextViewer += 1
            state.viewers[id] = Viewer(scope: scope, continuation: continuation)
            viewerCount.store(state.viewers.count, ordering: .relaxed)
            continuation.onTermination = { [weak self] _ in self?.remove(id) }
            return Subscription(frames: frames, resumed: resumed, id: id)
        }
    }

    /// Ends one viewer's stream (its connection is being shut down).
    public func end(_ subscription: Subscription) {
        let viewer = state.withLock { $0.viewers[subscription.id] }
        viewer?.continuation.finish()
    }

    /// Ends every stream (the server is shutting down).
    public func finishAll() {
        let viewers = state.withLock { state in
            defer {
                state.viewers.removeAll()
                viewerCount.store(0, ordering: .relaxed)
                state.unwatched = true
            }
            return Array(state.viewers.values)
        }
        for viewer in viewers { viewer.continuation.finish() }
    }

    private func remove(_ id: Int) {
        state.withLock { state in
            guard state.viewers.removeValue(forKey: id) != nil else { return }
            viewerCount.store(state.viewers.count, ordering: .relaxed)
            if state.viewers.isEmpty { state.unwatched = true }
        }
    }

    /// Takes a viewer that fell behind out; the caller ends its stream outside the lock.
    private func drop(_ id: Int, in state: inout State) -> Viewer {
        let viewer = state.viewers.removeValue(forKey: id)!
        state.statistics.dropped += 1
        viewerCount.store(state.viewers.count, ordering: .relaxed)
        if state.viewers.isEmpty { state.unwatched = true }
        return viewer
    }

    private func keep(_ frame: Frame, in state: inout State) {
        state.history.append(frame)
        if state.history.count - state.historyStart > history {
            state.historyStart += 1
            // Compact now and then rather than shift the array on every frame.
            if state.historyStart >= history {
                state.history.removeFirst(state.historyStart)
                state.historyStart = 0
            }
        }
    }

    /// The number after which to resume, if `lastEventID` is one of this hub's ids.
    private func resumePoint(_ lastEventID: String?, _ state: State) -> UInt64? {
        guard let lastEventID, let dash = lastEventID.firstIndex(of: "-"),
            Int64(lastEventID[..<dash]) == epoch, let number = UInt64(lastEventID[lastEventID.index(after: dash)...]),
            number < state.next
        else { return nil }
        return number
    }
}

extension EventHub.Place {
    /// A summary's place: a floor, or (its floor `nil`) a building.
    init(_ key: SummaryTracker.Key) {
        self.init(dataset: key.dataset, venue: key.venue, building: key.building, floor: key.floor)
    }
}

extension LocationAddress {
    /// Its floor, as the event hub scopes events.
    var place: EventHub.Place { EventHub.Place(dataset: dataset, venue: venue, building: building, floor: floor) }
}
