import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A viewer of `GET /v1/events` over a real TCP connection (NIO): it sends the request, parses
/// the events as they arrive, and can stop reading (a slow viewer: the server's socket fills
/// and its writes wait) or hang up.
final class EventStreamViewer: Sendable {
    struct Event: Sendable, Equatable {
        var id: String?
        var name: String
        var data: String

        /// The number of its id (`{epoch}-{n}`).
        var number: UInt64? { id?.split(separator: "-").last.flatMap { UInt64($0) } }
    }

    private struct State {
        var status: Int?
        var pending: [UInt8] = []
        var events: [Event] = []
        var ended = false
        var bytes = 0
    }

    private let channel: any Channel
    private let box: Box

    private init(channel: any Channel, box: Box) {
        self.channel = channel
        self.box = box
    }

    /// Connects to 127.0.0.1:`port` and asks for `path`.
    /// - Parameter receiveBuffer: the socket's receive buffer in bytes (small: a paused
    ///   viewer backs up into the server sooner).
    static func open(
        port: Int, path: String, lastEventID: String? = nil, receiveBuffer: Int? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> EventStreamViewer {
        let box = Box()
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
        let viewer = EventStreamViewer(channel: channel, box: box)
        var headers = HTTPHeaders([("Host", "127.0.0.1:\(port)"), ("Accept", "text/event-stream")])
        if let lastEventID { headers.add(name: "Last-Event-ID", value: lastEventID) }
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        return viewer
    }

    var events: [Event] { box.state.withLock { $0.events } }
    var status: Int? { box.state.withLock { $0.status } }
    /// Whether the server ended the stream (or the connection closed).
    var ended: Bool { box.state.withLock { $0.ended } }
    var bytesReceived: Int { box.state.withLock { $0.bytes } }

    /// Stops reading from the socket (`false`) or reads again (`true`).
    func reading(_ on: Bool) async throws {
        try await channel.setOption(.autoRead, value: on).get()
        if on { channel.read() }
    }

    func close() async {
        try? await channel.close().get()
    }

    /// Waits until `condition` holds for the events (and whether the stream ended).
    @discardableResult
    func wait(timeout: Duration = .seconds(10), until condition: ([Event], Bool) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if box.state.withLock({ condition($0.events, $0.ended) }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return box.state.withLock { condition($0.events, $0.ended) }
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
                    // Complete events end with a blank line.
                    while let end = state.pending.firstRange(of: [10, 10]) {
                        let block = String(decoding: state.pending[..<end.lowerBound], as: UTF8.self)
                        state.pending.removeSubrange(..<end.upperBound)
                        if let event = Self.event(block) { state.events.append(event) }
                    }
                }
            case .end:
                box.state.withLock { $0.ended = true }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            box.state.withLock { $0.ended = true }
            context.fireChannelInactive()
        }

        static func event(_ block: String) -> Event? {
            var id: String?
            var name: String?
            var data = ""
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            return name.map { Event(id: id, name: $0, data: data) }
        }
    }
}
