import Hummingbird

/// Guards the write endpoints: a request needs `Authorization: Bearer <http.token>`;
/// without a configured token, writing is off.
struct BearerTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token else {
            return HTTPInterface.error(.forbidden, "writing is off: set http.token (or $LIVEDATA_HTTP_TOKEN) to enable it")
        }
        guard request.headers[.authorization] == "Bearer \(token)" else {
            return HTTPInterface.error(.unauthorized, "this needs the header Authorization: Bearer <http.token>")
        }
        return try await next(request, context)
    }
}
