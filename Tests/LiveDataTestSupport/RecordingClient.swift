import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore

/// A test client that hands every response it receives to ``Contract/record(method:path:status:contentType:body:)``,
/// so that the route tests' responses are checked against `docs/openapi.yaml` too.
public struct RecordingClient: TestClientProtocol {
    let client: any TestClientProtocol

    public init(_ client: any TestClientProtocol) { self.client = client }

    public var port: Int? { client.port }

    public func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestResponse {
        let response = try await client.executeRequest(uri: uri, method: method, headers: headers, body: body)
        Contract.record(
            method: method.rawValue, path: uri, status: response.status.code, contentType: response.headers[.contentType],
            body: String(buffer: response.body))
        return response
    }
}
