import Foundation
import Hummingbird
import HummingbirdTesting
import LiveDataTestSupport
import NIOCore
import Testing

@testable import LiveDataServer

/// `GET /v1/events` in process, served by Hummingbird on a loopback port and read by
/// ``EventStreamViewer``: the snapshot of the scope and the changes that follow, in order;
/// resuming with Last-Event-ID; the viewer that stops reading, dropped while the pipeline
/// goes on.
@Suite("Event stream over HTTP")
struct EventStreamHTTPTests {
    let routes = HTTPInterfaceTests()
    static let floor3 = "/v1/events?dataset=ds1&venue=hq&building=B&floor=F3"
    static let floor4 = "/v1/events?dataset=ds1&venue=hq&building=B&floor=F4"

    static func occupancy(_ location: String, floor: String = "F3", people: Int, at time: Int64) -> IntakeMessage {
        IntakeMessage(
            topic: "ds1/hq/B/\(floor)/R/\(location)/occupancy",
            payload: Array(#"{"timestamp": \#(time), "properties": {"nrOfPeople": "\#(people)"}}"#.utf8))
    }

    /// Serves the routes of a pipeline whose hub is `hub` on a loopback port.
    /// - Parameter sendBuffer: when given, the bytes each connection may hold on the
    ///   server's side (see ``SmallSendBuffer``).
    func serve(
        _ hub: EventHub, sendBuffer: Int? = nil, _ test: @escaping @Sendable (LivePipeline, Int) async throws -> Void
    ) async throws {
        let pipeline = try await routes.pipeline(metrics: DaemonMetrics(), events: hub)
        let handlers: @Sendable () -> [any RemovableChannelHandler] = {
            sendBuffer.map { [SmallSendBuffer(bytes: $0)] } ?? []
        }
        let app = Application(
            router: HTTPInterface.router(token: nil, queries: LiveQueries(pipeline), metrics: DaemonMetrics()),
            server: .http1(configuration: .init(additionalChannelHandlers: handlers())),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            try await test(pipeline, try #require(client.port))
        }
    }

    static func waitForViewers(_ hub: EventHub, _ count: Int) async throws {
        try await eventually(
            "\(count) viewers", timeout: .seconds(5), every: .milliseconds(10), observing: { hub.statistics.viewers }, until: { $0 == count })
    }

    @Test("a snapshot of the floor, then its changes in order with increasing ids; another floor's change is not sent")
    func snapshotAndChanges() async throws {
        let hub = EventHub()
        try await serve(hub) { pipeline, port in
            let viewer = try await EventStreamViewer.open(port: port, path: Self.floor3)
            #expect(await viewer.wait { events, _ in events.first?.name == "snapshot" })
            #expect(viewer.status == 200)
            let snapshot = viewer.events.first?.data ?? ""
            #expect(snapshot.contains(#""location": "room-7""#) && snapshot.contains(#""location": "desk-1""#))
            #expect(!snapshot.contains("room-9"), "F4 is outside the scope")
            await pipeline.handle(Self.occupancy("room-7", people: 0, at: 1_763_720_100_000))
            await pipeline.handle(Self.occupancy("room-9", floor: "F4", people: 5, at: 1_763_720_100_000))
            await pipeline.handle(Self.occupancy("desk-1", people: 0, at: 1_763_720_100_000))
            await pipeline.handle(Self.occupancy("room-7", people: 2, at: 1_763_720_200_000))
            #expect(await viewer.wait { events, _ in events.count >= 4 })
            let changes = viewer.events.dropFirst().map(\.data)
            let order = changes.compactMap { change in ["room-7", "desk-1", "room-9"].first { change.contains(#""location": "\#($0)""#) } }
            #expect(order == ["room-7", "desk-1", "room-7"], "\(changes)")
            #expect(changes.last?.contains("#D64545") == true, "occupied again: the rule's fill")
            let numbers = viewer.events.compactMap(\.number)
            #expect(numbers.count == 4 && numbers == numbers.sorted() && Set(numbers).count == 4)
            // A viewer that hangs up is let go when a write to it fails (TCP tells the
            // server at the write after the first one past the close).
            await viewer.close()
            var step = 0
            try await eventually("the viewer that hung up to be let go, after a change written to it") {
                await pipeline.handle(Self.occupancy("desk-1", people: step % 2, at: 1_763_720_300_000 + Int64(step)))
                step += 1
                return hub.statistics.viewers == 0
            }
        }
    }

    @Test("Last-Event-ID resumes with what was missed and no snapshot; an id from another run gets a snapshot")
    func resume() async throws {
        let hub = EventHub()
        try await serve(hub) { pipeline, port in
            // A viewer of another floor keeps the hub watching while the first is away.
            let other = try await EventStreamViewer.open(port: port, path: Self.floor4)
            let first = try await EventStreamViewer.open(port: port, path: Self.floor3)
            try await Self.waitForViewers(hub, 2)
            await pipeline.handle(Self.occupancy("room-7", people: 0, at: 1_763_720_100_000))
            #expect(await first.wait { events, _ in events.count == 2 })
            let last = try #require(first.events.last?.id)
            await first.close()
            await pipeline.handle(Self.occupancy("desk-1", people: 0, at: 1_763_720_200_000))
            await pipeline.handle(Self.occupancy("room-7", people: 1, at: 1_763_720_300_000))

            let back = try await EventStreamViewer.open(port: port, path: Self.floor3, lastEventID: last)
            #expect(await back.wait { events, _ in events.count >= 2 })
            // Time for a third event (a change sent from the history and again live) to show:
            // the pause proves none comes; it waits for nothing.
            try await Task.sleep(for: .milliseconds(100))
            #expect(back.events.map(\.name) == ["change", "change"], "\(back.events)")
            #expect(back.events.first?.data.contains("desk-1") == true && back.events.last?.data.contains("room-7") == true)
            let stranger = try await EventStreamViewer.open(port: port, path: Self.floor3 + "&lastEventId=1-5")
            #expect(await stranger.wait { events, _ in events.first?.name == "snapshot" })
            #expect(hub.statistics.resumed == 1 && hub.statistics.snapshots == 3)
            for viewer in [other, back, stranger] { await viewer.close() }
        }
    }

    @Test("a viewer that stops reading is dropped once its buffer is full, the pipeline and the other viewer go on, and it comes back with what it missed or a snapshot")
    func slowViewer() async throws {
        let hub = EventHub(history: 256, viewerBuffer: 16)
        // With the kernel's send buffer autotuned (up to megabytes) a viewer that stops
        // reading takes up to minutes of changes to back up into its mailbox; fixed small
        // buffers make that some tens of kilobytes, about a second of these batches.
        try await serve(hub, sendBuffer: 8192) { pipeline, port in
            let slow = try await EventStreamViewer.open(port: port, path: Self.floor3, receiveBuffer: 4096)
            let keen = try await EventStreamViewer.open(port: port, path: Self.floor3)
            // Both subscribed before the first change: a viewer whose request is served after
            // it gets a snapshot that already holds it, and is never sent it as an event.
            for viewer in [slow, keen] {
                #expect(await viewer.wait(timeout: .seconds(5)) { events, _ in events.first?.name == "snapshot" })
            }
            #expect(keen.events.first?.id == slow.events.first?.id, "both snapshots come before any change")
            try await slow.reading(false)
            var sent = 0
            var time: Int64 = 1_763_720_100_000
            // Bounded in time as well as count: a drop that never comes fails in seconds (the
            // bound leaves room for a suite that loads both cores).
            let deadline = ContinuousClock.now + .seconds(30)
            while hub.statistics.dropped == 0 && sent < 2_000 && ContinuousClock.now < deadline {
                // A change each: the count alternates, and so does the rule's fill.
                var batch: [IntakeMessage] = []
                for _ in 0..<10 {
                    time += 1
                    batch.append(Self.occupancy("room-7", people: (sent + batch.count) % 2, at: time))
                }
                await pipeline.handle(batch)
                sent += batch.count
                let expected = sent + 1
                // The keen viewer keeps up, as a browser would: a batch reaches it in its next
                // write, while the slow one's mailbox fills. The next batch waits for it, so it
                // is never more than a batch behind (less than its mailbox holds) however long
                // a loaded machine keeps its reader from running: the bound only ends a hang.
                let keptUp = await keen.wait(timeout: .seconds(10)) { events, _ in events.count >= expected }
                #expect(keptUp, "the keen viewer has \(keen.events.count) of \(expected) events")
                if !keptUp { break }
            }
            #expect(hub.statistics.dropped == 1, "dropped after \(sent) changes")
            #expect(await pipeline.statistics.processed >= sent, "the pipeline processed every update")
            // The keen viewer has them all, in order, each id one more than the one before.
            let total = sent + 1
            #expect(
                await keen.wait(timeout: .seconds(5)) { events, _ in events.count == total },
                "\(keen.events.count) of \(total); \(hub.statistics)")
            let numbers = keen.events.compactMap(\.number)
            #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $1 == $0 + 1 })
            // The slow one reads again: what it had, in order, then the end of its stream.
            try await slow.reading(true)
            #expect(await slow.wait(timeout: .seconds(5)) { _, ended in ended })
            let received = slow.events.compactMap(\.number)
            #expect(received.count < total && zip(received, received.dropFirst()).allSatisfy { $1 == $0 + 1 })
            // It reconnects from its last id: resumed with exactly what it missed if that fits
            // in its buffer, else a snapshot.
            let missed = try #require(numbers.last) - (try #require(received.last))
            let again = try await EventStreamViewer.open(port: port, path: Self.floor3, lastEventID: slow.events.last?.id)
            if missed < hub.viewerBuffer {
                #expect(await again.wait(timeout: .seconds(5)) { events, _ in events.count == missed })
                #expect(again.events.compactMap(\.number) == Array(numbers.suffix(Int(missed))))
                #expect(hub.statistics.resumed == 1)
            } else {
                #expect(await again.wait(timeout: .seconds(5)) { events, _ in events.first?.name == "snapshot" })
                #expect(hub.statistics.snapshots == 3)
            }
            for viewer in [keen, again] { await viewer.close() }
        }
    }
}

/// Gives a server connection a small, fixed send buffer and write-buffer watermark, so
/// that a viewer that stops reading blocks the server's writes after `bytes` or so in the
/// kernel and as many in the channel, rather than after the megabytes the kernel's
/// autotuning grows a loopback send buffer to.
private final class SmallSendBuffer: ChannelInboundHandler, RemovableChannelHandler {
    // Everything passes through untouched.
    typealias InboundIn = NIOAny
    let bytes: Int

    init(bytes: Int) { self.bytes = bytes }

    func handlerAdded(context: ChannelHandlerContext) {
        // Setting SO_SNDBUF also turns the kernel's autotuning off for the socket.
        _ = context.channel.setOption(.socketOption(.so_sndbuf), value: SocketOptionValue(bytes))
        _ = context.channel.setOption(.writeBufferWaterMark, value: .init(low: bytes / 2, high: bytes))
    }
}
