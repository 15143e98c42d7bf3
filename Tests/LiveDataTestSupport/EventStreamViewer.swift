import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A viewer of `GET /v1/events` over a real TCP connection (NIO): it sends the request, parses
/// the events as they arrive, and can stop reading (a slow viewer: the server's socket fills
/// and its writes wait) or hang up.
public final class EventStreamViewer: Sendable {
    public struct Event: Sendable, Equatable {
        public var id: String?
        public var name: String
        public var data: String

        /// The number of its id (`{epoch}-{n}`).
        public var number: UInt64? { id?.split(separator: "-").last.flatMap { UInt64($0) } }
    }

    private struct State {
        var status: Int?
        var pending: [UInt8] = []
        var events: [Event] = []
        var keepEvents = true
        var ended = false
        var bytes = 0
        /// Events received, the last one's id and number, and how many came with a number
        /// not above the one before (out of order).
        var count = 0
        var lastID: String?
        var lastNumber: UInt64 = 0
        var outOfOrder = 0
        var firstName: String?
        /// `change` and `remove` events.
        var changes = 0

        mutating func add(_ event: Event) {
            count += 1
            if event.name == "change" || event.name == "remove" { changes += 1 }
            if firstName == nil { firstName = event.name }
            if let number = event.number {
                if number <= lastNumber && lastNumber > 0 { outOfOrder += 1 }
                lastNumber = number
                lastID = event.id
            }
            if keepEvents { events.append(event) }
        }
    }

    private let channel: any Channel
    private let box: Box
    private let path: String

    private init(channel: any Channel, box: Box, path: String) {
        self.channel = channel
        self.box = box
        self.path = path
    }

    /// Connects to 127.0.0.1:`port` and asks for `path`.
    /// - Parameter receiveBuffer: the socket's receive buffer in bytes (small: a paused
    ///   viewer backs up into the server sooner).
    /// - Parameter keepEvents: keep every event (else only the counts and the last id).
    public static func open(
        port: Int, path: String, lastEventID: String? = nil, receiveBuffer: Int? = nil, keepEvents: Bool = true,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> EventStreamViewer {
        let box = Box()
        box.state.withLock { $0.keepEvents = keepEvents }
        var bootstrap = ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(Reader(box: box))
                }
            }
        if let receiveBuffer {
            bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
        }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
        let viewer = EventStreamViewer(channel: channel, box: box, path: path)
        var headers = HTTPHeaders([("Host", "127.0.0.1:\(port)"), ("Accept", "text/event-stream")])
        if let lastEventID { headers.add(name: "Last-Event-ID", value: lastEventID) }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        return viewer
    }

    public var events: [Event] { box.state.withLock { $0.events } }
    public var status: Int? { box.state.withLock { $0.status } }
    /// Whether the server ended the stream (or the connection closed).
    public var ended: Bool { box.state.withLock { $0.ended } }
    public var bytesReceived: Int { box.state.withLock { $0.bytes } }
    /// Events received (kept or not), the first one's name, the last id, and how many
    /// were out of order.
    public var tally: (count: Int, changes: Int, first: String?, lastID: String?, outOfOrder: Int) {
        box.state.withLock { ($0.count, $0.changes, $0.firstName, $0.lastID, $0.outOfOrder) }
    }

    /// Stops reading from the socket (`false`) or reads again (`true`).
    public func reading(_ on: Bool) async throws {
        try await channel.setOption(.autoRead, value: on).get()
        if on { channel.read() }
    }

    /// Closes the stream; what it kept of a stream that opened is checked against
    /// `docs/openapi.yaml` with the other responses (``Contract/record(method:path:status:contentType:body:)``).
    public func close() async {
        try? await channel.close().get()
        let (status, events) = box.state.withLock { ($0.status, $0.events) }
        if status == 200 {
            let body = events.map { "event: \($0.name)\ndata: \($0.data)\n\n" }.joined()
            Contract.record(method: "GET", path: path, status: 200, contentType: "text/event-stream", body: body)
        }
    }

    /// Waits until `condition` holds for the events (and whether the stream ended).
    @discardableResult
    public func wait(timeout: Duration = .seconds(10), until condition: ([Event], Bool) -> Bool) async -> Bool {
        func holds() -> Bool { box.state.withLock { condition($0.events, $0.ended) } }
        // Cancelled: the events as they are decide.
        return (try? await polling(timeout: timeout, every: .milliseconds(10), holds, until: { $0 }).held) ?? holds()
    }

    private final class Box: Sendable {
        let state = Mutex(State())
    }

    private final class Reader: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPClientResponsePart
        let box: Box

        init(box: Box) { self.box = box }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                box.state.withLock { $0.status = Int(head.status.code) }
            case .body(let buffer):
                box.state.withLock { state in
                    state.bytes += buffer.readableBytes
                    state.pending += buffer.readableBytesView
                    // Complete events end with a blank line; what follows the last waits.
                    var start = 0
                    while let end = state.pending[start...].firstRange(of: [10, 10]) {
                        let range = start..<end.lowerBound
                        start = end.upperBound
                        if let event = Self.event(state.pending[range], withData: state.keepEvents) { state.add(event) }
                    }
                    state.pending.removeSubrange(..<start)
                }
            case .end:
                box.state.withLock { $0.ended = true }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            box.state.withLock { $0.ended = true }
            context.fireChannelInactive()
        }

        /// An event from its lines (`id:`, `event:`, `data:`), read from the bytes; its data
        /// only when `withData` (counting needs none, and is cheaper without the text).
        static func event(_ block: ArraySlice<UInt8>, withData: Bool) -> Event? {
            var id: String?
            var name: String?
            var data = ""
            var lineStart = block.startIndex
            while lineStart < block.endIndex {
                let lineEnd = block[lineStart...].firstIndex(of: 10) ?? block.endIndex
                let line = block[lineStart..<lineEnd]
                if line.starts(with: Self.idPrefix) {
                    id = String(decoding: line.dropFirst(Self.idPrefix.count), as: UTF8.self)
                } else if line.starts(with: Self.eventPrefix) {
                    name = String(decoding: line.dropFirst(Self.eventPrefix.count), as: UTF8.self)
                } else if withData && line.starts(with: Self.dataPrefix) {
                    data = String(decoding: line.dropFirst(Self.dataPrefix.count), as: UTF8.self)
                }
                lineStart = lineEnd + 1
            }
            return name.map { Event(id: id, name: $0, data: data) }
        }

        static let idPrefix = Array("id: ".utf8)
        static let eventPrefix = Array("event: ".utf8)
        static let dataPrefix = Array("data: ".utf8)
    }
}
