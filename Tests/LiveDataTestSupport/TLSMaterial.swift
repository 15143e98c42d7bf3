import Foundation

/// A throwaway CA, a broker certificate for 127.0.0.1 and a client certificate, made with
/// the openssl command-line tool.
public struct TLSMaterial: Sendable {
    public var caCertificate: String
    public var serverCertificate: String
    public var serverKey: String
    public var clientCertificate: String
    public var clientKey: String

    /// Generates the files in a new directory.
    public static func generate() async throws -> TLSMaterial {
        let directory = try TestDirectory.make(prefix: "tls")
        let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let openssl else {
            throw MosquittoBroker.Failure.toolFailed("openssl is not installed; install it with `apt-get install openssl`")
        }
        func file(_ name: String) -> String { directory.appendingPathComponent(name).path }
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
            toFile: file("server.ext"), atomically: true, encoding: .utf8)
        try await run(
            openssl,
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=livedata test CA",
                "-keyout", file("ca.key"), "-out", file("ca.crt"),
            ])
        for (name, extensions) in [("server", true), ("client", false)] {
            try await run(
                openssl,
                [
                    "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=\(name == "server" ? "127.0.0.1" : "client")",
                    "-keyout", file("\(name).key"), "-out", file("\(name).csr"),
                ])
            try await run(
                openssl,
                [
                    "x509", "-req", "-in", file("\(name).csr"), "-CA", file("ca.crt"), "-CAkey", file("ca.key"),
                    "-CAcreateserial", "-days", "2", "-out", file("\(name).crt"),
                ] + (extensions ? ["-extfile", file("server.ext")] : []))
        }
        for name in ["ca.crt", "server.crt", "server.key", "client.crt", "client.key"] {
            try makeReadable(directory.appendingPathComponent(name))
        }
        return TLSMaterial(
            caCertificate: file("ca.crt"), serverCertificate: file("server.crt"), serverKey: file("server.key"),
            clientCertificate: file("client.crt"), clientKey: file("client.key"))
    }
}
