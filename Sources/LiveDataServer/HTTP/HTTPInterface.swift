import Foundation
import Hummingbird
import Logging
import NIOCore
import LiveDataConfiguration
import LiveState
import LiveTopics
import ServiceLifecycle

/// The HTTP interface: health, readiness, Prometheus metrics, current state, legend,
/// layers, and the live floor view (``FloorView``). Errors are JSON: `{"error": "…"}`. Writes need `Authorization: Bearer <http.token>`.
public enum HTTPInterface {
    /// `http.listen` is not `host:port`.
    public struct BadListenAddress: Error, CustomStringConvertible {
        public var address: String
        public var description: String { "http.listen must be host:port, such as 127.0.0.1:8080, found \"\(address)\"" }
    }

    /// The HTTP server as a service for the daemon's ServiceGroup.
    /// - Throws: ``BadListenAddress``.
    /// `onListening` runs once the server is bound (`http.listen` may give port 0: the
    /// address it logs then tells the port it got).
    public static func application(
        settings: HTTPSettings, queries: LiveQueries, metrics: DaemonMetrics, logger: Logger,
        onListening: @escaping @Sendable () async -> Void = {}
    ) throws -> some Service {
        guard let colon = settings.listen.lastIndex(of: ":"), let port = Int(settings.listen[settings.listen.index(after: colon)...])
        else {
            throw BadListenAddress(address: settings.listen)
        }
        let host = String(settings.listen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let listening = StartupGate()
        let application = Application(
            router: router(token: settings.token, queries: queries, metrics: metrics),
            configuration: .init(address: .hostname(host, port: port), serverName: "livedata"),
            onServerRunning: { channel in
                let address = channel.localAddress.map { "\($0.ipAddress ?? host):\($0.port ?? port)" } ?? settings.listen
                logger.info("HTTP interface listening", metadata: ["http.listen": "\(address)"])
                await listening.open()
                await onListening()
            }, logger: logger)
        return ListeningService(server: application, address: settings.listen, key: "http.listen", listening: listening)
    }

    /// A server that fails before it listens fails the start: its error becomes a
    /// ``StartFailure/cannotListen(address:key:cause:)`` naming the address, so that the
    /// daemon says why and exits instead of serving without it.
    struct ListeningService<Server: Service>: Service {
        let server: Server
        let address: String
        let key: String
        let listening: StartupGate

        func run() async throws {
            do {
                try await server.run()
            } catch let error as CancellationError {
                throw error
            } catch {
                if await listening.isOpen { throw error }
                throw StartFailure.cannotListen(address: address, key: key, cause: Self.cause(error))
            }
        }

        /// `Address already in use`, rather than the system call's name and errno.
        static func cause(_ error: any Error) -> String {
            if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
            return "\(error)"
        }
    }

    /// The routes, asking ``LiveQueries`` (the pipeline is built before the server starts).
    public static func router(token: String?, queries: LiveQueries, metrics: DaemonMetrics) -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/healthz") { _, _ in encoded(.ok, Readiness(status: "ok")) }
        router.get("/readyz") { _, _ in
            let phase = queries.startPhase
            guard phase == .started else {
                return error(.serviceUnavailable, "not ready: \(phase)")
            }
            guard queries.brokerState == .connected else {
                return error(.serviceUnavailable, "not ready: waiting for the MQTT broker")
            }
            guard await queries.isReady else {
                // Connected, not converged yet: the broker's styles may not be the state's.
                if let replica = await queries.replicaRole, !replica.joined {
                    return error(.serviceUnavailable, "not ready: copying a peer's state (partition.peers) before this replica may take over")
                }
                let reason = await queries.convergenceFault ?? "converging with the broker's retained styles"
                return error(.serviceUnavailable, "not ready: \(reason)")
            }
            // Updates cannot be kept (a full or read-only disk): not ready, and why.
            if let fault = await queries.storageFault {
                return error(.serviceUnavailable, "not ready: \(fault)")
            }
            // Ready, but not for the filters the broker refused: say which.
            let refused = await queries.refusedSubscriptions
            let replica = await queries.replicaRole
            guard refused.isEmpty else {
                return encoded(.ok, Readiness(status: "degraded", refused: refused, replica: replica))
            }
            return encoded(.ok, Readiness(status: "ready", replica: replica))
        }
        router.get("/metrics") { _, _ in
            let fault = await queries.storageFault
            let text = metrics.exposition(
                await queries.statistics, brokerConnected: queries.brokerState == .connected,
                ready: await queries.isReady && fault == nil)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        // `/v1/locations/{id}`, or `/v1/locations/{dataset}/{venue}/{building}/{floor}/{room}/{id}`.
        router.get("/v1/locations/**") { _, context in
            let parts = context.parameters.getCatchAll().map(pathComponent)
            switch parts.count {
            case 1:
                // A bare id names one location per dataset: several datasets holding it is
                // a question only the caller can answer (by the full path).
                let id = parts[0]
                let records = await queries.records(id: id)
                switch records.count {
                case 0: return error(.notFound, "no location \"\(id)\" is tracked")
                case 1: return json(.ok, records[0].json)
                default:
                    let message = "\(records.count) locations are named \(id); ask for one by its path"
                    return encoded(.conflict, ErrorBody(error: message, locations: records.map { "/v1/locations/\($0.address)" }))
                }
            case 6:
                let address = LocationAddress(
                    dataset: parts[0], venue: parts[1], building: parts[2], floor: parts[3], room: parts[4], location: parts[5])
                guard let record = await queries.record(address) else {
                    return error(.notFound, "no location is tracked at \"\(address)\"")
                }
                return json(.ok, record.json)
            default:
                return error(.notFound, "use /v1/locations/{id} or /v1/locations/{dataset}/{venue}/{building}/{floor}/{room}/{id}")
            }
        }
        router.get("/v1/floors/:dataset/:venue/:building/:floor") { _, context in
            let parts = pathComponents(context, ["dataset", "venue", "building", "floor"])
            let records = await queries.floor(Place(dataset: parts[0], venue: parts[1], building: parts[2], floor: parts[3]))
            return json(.ok, "{\"locations\": [" + records.map(\.json).joined(separator: ", ") + "]}")
        }
        // A failover replica's state, for one that starts with none (see `PeerState`).
        router.group("/v1/state").add(middleware: StateCopyTokenMiddleware(token: token))
            .get { _, _ in
                let firstTaken = ContinuousClock.now
                guard let first = await queries.stateCopyPart(from: 0) else {
                    return error(.serviceUnavailable, "this replica has not joined its partition yet: its state may be incomplete")
                }
                // A part at a time, each encoded here, off the pipeline, and written before the
                // next is asked for: the peer's memory holds one part, and its pipeline takes
                // updates between two. Chunked, so that a copy cut short has no final chunk:
                // a part that cannot be had ends the response without it.
                return Response(
                    status: .ok, headers: [.contentType: "text/tab-separated-values"],
                    body: ResponseBody { writer in
                        var part = first
                        var started = firstTaken
                        while true {
                            let lines = PeerState.lines(part.locations)
                            // An empty chunk would read as the last one.
                            if !lines.isEmpty { try await writer.write(ByteBuffer(bytes: lines)) }
                            guard let next = part.next else { break }
                            try await Task.sleep(for: (ContinuousClock.now - started) * PeerState.restAfterPart)
                            started = .now
                            guard let following = await queries.stateCopyPart(from: next) else { throw PeerState.Failure(description: "the replica stopped serving its state") }
                            part = following
                        }
                        try await writer.finish(nil)
                    })
            }
        router.get("/v1/legend") { request, _ in
            json(.ok, await queries.legend(dataset: request.uri.queryParameters.get("dataset")).json)
        }
        router.get("/v1/layers") { _, _ in
            encoded(.ok, LayerList(layers: await queries.layers))
        }
        router.group("/v1/layers").add(middleware: BearerTokenMiddleware(token: token))
            .put(":name") { request, context in
                let name = pathComponents(context, ["name"])[0]
                let body = try await request.body.collect(upTo: 4096)
                guard let hidden = LayerChange.hidden(from: Data(buffer: body)) else {
                    return error(.badRequest, #"the body must be {"hidden": true|false} or {"visible": true|false}"#)
                }
                let changed = await queries.setLayer(name, hidden: hidden)
                return encoded(.ok, LayerChanged(layer: name, hidden: hidden, changed: changed))
            }
        FloorView.add(to: router, queries: queries)
        answerOtherMethods(on: router)
        return router
    }

    /// Every path and the methods it answers (`docs/openapi.yaml` documents each).
    static let routeMethods: [(path: RouterPath, methods: [HTTPRequest.Method])] = [
        ("/healthz", [.get]), ("/readyz", [.get]), ("/metrics", [.get]), ("/v1/locations/**", [.get]),
        ("/v1/floors/:dataset/:venue/:building/:floor", [.get]), ("/v1/state", [.get]), ("/v1/legend", [.get]),
        ("/v1/layers", [.get]), ("/v1/layers/:name", [.put]), ("/", [.get]), ("/assets/venues.js", [.get]),
        ("/floors/:dataset/:venue/:building/:floor", [.get]), ("/assets/floor.js", [.get]), ("/assets/floor.css", [.get]),
        ("/v1/venues", [.get]), ("/v1/geometry", [.get]), ("/v1/events", [.get]), ("/venues/:dataset/:venue", [.get]),
        ("/assets/venue.js", [.get]), ("/assets/venue.css", [.get]), ("/v1/venues/:dataset/:venue", [.get]),
    ]

    /// A method a path does not answer gets 405 and the methods it does (`Allow`), not the
    /// 404 of a path that does not exist.
    static func answerOtherMethods(on router: Router<BasicRequestContext>) {
        // QUERY (a safe method with a body, being standardized) is sent by clients and fuzzers.
        let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .patch, .options, .trace] + (HTTPRequest.Method("QUERY").map { [$0] } ?? [])
        for route in routeMethods {
            let allow = route.methods.map(\.rawValue).joined(separator: ", ")
            // A path that answers GET answers HEAD too.
            for method in methods where !route.methods.contains(method) && !(method == .head && route.methods.contains(.get)) {
                router.on(route.path, method: method) { _, _ in
                    var response = error(.methodNotAllowed, "\(method.rawValue) is not answered here; use \(allow)")
                    response.headers[.allow] = allow
                    return response
                }
            }
        }
    }

    /// A path component as the client meant it: the router matches the raw path, so a
    /// location, floor or layer whose name has a space or a slash arrives percent-encoded
    /// (`F%201`). Left as it is when it is not valid percent-encoding.
    static func pathComponent(_ raw: some StringProtocol) -> String {
        let text = String(raw)
        return text.removingPercentEncoding ?? text
    }

    /// The named path parameters, each decoded (``pathComponent(_:)``); "" for a missing one.
    static func pathComponents(_ context: BasicRequestContext, _ names: [String]) -> [String] {
        names.map { context.parameters.get($0).map(pathComponent) ?? "" }
    }

    static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        encoded(status, ErrorBody(error: message))
    }

    /// A small response body, written by `JSONEncoder` (keys sorted). The records and
    /// summaries go out in the layout the MQTT payloads have, by the payload writer.
    static func encoded(_ status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(body) else {
            return json(.internalServerError, #"{"error":"the response could not be encoded"}"#)
        }
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    struct ErrorBody: Codable, Equatable {
        var error: String
        /// For a bare id that names several locations: their paths.
        var locations: [String]?
    }

    struct Readiness: Codable, Equatable {
        var status: String
        /// The filters the broker refused (status `degraded`).
        var refused: [String]?
        /// A failover replica's role and epoch.
        var replica: ReplicaRole?
    }

    struct LayerList: Codable, Equatable {
        var layers: [LiveQueries.Layer]
    }

    /// `PUT /v1/layers/{name}`'s body: `{"hidden": true|false}` or `{"visible": true|false}`.
    enum LayerChange {
        /// Whether the body hides the layer; nil for a body that is not one of the two
        /// (another member, a value that is not a boolean, both or neither).
        static func hidden(from body: Data) -> Bool? {
            guard let object = try? JSONDecoder().decode([String: Bool].self, from: body), object.count == 1 else { return nil }
            return object["hidden"] ?? object["visible"].map { !$0 }
        }
    }

    struct LayerChanged: Codable, Equatable {
        var layer: String
        var hidden: Bool
        var changed: Int
    }
}

extension Data {
    init(buffer: ByteBuffer) {
        self.init(buffer.readableBytesView)
    }
}
