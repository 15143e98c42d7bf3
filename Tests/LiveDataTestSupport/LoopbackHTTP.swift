import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HTTP requests to a daemon process on loopback, through URLSession (the in-process route
/// tests use HummingbirdTesting instead).
public enum LoopbackHTTP {
    public struct Response: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: String
    }

    public static func request(
        _ method: String, port: Int, path: String, headers: [String: String] = [:], body: String = "", host: String = "127.0.0.1",
        timeout: TimeInterval = 30
    ) async throws -> Response {
        var request = URLRequest(url: URL(string: "http://\(host):\(port)\(path)")!)
        request.httpMethod = method
        // A daemon that stops answering fails the test rather than hanging the run.
        request.timeoutInterval = timeout
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if !body.isEmpty { request.httpBody = Data(body.utf8) }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let response = response as? HTTPURLResponse else {
            throw MosquittoBroker.Failure.toolFailed("not an HTTP response from \(host):\(port)\(path)")
        }
        var fields: [String: String] = [:]
        for case let (name as String, value as String) in response.allHeaderFields { fields[name.lowercased()] = value }
        let text = String(decoding: data, as: UTF8.self)
        Contract.record(method: method, path: path, status: response.statusCode, contentType: fields["content-type"], body: text)
        return Response(status: response.statusCode, headers: fields, body: text)
    }
}
