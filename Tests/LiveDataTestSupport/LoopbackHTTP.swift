import NIOCore
import NIOHTTP1
import NIOPosix

/// HTTP requests to a daemon process on loopback, one connection each, over NIO (the
/// in-process route tests use HummingbirdTesting instead). Not URLSession: on Linux its
/// concurrent requests, many tests' at once, time out now and then with the server idle.
public enum LoopbackHTTP {
    public struct Response: Sendable {
        public var status: Int
        /// Field names in lower case.
        public var headers: [String: String]
        public var body: String
    }

    public enum Failure: Error, CustomStringConvertible {
        case timedOut(String, seconds: Double)
        case closedEarly(String)

        public var description: String {
            switch self {
            case .timedOut(let request, let seconds): "no complete answer to \(request) within \(seconds) s"
            case .closedEarly(let request): "the connection closed before the answer to \(request) was complete"
            }
        }
    }

    /// A thread of its own: NIO's shared group also carries the tests' event-stream viewers,
    /// hundreds at a time under load, and a request behind them would wait past its timeout.
    private static let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    public static func request(
        _ method: String, port: Int, path: String, headers: [String: String] = [:], body: String = "", host: String = "127.0.0.1",
        timeout: Double = 30
    ) async throws -> Response {
        let name = "\(method) http://\(host):\(port)\(path)"
        let loop = group.next()
        let answer = loop.makePromise(of: Response.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .connectTimeout(.milliseconds(Int64(timeout * 1000)))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(Collector(answer: answer, request: name))
                    }
                }
                .connect(host: host, port: port).get()
        } catch {
            // A promise must be completed, the one of a connection never made too.
            answer.fail(error)
            throw error
        }
        // A daemon that stops answering fails the test rather than hanging the run.
        let deadline = loop.scheduleTask(in: .milliseconds(Int64(timeout * 1000))) {
            answer.fail(Failure.timedOut(name, seconds: timeout))
        }
        var fields = HTTPHeaders([("Host", "\(host):\(port)"), ("Connection", "close")])
        for (field, value) in headers { fields.add(name: field, value: value) }
        let bytes = Array(body.utf8)
        if !bytes.isEmpty || method == "PUT" || method == "POST" { fields.add(name: "Content-Length", value: "\(bytes.count)") }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: path, headers: fields)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if !bytes.isEmpty { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: bytes))), promise: nil) }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        defer {
            deadline.cancel()
            channel.close(promise: nil)
        }
        return try await answer.futureResult.get()
    }

    /// Gathers one response; fails the answer when the connection closes first.
    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPClientResponsePart
        let answer: EventLoopPromise<Response>
        let request: String
        var response = Response(status: 0, headers: [:], body: "")
        var body: [UInt8] = []

        init(answer: EventLoopPromise<Response>, request: String) {
            self.answer = answer
            self.request = request
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                response.status = Int(head.status.code)
                for (name, value) in head.headers { response.headers[name.lowercased()] = value }
            case .body(let buffer):
                body += buffer.readableBytesView
            case .end:
                response.body = String(decoding: body, as: UTF8.self)
                answer.succeed(response)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            answer.fail(Failure.closedEarly(request))
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            answer.fail(error)
            context.close(promise: nil)
        }
    }
}
