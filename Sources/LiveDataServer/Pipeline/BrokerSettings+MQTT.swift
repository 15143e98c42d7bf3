import LiveTopics
import LiveDataConfiguration
import LiveState
import Mosquitto

extension BrokerSettings {
    /// The client settings for the daemon: a fixed client id, the configured session, and
    /// `offline` at `{prefix}/status` (from `topics`) as the will.
    /// - Throws: ``MQTTError/invalidConfiguration(_:)`` for an unreadable password file.
    public func mqttConfiguration(topics: OutputFormat, payloadLimit: Int = PayloadLimits.standard.size) throws(MQTTError) -> MQTTConfiguration {
        var configuration = MQTTConfiguration(
            host: host, port: port, clientID: clientId, protocolVersion: protocolVersion == "mqtt311" ? .v311 : .v5,
            cleanStart: cleanStart, keepalive: keepalive)
        configuration.bufferedSocket = bufferedSocket
        if let username {
            var password = passwordFromEnvironment.map(MQTTSecret.init)
            if password == nil, let passwordFile { password = try MQTTSecret.contentsOfFile(passwordFile) }
            configuration.credentials = MQTTCredentials(username: username, password: password)
        }
        if let tls {
            configuration.tls = MQTTTLSConfiguration(caFile: tls.caFile, certFile: tls.certFile, keyFile: tls.keyFile)
        }
        let offline = topics.statusPublication(online: false)
        configuration.will = MQTTWill(topic: offline.topic, payload: offline.payload, qos: .atLeastOnce, retain: offline.retain)
        // The broker drops what the daemon would refuse as oversize, rather than send it:
        // the payload bound, and room for the topic and the packet's header.
        configuration.maximumPacketSize = UInt32(payloadLimit + 2048)
        return configuration
    }

    /// The client settings of the daemon's output connections (``BrokerSettings/outputConnection``,
    /// ``BrokerSettings/outputConnections``): those of `input` under the client ids
    /// `{clientId}-output`, `{clientId}-output-2`…, with the same will (a lost output
    /// connection shows as `offline` too, until it is back). They subscribe to nothing, so
    /// they take a small Receive Maximum.
    public func outputMQTTConfiguration(input: MQTTConfiguration) -> MQTTConfiguration {
        var configuration = input
        configuration.clientID = "\(clientId)-output"
        configuration.receiveMaximum = 20
        configuration.connections = outputConnections
        return configuration
    }
}

extension LiveDataConfig {
    /// The topics and payloads the daemon publishes, as the config sets them.
    public var outputFormat: OutputFormat {
        OutputFormat(prefix: output.prefix, retain: output.retain, instance: statusInstance)
    }
}
