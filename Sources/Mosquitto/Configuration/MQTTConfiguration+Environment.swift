import Foundation

extension MQTTSecret {
    /// Reads a secret from a file, dropping one trailing newline.
    /// - Throws: ``MQTTError/invalidConfiguration(_:)`` naming the file when it cannot be read.
    public static func contentsOfFile(_ path: String) throws(MQTTError) -> MQTTSecret {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidConfiguration("cannot read the password file \(path): it does not exist or is not readable")
        }
        guard var text = String(data: data, encoding: .utf8) else {
            throw .invalidConfiguration("the password file \(path) is not UTF-8 text")
        }
        if text.hasSuffix("\r\n") {
            text.removeLast(2)
        } else if text.hasSuffix("\n") {
            text.removeLast()
        }
        return MQTTSecret(text)
    }

    /// Reads a secret from an environment variable, if it is set.
    public static func environment(_ name: String) -> MQTTSecret? {
        ProcessInfo.processInfo.environment[name].map(MQTTSecret.init)
    }
}

extension MQTTTLSConfiguration {
    /// Checks that every named file can be read, so that a typo is reported as such rather
    /// than as a failed handshake.
    /// - Throws: ``MQTTError/invalidConfiguration(_:)`` naming the file.
    public func validate() throws(MQTTError) {
        for (label, path) in [("CA file", caFile), ("certificate file", certFile), ("key file", keyFile)] {
            guard let path else { continue }
            if !FileManager.default.isReadableFile(atPath: path) {
                throw .invalidConfiguration("cannot read the TLS \(label) \(path): it does not exist or is not readable")
            }
        }
        if (certFile == nil) != (keyFile == nil) {
            throw .invalidConfiguration("a TLS client certificate needs both a certificate file and a key file")
        }
    }
}
