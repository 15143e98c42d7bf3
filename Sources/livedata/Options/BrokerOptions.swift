import ArgumentParser
import Mosquitto

/// Where the broker is and how to log in.
struct BrokerOptions: ParsableArguments {
    static let passwordVariable = "LIVEDATA_MQTT_PASSWORD"

    @Option(help: "Broker host name or address.")
    var host = "127.0.0.1"

    @Option(help: "Broker port (usually 1883, or 8883 with TLS).")
    var port = 1883

    @Option(help: "Username for the broker.")
    var username: String?

    @Option(
        help: ArgumentHelp(
            "File holding the password (one line). Without it, the password is read from $\(passwordVariable).",
            valueName: "path"))
    var passwordFile: String?

    @Option(help: ArgumentHelp("CA certificate (PEM) to verify the broker with; turns TLS on.", valueName: "path"))
    var tlsCa: String?

    @Option(help: ArgumentHelp("Client certificate (PEM) for brokers that ask for one; turns TLS on.", valueName: "path"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("Private key (PEM) of the client certificate.", valueName: "path"))
    var tlsKey: String?

    @Option(help: "MQTT protocol version: 5 or 3.1.1.")
    var mqttVersion: ProtocolVersionArgument = .v5

    @Option(help: "Client id (default: a random one).")
    var clientId: String?

    /// The client configuration these flags describe.
    /// - Throws: ``MQTTError/invalidConfiguration(_:)`` for an unreadable password file.
    func configuration() throws -> MQTTConfiguration {
        var configuration = MQTTConfiguration(host: host, port: port, clientID: clientId)
        configuration.protocolVersion = mqttVersion.version
        if let username {
            let password =
                try passwordFile.map { path throws(MQTTError) in try MQTTSecret.contentsOfFile(path) }
                ?? MQTTSecret.environment(Self.passwordVariable)
            configuration.credentials = MQTTCredentials(username: username, password: password)
        } else if passwordFile != nil {
            throw CommandFailure.usage("--password-file needs --username")
        }
        if tlsCa != nil || tlsCert != nil || tlsKey != nil {
            configuration.tls = MQTTTLSConfiguration(caFile: tlsCa, certFile: tlsCert, keyFile: tlsKey)
        }
        configuration.reconnect = MQTTBackoff(initial: .milliseconds(250), maximum: .seconds(10))
        return configuration
    }
}

/// `5`/`mqtt5` or `3.1.1`/`mqtt311`.
enum ProtocolVersionArgument: String, ExpressibleByArgument, CaseIterable {
    case v5 = "5"
    case v311 = "3.1.1"

    init?(argument: String) {
        switch argument.lowercased() {
        case "5", "5.0", "mqtt5", "v5": self = .v5
        case "3.1.1", "311", "mqtt311", "v311": self = .v311
        default: return nil
        }
    }

    var version: MQTTProtocolVersion { self == .v5 ? .v5 : .v311 }
}

extension MQTTQoS: ExpressibleByArgument {
    public init?(argument: String) {
        guard let value = Int32(argument) else { return nil }
        self.init(rawValue: value)
    }

    public static var allValueStrings: [String] { ["0", "1", "2"] }
}
