import Hummingbird

/// Guards the write endpoints: a request needs `Authorization: Bearer <http.token>`;
/// without a configured token, writing is off.
struct BearerTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token else {
            return HTTPInterface.error(.forbidden, "writing is off: set http.token (or $LIVEDATA_HTTP_TOKEN) to enable it")
        }
        guard Self.sameInConstantTime(request.headers[.authorization] ?? "", "Bearer \(token)") else {
            return HTTPInterface.error(.unauthorized, "this needs the header Authorization: Bearer <http.token>")
        }
        return try await next(request, context)
    }

    /// Whether `given` is `expected`, in a time that depends on `expected`'s length alone:
    /// how far a guess matches cannot be read from how long the answer takes.
    static func sameInConstantTime(_ given: String, _ expected: String) -> Bool {
        let given = Array(given.utf8)
        let expected = Array(expected.utf8)
        var difference = given.count ^ expected.count
        for index in expected.indices {
            difference |= Int(expected[index] ^ (index < given.count ? given[index] : 0))
        }
        return difference == 0
    }
}

/// Guards the state copy (`GET /v1/state`): the same bearer token; without one configured,
/// the copy is off.
struct StateCopyTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token else {
            return HTTPInterface.error(
                .forbidden, "the state copy is off: set http.token (or $LIVEDATA_HTTP_TOKEN), the same on every replica")
        }
        guard BearerTokenMiddleware<Context>.sameInConstantTime(request.headers[.authorization] ?? "", "Bearer \(token)") else {
            return HTTPInterface.error(.unauthorized, "this needs the header Authorization: Bearer <http.token>")
        }
        return try await next(request, context)
    }
}
