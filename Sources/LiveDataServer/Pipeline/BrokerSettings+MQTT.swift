import LiveDataConfiguration
import Mosquitto

extension BrokerSettings {
    /// The client settings for the daemon: a fixed client id, the configured session, and
    /// `offline` at `{prefix}/status` as the will.
    /// - Throws: ``MQTTError/invalidConfiguration(_:)`` for an unreadable password file.
    public func mqttConfiguration(statusTopic: String) throws(MQTTError) -> MQTTConfiguration {
        var configuration = MQTTConfiguration(
            host: host, port: port, clientID: clientId, protocolVersion: protocolVersion == "mqtt311" ? .v311 : .v5,
            cleanStart: cleanStart, keepalive: keepalive)
        if let username {
            var password = passwordFromEnvironment.map(MQTTSecret.init)
            if password == nil, let passwordFile { password = try MQTTSecret.contentsOfFile(passwordFile) }
            configuration.credentials = MQTTCredentials(username: username, password: password)
        }
        if let tls {
            configuration.tls = MQTTTLSConfiguration(caFile: tls.caFile, certFile: tls.certFile, keyFile: tls.keyFile)
        }
        configuration.will = MQTTWill(topic: statusTopic, payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        return configuration
    }
}
