import Foundation
import Glibc

/// A loopback port held by a listening socket until ``close()``: what another program on
/// the port a daemon is told to listen on looks like to it.
public final class HeldPort: Sendable {
    public let port: Int
    private let socket: Int32

    public init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw MosquittoBroker.Failure.toolFailed("socket() failed") }
        guard withLoopbackAddress(port: 0, { bind(socket, $0, $1) }) == 0, listen(socket, 1) == 0 else {
            Glibc.close(socket)
            throw MosquittoBroker.Failure.toolFailed("bind() or listen() failed")
        }
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        self.socket = socket
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    public func close() { Glibc.close(socket) }
}
