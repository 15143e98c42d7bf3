import Foundation
import Synchronization

/// The contract documents (`docs/asyncapi.yaml`, `docs/openapi.yaml`) and their checker
/// (`scripts/contract/check.py`, in the Python environment `scripts/install-dependencies`
/// makes): what tests capture is checked against them.
public enum Contract {
    /// The Python environment that has the validators.
    public static let python = Repository.url(".build/contract-venv/bin/python3")

    /// Runs the checker with `arguments` (`documents`, `payloads FILE …`, `http FILE`).
    /// - Throws: when its Python environment is missing, saying how to make it.
    public static func check(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> CommandRunner.Result {
        try await ChildProcess.start(try interpreter(), [Repository.url("scripts/contract/check.py").path] + arguments, in: Repository.root)
            .result(timeout: timeout)
    }

    /// The Python of the contract's environment.
    /// - Throws: when it is missing.
    public static func interpreter() throws -> String {
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw MosquittoBroker.Failure.toolFailed(
                "the contract's validators are not installed (\(python.path) is missing); run scripts/install-dependencies")
        }
        return python.path
    }

    /// A captured MQTT message, one JSON line for `check.py payloads`.
    public static func payloadLine(topic: String, payload: [UInt8]) -> String {
        let object: [String: String] = ["topic": topic, "payload": Data(payload).base64EncodedString()]
        return String(decoding: (try? JSONEncoder().encode(object)) ?? Data(), as: UTF8.self)
    }

    /// An HTTP response, one JSON line for `check.py http`.
    public static func httpLine(method: String, path: String, status: Int, contentType: String?, body: String) -> String {
        struct Line: Encodable {
            var method: String
            var path: String
            var status: Int
            var contentType: String?
            var body: String
        }
        let line = Line(method: method, path: path, status: status, contentType: contentType, body: body)
        return String(decoding: (try? JSONEncoder().encode(line)) ?? Data(), as: UTF8.self)
    }

    private static let httpLog = Mutex<FileHandle?>(nil)

    /// Appends an HTTP response a test received to `$LIVEDATA_CONTRACT_LOG/http.jsonl`, when
    /// that variable names a directory (`scripts/test` sets it, and checks the file against
    /// `docs/openapi.yaml` after the tests).
    public static func record(method: String, path: String, status: Int, contentType: String?, body: String) {
        guard let directory = ProcessInfo.processInfo.environment["LIVEDATA_CONTRACT_LOG"], !directory.isEmpty else { return }
        var data = Data(httpLine(method: method, path: path, status: status, contentType: contentType, body: body).utf8)
        data.append(UInt8(ascii: "\n"))
        httpLog.withLock { handle in
            if handle == nil {
                try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let path = directory + "/http.jsonl"
                if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
                handle = FileHandle(forWritingAtPath: path)
                _ = try? handle?.seekToEnd()
            }
            try? handle?.write(contentsOf: data)
        }
    }
}
