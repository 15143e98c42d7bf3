import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LiveDataTestSupport
import NIOCore

/// A test client that hands every response it receives to ``Contract/record(method:path:status:contentType:body:)``,
/// so that the route tests' responses are checked against `docs/openapi.yaml` too.
struct RecordingClient: TestClientProtocol {
    let client: any TestClientProtocol

    init(_ client: any TestClientProtocol) { self.client = client }

    var port: Int? { client.port }

    func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestResponse {
        let response = try await client.executeRequest(uri: uri, method: method, headers: headers, body: body)
        Contract.record(
            method: method.rawValue, path: uri, status: response.status.code, contentType: response.headers[.contentType],
            body: String(buffer: response.body))
        return response
    }
}
