import DisplayRules
import Foundation
import LiveState
import LiveTopics

#if canImport(Glibc)
import Glibc
import Logging
#endif

/// A replica's state as another copies it (`GET /v1/state`, behind `http.token`): one line
/// per value, its update topic and an update payload that restores it,
/// `ds1/v1/A/F1/R1/desk-1/occupancy<TAB>{"timestamp":"…","properties":{"occupied":"true"}}`,
/// so that the copying replica applies them as it applies updates (a value older than the
/// one it holds is ignored: the overlap with its queued updates is harmless).
///
/// A peer serves it a part at a time (``Part``), as one chunked response: it is never built
/// whole, and the peer's pipeline takes updates between two parts.
enum PeerState {
    /// Locations in one part.
    static let partSize = 4_096

    /// How long a peer rests after serving a part, as a multiple of the time the part took
    /// (taken, encoded and written): a copy then has at most a third of the peer's time, so
    /// that the updates it takes meanwhile keep their pace; a joining replica, which is not
    /// serving yet, waits longer for its copy instead.
    static let restAfterPart = 2

    /// A part of the state: some locations' values, and the position of the next part
    /// (nil after the last).
    struct Part: Sendable {
        var locations: [(address: LocationAddress, values: [DomainValue])]
        var next: Int?
    }

    /// The lines of a part's locations.
    static func lines(_ locations: [(address: LocationAddress, values: [DomainValue])]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(locations.count * 160)
        for (address, values) in locations {
            for value in values {
                let topic = address.path + "/" + value.domain
                // A tab or a line break would end the line early: no such topic is valid.
                guard !topic.utf8.contains(where: { $0 == 9 || $0 == 10 }) else { continue }
                out.append(contentsOf: topic.utf8)
                out.append(9)
                var stream = JSONStream(capacity: 128)
                stream.beginObject()
                stream.add("timestamp", value.timestamp.description)
                stream.key("properties")
                stream.beginObject()
                for property in value.properties { stream.add(text: property.name, property.value) }
                stream.endObject()
                stream.endObject()
                out.append(contentsOf: stream.bytes)
                out.append(10)
            }
        }
        return out
    }

    /// Calls `body` with each line's topic and payload.
    static func forEachLine(_ bytes: UnsafeRawBufferPointer, _ body: (String, UnsafeRawBufferPointer) -> Void) {
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != 10 { end += 1 }
            if let tab = (start..<end).first(where: { bytes[$0] == 9 }) {
                let topic = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<tab]), as: UTF8.self)
                body(topic, UnsafeRawBufferPointer(rebasing: bytes[(tab + 1)..<end]))
            }
            start = end + 1
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// `GET {peer}/v1/state` with the bearer token, over plain HTTP/1.1 on a thread of its
    /// own (a blocking socket, `Connection: close`, read to its end).
    static func fetch(_ peer: String, token: String?, timeout: Duration = .seconds(30)) async throws -> [UInt8] {
        try await request(peer, path: "/v1/state", token: token, timeout: timeout)
    }

    /// ``get(_:path:token:timeout:)`` on a thread of its own.
    static func request(_ peer: String, path: String, token: String?, timeout: Duration) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try get(peer, path: path, token: token, timeout: timeout) })
            }
        }
    }

    /// A peer replica's role as its `/readyz` says it (`standby`, `active`, `claiming`); nil
    /// when it does not answer so.
    static func role(of peer: String) async -> String? {
        let answer = try? await request(peer, path: "/readyz", token: nil, timeout: .seconds(2))
        struct Readiness: Decodable {
            struct Replica: Decodable { var role: String }
            var replica: Replica?
        }
        return answer.flatMap { try? JSONDecoder().decode(Readiness.self, from: Data($0)) }?.replica?.role
    }

    static func get(_ peer: String, path: String, token: String?, timeout: Duration) throws -> [UInt8] {
        guard peer.hasPrefix("http://"), let colon = peer.lastIndex(of: ":"), colon > peer.index(peer.startIndex, offsetBy: 6)
        else { throw Failure(description: "\(peer) is not http://host:port") }
        let host = String(peer[peer.index(peer.startIndex, offsetBy: 7)..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let port = String(peer[peer.index(after: colon)...])
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, port, &hints, &found) == 0, let first = found else {
            throw Failure(description: "cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        let socket = Glibc.socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard socket >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(socket) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(socket, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            throw Failure(description: "cannot connect to \(peer): \(String(cString: strerror(errno)))")
        }
        var request = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        if let token { request += "Authorization: Bearer \(token)\r\n" }
        request += "\r\n"
        let sent = request.utf8CString.withUnsafeBufferPointer { send(socket, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
        guard sent == request.utf8.count else { throw Failure(description: "cannot send the request to \(peer)") }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count == 0 { break }
            guard count > 0 else {
                if errno == EINTR { continue }
                throw Failure(description: "reading from \(peer): \(String(cString: strerror(errno)))")
            }
            response.append(contentsOf: buffer[0..<count])
        }
        return try body(of: response, from: peer)
    }

    /// The body of a whole HTTP/1.1 response (its length given, or chunked, or to the end).
    static func body(of response: [UInt8], from peer: String) throws -> [UInt8] {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = response.indices.first(where: { response[$0...].starts(with: separator) }) else {
            throw Failure(description: "\(peer) sent no whole HTTP response")
        }
        let head = String(decoding: response[..<end], as: UTF8.self).lowercased()
        let lines = head.components(separatedBy: "\r\n")
        let status = lines.first?.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        var body = Array(response[(end + 4)...])
        guard status == "200" else {
            throw Failure(description: "\(peer) answered \(status): \(String(decoding: body.prefix(300), as: UTF8.self))")
        }
        if lines.contains(where: { $0.hasPrefix("transfer-encoding:") && $0.contains("chunked") }) {
            var decoded: [UInt8] = []
            var index = 0
            var ended = false
            while let lineEnd = body[index...].firstIndex(of: 13) {
                let size = Int(String(decoding: body[index..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
                index = lineEnd + 2
                if size == 0 {
                    ended = true
                    break
                }
                guard index + size <= body.count else { throw Failure(description: "\(peer) sent a cut chunk") }
                decoded.append(contentsOf: body[index..<(index + size)])
                index += size + 2
            }
            // A peer that could not send all of its state ends without the last chunk.
            guard ended else { throw Failure(description: "\(peer) ended its answer before its last chunk: the copy is incomplete") }
            body = decoded
        } else if let length = lines.first(where: { $0.hasPrefix("content-length:") }).flatMap({ Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) }),
            body.count != length
        {
            throw Failure(description: "\(peer) sent \(body.count) of \(length) bytes")
        }
        return body
    }
}

extension PeerState {
    /// Copies a peer's state (after `after`, the wait for the retained lease); tries the
    /// peers in turn, standbys first (their wait delays no map), with a growing delay until
    /// one answers, or, when no replica holds the lease (a new partition, or every replica
    /// lost), after two rounds starts with none. `importState` applies a copied state.
    nonisolated(nonsending) static func copy(
        from peers: [String], token: String?, after: Duration, leaseHeld: () -> Bool,
        importState: ([UInt8]) -> (applied: Int, lines: Int), locations: () -> Int, logger: Logger
    ) async {
        var delay = Duration.seconds(1)
        var rounds = 0
        try? await Task.sleep(for: after)
        while !Task.isCancelled {
            var standbys: [String] = []
            for peer in peers where await role(of: peer) == "standby" { standbys.append(peer) }
            for peer in standbys + peers.filter({ !standbys.contains($0) }) {
                do {
                    let started = ContinuousClock.now
                    let body = try await fetch(peer, token: token)
                    let (applied, lines) = importState(body)
                    logger.notice(
                        "copied the state of \(peer): \(lines) values, \(applied) applied, \(locations()) locations",
                        metadata: ["copy.milliseconds": "\((ContinuousClock.now - started).milliseconds)"])
                    return
                } catch {
                    logger.warning("cannot copy the state of \(peer): \(error)")
                }
            }
            rounds += 1
            if !leaseHeld() && rounds >= 2 {
                logger.warning("no peer answered and no replica holds the lease: starting with no state")
                return
            }
            logger.warning("no peer's state copied; trying again in \(delay) (this replica stays not ready meanwhile)")
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }
}
