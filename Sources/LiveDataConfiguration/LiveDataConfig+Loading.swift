import DisplayRules
import Foundation
import LiveTopics
import Yams

extension LiveDataConfig {
    /// Reads and checks a config file. Relative paths in it (catalog, password file, TLS
    /// files) are found from the working directory, or else from the file's directory.
    /// `$LIVEDATA_MQTT_PASSWORD` and `$LIVEDATA_HTTP_TOKEN` override the secrets.
    /// - Throws: ``ConfigErrors`` with every problem found, each with file, line and column.
    public static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigErrors) -> LiveDataConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "it does not exist"
            throw ConfigErrors([ConfigError(file: path, line: 1, column: 1, message: "cannot open the config file: \(reason)")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigErrors([ConfigError(file: path, line: 1, column: 1, message: "the config file is not UTF-8 text")])
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try parse(yaml: text, file: path, directory: directory, environment: environment)
    }

    /// The most values (scalars, lists, mappings) a config may expand to, its aliases
    /// counted as often as they are used: a large venue's config is tens of thousands.
    static let maximumNodes = 1_000_000

    /// Whether `root` has at most `limit` nodes, counting stops past it.
    static func expandsWithin(_ root: Node, limit: Int) -> Bool {
        var count = 0
        var pending = [root]
        while let node = pending.popLast() {
            count += 1
            if count > limit { return false }
            switch node {
            case .mapping(let mapping):
                for (key, value) in mapping {
                    pending.append(key)
                    pending.append(value)
                }
            case .sequence(let sequence): pending.append(contentsOf: sequence)
            case .scalar, .alias: break
            }
        }
        return true
    }

    /// Reads config text; see ``load(path:environment:)``.
    /// - Throws: ``ConfigErrors``.
    public static func parse(
        yaml: String, file: String, directory: String? = nil, environment: [String: String] = [:]
    ) throws(ConfigErrors) -> LiveDataConfig {
        let reader = ConfigReader(file: file)
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigErrors([syntaxError(error, file: file)])
        } catch {
            throw ConfigErrors([ConfigError(file: file, line: 1, column: 1, message: "cannot read the YAML: \(error)")])
        }
        var config = LiveDataConfig(file: file)
        guard let root else { return try config.applying(environment, file: file) }
        // YAML aliases repeat what they name: ten lines of them can stand for a billion
        // values ("billion laughs"). What the file expands to is bounded before it is read.
        if !Self.expandsWithin(root, limit: maximumNodes) {
            throw ConfigErrors([
                ConfigError(
                    file: file, line: 1, column: 1,
                    message: "the config expands to more than \(maximumNodes) values (YAML aliases repeating aliases?)")
            ])
        }
        let resolver = PathResolver(directory: directory)
        var catalogNode: Node?
        var catalogPath: String?
        var geometryNode: Node?
        var geometryPath: String?
        var domains: [String: DomainSettings] = [:]
        var stylesNode: Node?
        var rulesNode: Node?
        var keepaliveGiven = false
        for (key, _, value) in reader.mapping(root, "the config file", allowed: ConfigKeys.keys(of: "")) {
            switch key {
            case "instance": config.instance = reader.nonEmptyString(value, "instance")
            case "partition":
                config.partition = readPartition(value, reader)
                if case .mapping(let members) = value {
                    if let bridge = members["bridge"] { config.bridge = reader.nonEmptyString(bridge, "partition.bridge") }
                    if let horizon = members["bridgeHorizon"],
                        let value = reader.duration(horizon, "partition.bridgeHorizon", range: .seconds(60)...ConfigReader.maximumDuration)
                    {
                        config.bridgeHorizon = value
                    }
                    if let failover = members["failover"] { config.failover = reader.bool(failover, "partition.failover") ?? false }
                    if let peers = members["peers"] { config.peers = readPeers(peers, reader) }
                }
            case "broker":
                config.broker = readBroker(value, reader, resolver)
                if case .mapping(let members) = value, members["keepalive"] != nil { keepaliveGiven = true }
            case "subscriptions": config.subscriptions = readSubscriptions(value, reader)
            case "domains": domains = readDomains(value, reader)
            case "catalog":
                catalogNode = value
                catalogPath = reader.nonEmptyString(value, "catalog").map(resolver.resolve)
            case "geometry":
                geometryNode = value
                geometryPath = reader.nonEmptyString(value, "geometry").map(resolver.resolve)
            case "styles": stylesNode = value
            case "rules": rulesNode = value
            case "output": config.output = readOutput(value, reader)
            case "store": config.store = readStore(value, reader)
            case "http": config.http = readHTTP(value, reader)
            case "log": config.log = readLog(value, reader)
            case "limits": config.limits = readLimits(value, reader)
            case "venueView": config.venueView = readVenueView(value, reader)
            default: unhandledKey(key, in: "", value, reader)
            }
        }
        if let partition = config.partition, config.partitionSubscriptions.isEmpty {
            reader.error(
                root, "no subscription takes anything the partition \(partition.name) owns: the subscriptions and partition.owns do not meet")
        }
        if config.failover && !config.output.retain {
            reader.error(
                root, "partition.failover needs output.retain: true (a replica that takes over converges with the styles the broker retains)")
        }
        if config.failover {
            if !keepaliveGiven {
                config.broker.keepalive = BrokerSettings.failoverKeepalive
            } else if config.broker.keepalive > .seconds(6) {
                // The lease expires 1.5 keepalives after its last renewal.
                let seconds = config.broker.keepalive.components.seconds
                config.warnings.append(
                    "partition.failover with broker.keepalive \(seconds)s: a paused or cut-off active is replaced only after about \(seconds * 3 / 2 + 1) s (the default with failover, 5s, takes about 8 s)"
                )
            }
        }
        if !config.peers.isEmpty && !config.failover {
            config.warnings.append("partition.peers is set without partition.failover: no state is copied from them")
        }
        var catalog = LocationCatalog()
        if let catalogPath, let catalogNode {
            if let text = try? String(contentsOfFile: catalogPath, encoding: .utf8) {
                do {
                    catalog = try LocationCatalog(csv: text)
                } catch {
                    reader.error(catalogNode, "the catalog \(catalogPath) \(error)")
                }
            } else {
                reader.error(catalogNode, "cannot read the catalog \(catalogPath)")
            }
        }
        if let geometryPath, let geometryNode {
            if let data = FileManager.default.contents(atPath: geometryPath) {
                do {
                    let geometry = try VenueGeometry(geoJSON: data, file: geometryPath)
                    config.geometry = geometry
                    if !catalog.entries.isEmpty {
                        let unknown = geometry.unplacedUnknownIDs(known: Set(catalog.entries.keys))
                        if !unknown.isEmpty {
                            config.warnings.append(
                                "\(geometryPath): \(unknown.count) feature ids are not in the catalog (drawn only if such a location reports): "
                                    + unknown.prefix(5).joined(separator: ", ") + (unknown.count > 5 ? ", …" : ""))
                        }
                    }
                } catch {
                    for problem in error.problems { reader.error(geometryNode, "the geometry: \(problem)") }
                }
            } else {
                reader.error(geometryNode, "cannot read the geometry file \(geometryPath)")
            }
        }
        let styles = stylesNode.map { readStyles($0, reader) } ?? (main: StyleTemplate.empty, types: [:], locations: [:])
        let rules = rulesNode.map { readRules($0, reader) } ?? []
        config.ruleSet = RuleSet(
            main: styles.main, types: styles.types, locations: styles.locations, rules: rules, domains: domains,
            catalog: catalog)
        guard reader.errors.isEmpty else { throw ConfigErrors(reader.errors) }
        return try config.applying(environment, file: file)
    }

    /// The secrets from outside the file, strongest first: `$LIVEDATA_MQTT_PASSWORD` and
    /// `$LIVEDATA_HTTP_TOKEN`, then the systemd credentials `mqtt-password` and `http-token`
    /// (`LoadCredential=`, read from `$CREDENTIALS_DIRECTORY`), then the file's own.
    private func applying(_ environment: [String: String], file: String) throws(ConfigErrors) -> LiveDataConfig {
        var config = self
        let credentials = environment["CREDENTIALS_DIRECTORY"].map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        func credential(_ name: String) -> String? {
            guard let credentials, FileManager.default.fileExists(atPath: credentials + name) else { return nil }
            return credentials + name
        }
        if let password = environment["LIVEDATA_MQTT_PASSWORD"] {
            config.broker.passwordFromEnvironment = password
        } else if let path = credential("mqtt-password") {
            config.broker.passwordFile = path
        }
        func token(_ token: String, from source: String) throws(ConfigErrors) -> String {
            // An empty token would let anyone who sends "Authorization: Bearer " write.
            guard !token.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw ConfigErrors([
                    ConfigError(
                        file: file, line: 1, column: 1,
                        message: "\(source) is set but empty: remove it to turn writing off, or give it a token")
                ])
            }
            return token
        }
        if let value = environment["LIVEDATA_HTTP_TOKEN"] {
            config.http.token = try token(value, from: "$LIVEDATA_HTTP_TOKEN")
        } else if let path = credential("http-token") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigErrors([ConfigError(file: file, line: 1, column: 1, message: "cannot read the credential \(path)")])
            }
            // A file ends with a newline (LF or CRLF); the token does not.
            var text = String(decoding: data, as: UTF8.self)
            while text.last?.isNewline == true { text.removeLast() }
            config.http.token = try token(text, from: "the credential http-token (\(path))")
        }
        return config
    }

    private static func syntaxError(_ error: YamlError, file: String) -> ConfigError {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let detail = context.map { "\(problem) \($0.text)" } ?? problem
            return ConfigError(file: file, line: mark.line, column: mark.column, message: "not valid YAML: \(detail)")
        default:
            return ConfigError(file: file, line: 1, column: 1, message: "not valid YAML: \(error)")
        }
    }

    // MARK: - Sections

    private static func readBroker(_ node: Node, _ reader: ConfigReader, _ resolver: PathResolver) -> BrokerSettings {
        var broker = BrokerSettings()
        for (key, _, value) in reader.mapping(node, "broker", allowed: ConfigKeys.keys(of: "broker")) {
            switch key {
            case "host": broker.host = reader.nonEmptyString(value, "broker.host") ?? broker.host
            case "port": broker.port = reader.int(value, "broker.port", range: 1...65_535) ?? broker.port
            case "clientId": broker.clientId = reader.nonEmptyString(value, "broker.clientId") ?? broker.clientId
            case "protocol":
                if let text = reader.string(value, "broker.protocol") {
                    if ["mqtt5", "mqtt311"].contains(text) {
                        broker.protocolVersion = text
                    } else {
                        reader.error(value, "broker.protocol must be mqtt5 or mqtt311, found \"\(text)\"")
                    }
                }
            case "username": broker.username = reader.nonEmptyString(value, "broker.username")
            case "passwordFile": broker.passwordFile = reader.nonEmptyString(value, "broker.passwordFile").map(resolver.resolve)
            case "keepalive":
                guard let keepalive = reader.duration(value, "broker.keepalive") else { break }
                if keepalive < BrokerSettings.keepaliveRange.lowerBound {
                    reader.error(
                        value,
                        "broker.keepalive must be at least 5s (libmosquitto refuses a shorter one, and the failover lease is timed from it), found \(ConfigReader.text(keepalive))"
                    )
                } else if keepalive > BrokerSettings.keepaliveRange.upperBound {
                    reader.error(value, "broker.keepalive must be at most 65535s (MQTT's limit), found \(ConfigReader.text(keepalive))")
                } else if keepalive.components.attoseconds != 0 {
                    reader.error(value, "broker.keepalive must be whole seconds (MQTT counts it in seconds), found \(ConfigReader.text(keepalive))")
                } else {
                    broker.keepalive = keepalive
                }
            case "reconnectMaximum":
                broker.reconnectMaximum =
                    reader.duration(value, "broker.reconnectMaximum", range: BrokerSettings.reconnectMaximumRange) ?? broker.reconnectMaximum
            case "qos": broker.qos = reader.int(value, "broker.qos", range: 0...2) ?? broker.qos
            case "cleanStart": broker.cleanStart = reader.bool(value, "broker.cleanStart") ?? broker.cleanStart
            case "bufferedSocket":
                broker.bufferedSocket = reader.bool(value, "broker.bufferedSocket") ?? broker.bufferedSocket
            case "outputConnection":
                broker.outputConnection = reader.bool(value, "broker.outputConnection") ?? broker.outputConnection
            case "outputConnections":
                broker.outputConnections = reader.int(value, "broker.outputConnections", range: 1...16) ?? broker.outputConnections
            case "tls":
                var tls = TLSSettings()
                for (tlsKey, _, tlsValue) in reader.mapping(value, "broker.tls", allowed: ConfigKeys.keys(of: "broker.tls")) {
                    let path = reader.nonEmptyString(tlsValue, "broker.tls.\(tlsKey)").map(resolver.resolve)
                    switch tlsKey {
                    case "caFile": tls.caFile = path
                    case "certFile": tls.certFile = path
                    case "keyFile": tls.keyFile = path
                    default: unhandledKey(tlsKey, in: "broker.tls", tlsValue, reader)
                    }
                }
                if (tls.certFile == nil) != (tls.keyFile == nil) {
                    reader.error(value, "broker.tls needs both certFile and keyFile for a client certificate")
                }
                broker.tls = tls
            default: unhandledKey(key, in: "broker", value, reader)
            }
        }
        return broker
    }

    /// `partition.peers: [http://10.0.0.2:8080, …]`: the other replicas' HTTP servers.
    private static func readPeers(_ node: Node, _ reader: ConfigReader) -> [String] {
        reader.sequence(node, "partition.peers").compactMap { item -> String? in
            guard let text = reader.nonEmptyString(item, "partition.peers") else { return nil }
            let address = text.hasSuffix("/") ? String(text.dropLast()) : text
            guard address.hasPrefix("http://"), address.dropFirst(7).contains(":"), !address.dropFirst(7).contains("/") else {
                reader.error(item, "partition.peers: \(text) is not an address such as http://10.0.0.2:8080 (plain HTTP, host and port)")
                return nil
            }
            return address
        }
    }

    /// `partition: {name: east, owns: [{dataset: ds1, venue: v1, building: A}, …]}`.
    private static func readPartition(_ node: Node, _ reader: ConfigReader) -> Partition? {
        var name: String?
        var shares: [Partition.Share] = []
        var ownsNode: Node?
        for (key, _, value) in reader.mapping(node, "partition", allowed: ConfigKeys.keys(of: "partition")) {
            switch key {
            case "name": name = reader.nonEmptyString(value, "partition.name")
            case "bridge", "bridgeHorizon", "failover", "peers": break  // read by the caller: this daemon's, not the partition's
            case "owns":
                ownsNode = value
                for item in reader.sequence(value, "partition.owns") {
                    var levels: [String: String] = [:]
                    for (level, _, text) in reader.mapping(item, "partition.owns", allowed: ConfigKeys.keys(of: "partition.owns[]")) {
                        switch level {
                        case "dataset", "venue", "building": levels[level] = reader.nonEmptyString(text, "partition.owns: \(level)")
                        default: unhandledKey(level, in: "partition.owns[]", text, reader)
                        }
                    }
                    guard let dataset = levels["dataset"] else {
                        reader.error(item, "partition.owns: each share names its dataset (and a venue, and a building of it, to narrow it)")
                        continue
                    }
                    if levels["building"] != nil && levels["venue"] == nil {
                        reader.error(item, "partition.owns: a building is named with its venue")
                        continue
                    }
                    do {
                        shares.append(try Partition.Share(dataset: dataset, venue: levels["venue"], building: levels["building"]))
                    } catch {
                        reader.error(item, "partition.owns: \(error)")
                    }
                }
            default: unhandledKey(key, in: "partition", value, reader)
            }
        }
        guard let name else {
            reader.error(node, "partition.name is missing: replicas of one partition share it")
            return nil
        }
        do {
            try LiveTopic.validateComponent(name, as: .dataset)
        } catch {
            reader.error(node, "partition.name \(name) cannot be a topic level")
            return nil
        }
        guard !shares.isEmpty else {
            reader.error(ownsNode ?? node, "partition.owns is empty: list the datasets, venues or buildings the partition owns")
            return nil
        }
        return Partition(name: name, shares: shares)
    }

    private static func readSubscriptions(_ node: Node, _ reader: ConfigReader) -> [TopicCriteria] {
        let items = reader.sequence(node, "subscriptions")
        let criteria = items.compactMap { readCriteria($0, reader, "a subscription") }
        return items.isEmpty ? [try! TopicCriteria()] : criteria
    }

    /// `{dataset: ds1, domain: occupancy}` or `{filter: "ds1/+/B/#"}`.
    static func readCriteria(_ node: Node, _ reader: ConfigReader, _ what: String) -> TopicCriteria? {
        let members = reader.mapping(node, what, allowed: ConfigKeys.keys(of: "subscriptions[]"))
        if let filterMember = members.first(where: { $0.key == "filter" }) {
            guard members.count == 1 else {
                reader.error(node, "\(what) is either a filter or components, not both")
                return nil
            }
            guard let text = reader.nonEmptyString(filterMember.value, "filter") else { return nil }
            do {
                return TopicCriteria(filter: try TopicFilter(text))
            } catch {
                reader.error(filterMember.value, "bad filter: \(error)")
                return nil
            }
        }
        var values: [LiveTopic.Component: String] = [:]
        for (key, _, value) in members {
            // A filter is alone (returned above): every other key names a topic level.
            guard let component = LiveTopic.Component(rawValue: key) else {
                unhandledKey(key, in: "subscriptions[]", value, reader)
                continue
            }
            guard let text = reader.string(value, key) else { continue }
            do {
                try LiveTopic.validateComponent(text, as: component)
                values[component] = text
            } catch {
                reader.error(value, "\(error)")
            }
        }
        return try? TopicCriteria(
            dataset: values[.dataset], venue: values[.venue], building: values[.building], floor: values[.floor],
            room: values[.room], location: values[.location], domain: values[.domain])
    }

    private static func readDomains(_ node: Node, _ reader: ConfigReader) -> [String: DomainSettings] {
        var domains: [String: DomainSettings] = [:]
        for (domain, _, value) in reader.mapping(node, "domains", allowed: nil) {
            var settings = DomainSettings()
            for (key, _, setting) in reader.mapping(value, "domains.\(domain)", allowed: ConfigKeys.keys(of: "domains.*")) {
                switch key {
                case "staleAfter": settings.staleAfter = reader.duration(setting, "domains.\(domain).staleAfter")
                case "moves": settings.moves = reader.bool(setting, "domains.\(domain).moves")
                default: unhandledKey(key, in: "domains.*", setting, reader)
                }
            }
            domains[domain] = settings
        }
        return domains
    }

    private static func readStyles(
        _ node: Node, _ reader: ConfigReader
    ) -> (main: StyleTemplate, types: [String: StyleTemplate], locations: [String: StyleTemplate]) {
        var main = StyleTemplate.empty
        var types: [String: StyleTemplate] = [:]
        var locations: [String: StyleTemplate] = [:]
        for (key, _, value) in reader.mapping(node, "styles", allowed: ConfigKeys.keys(of: "styles")) {
            switch key {
            case "main": main = readStyleTemplate(value, reader, "styles.main", domain: nil)
            case "types":
                for (type, _, style) in reader.mapping(value, "styles.types", allowed: nil) {
                    types[type] = readStyleTemplate(style, reader, "styles.types.\(type)", domain: nil)
                }
            case "locations":
                for (id, _, style) in reader.mapping(value, "styles.locations", allowed: nil) {
                    locations[id] = readStyleTemplate(style, reader, "styles.locations.\(id)", domain: nil)
                }
            default: unhandledKey(key, in: "styles", value, reader)
            }
        }
        return (main, types, locations)
    }

    static func readStyleTemplate(_ node: Node, _ reader: ConfigReader, _ what: String, domain: String?) -> StyleTemplate {
        var style = Style()
        var labelNode: Node?
        var badgeTextNode: Node?
        for (key, _, value) in reader.mapping(node, what, allowed: ConfigKeys.keys(of: "style")) {
            let name = "\(what).\(key)"
            let field = StyleField(rawValue: key)!
            switch field.kind {
            case .flag: style[field] = reader.bool(value, name).map(StyleValue.flag)
            case .number(let range): style[field] = reader.double(value, name, range: range).map(StyleValue.number)
            case .integer: style[field] = reader.int(value, name).map(StyleValue.integer)
            case .text: style[field] = reader.string(value, name).map(StyleValue.text)
            case .name: style[field] = reader.nonEmptyString(value, name).map(StyleValue.text)
            case .template:
                style[field] = reader.string(value, name).map(StyleValue.text)
                labelNode = value
            case .color: style[field] = reader.color(value, name).map(StyleValue.color)
            case .badge:
                var badge = Badge()
                for (badgeKey, _, badgeValue) in reader.mapping(value, name, allowed: ConfigKeys.keys(of: "style.badge")) {
                    switch badgeKey {
                    case "text":
                        badge.text = reader.string(badgeValue, "\(name).text")
                        badgeTextNode = badgeValue
                    case "textColor": badge.textColor = reader.color(badgeValue, "\(name).textColor")
                    case "backgroundColor": badge.backgroundColor = reader.color(badgeValue, "\(name).backgroundColor")
                    default: unhandledKey(badgeKey, in: "style.badge", badgeValue, reader)
                    }
                }
                style[field] = .badge(badge)
            }
        }
        if let zoomFrom = style[number: .zoomFrom], let zoomTo = style[number: .zoomTo], zoomFrom > zoomTo {
            reader.error(node, "\(what): zoomFrom (\(jsonNumber(zoomFrom))) is above zoomTo (\(jsonNumber(zoomTo)))")
        }
        do {
            return try StyleTemplate(style, domain: domain)
        } catch {
            // Report against whichever template failed.
            if let label = style[text: .label], (try? LabelTemplate(label, domain: domain)) == nil, let labelNode {
                reader.error(labelNode, error, "\(what).label")
            } else if let badgeTextNode {
                reader.error(badgeTextNode, error, "\(what).badge.text")
            }
            return .empty
        }
    }

    private static func readRules(_ node: Node, _ reader: ConfigReader) -> [Rule] {
        var rules: [Rule] = []
        var names = Set<String>()
        for (order, item) in reader.sequence(node, "rules").enumerated() {
            let members = reader.mapping(item, "a rule", allowed: ConfigKeys.keys(of: "rules[]"))
            guard case .mapping = item else { continue }
            guard let nameMember = members.first(where: { $0.key == "name" }) else {
                reader.error(item, "a rule needs a name")
                continue
            }
            guard let name = reader.nonEmptyString(nameMember.value, "a rule's name") else { continue }
            if !names.insert(name).inserted { reader.error(nameMember.value, "two rules are named \"\(name)\"") }
            let what = "rule \"\(name)\""
            var domain: String?
            if let member = members.first(where: { $0.key == "domain" }) {
                domain = reader.nonEmptyString(member.value, "\(what): domain")
            }
            var condition = try! CompiledExpression("true", domain: domain)
            var scope: TopicCriteria?
            var style = StyleTemplate.empty
            var legend: String?
            var layer: String?
            var priority = 0
            var valid = true
            for (key, _, value) in members {
                switch key {
                case "when":
                    guard let text = reader.nonEmptyString(value, "\(what): when") else {
                        valid = false
                        continue
                    }
                    do {
                        condition = try CompiledExpression(text, domain: domain)
                    } catch {
                        reader.error(value, error, "\(what): when")
                        valid = false
                    }
                case "where": scope = readCriteria(value, reader, "\(what): where")
                case "style": style = readStyleTemplate(value, reader, "\(what): style", domain: domain)
                case "legend": legend = reader.nonEmptyString(value, "\(what): legend")
                case "layer": layer = reader.nonEmptyString(value, "\(what): layer")
                case "priority": priority = reader.int(value, "\(what): priority") ?? 0
                case "name", "domain": continue  // read above: the others need them
                default: unhandledKey(key, in: "rules[]", value, reader)
                }
            }
            if valid {
                rules.append(
                    Rule(
                        name: name, domain: domain, condition: condition, scope: scope, style: style, legend: legend,
                        layer: layer, priority: priority, order: order))
            }
        }
        return rules
    }

    private static func readLimits(_ node: Node, _ reader: ConfigReader) -> LimitSettings {
        var limits = LimitSettings()
        for (key, _, value) in reader.mapping(node, "limits", allowed: ConfigKeys.keys(of: "limits")) {
            func count(_ range: ClosedRange<Int>) -> Int? { reader.int(value, "limits.\(key)", range: range) }
            switch key {
            case "queue": limits.queue = count(1...10_000_000) ?? limits.queue
            case "queueBytes": limits.queueBytes = count(65_536...(16 << 30)) ?? limits.queueBytes
            case "locations": limits.locations = count(1...100_000_000) ?? limits.locations
            case "domains": limits.domains = count(1...64) ?? limits.domains
            // The broker's own bound is 256 MB; a live update is a few hundred bytes.
            case "payloadSize": limits.payload.size = count(256...(16 << 20)) ?? limits.payload.size
            case "properties": limits.payload.properties = count(1...10_000) ?? limits.payload.properties
            case "nameLength": limits.payload.nameLength = count(1...65_536) ?? limits.payload.nameLength
            case "valueLength": limits.payload.valueLength = count(1...(1 << 20)) ?? limits.payload.valueLength
            case "futureSkew": limits.futureSkew = reader.duration(value, "limits.futureSkew") ?? limits.futureSkew
            default: unhandledKey(key, in: "limits", value, reader)
            }
        }
        return limits
    }

    private static func readOutput(_ node: Node, _ reader: ConfigReader) -> OutputSettings {
        var output = OutputSettings()
        for (key, _, value) in reader.mapping(node, "output", allowed: ConfigKeys.keys(of: "output")) {
            switch key {
            case "prefix":
                if let prefix = reader.nonEmptyString(value, "output.prefix") {
                    if prefix.contains("+") || prefix.contains("#") || prefix.hasPrefix("/") || prefix.hasSuffix("/") {
                        reader.error(value, "output.prefix must be topic levels without wildcards or outer slashes, found \"\(prefix)\"")
                    } else {
                        output.prefix = prefix
                    }
                }
            case "retain": output.retain = reader.bool(value, "output.retain") ?? output.retain
            case "qos": output.qos = reader.int(value, "output.qos", range: 0...2) ?? output.qos
            case "minInterval":
                output.minInterval = reader.duration(value, "output.minInterval", range: .zero...(.seconds(3600))) ?? output.minInterval
            case "summaryInterval": output.summaryInterval = reader.duration(value, "output.summaryInterval") ?? output.summaryInterval
            default: unhandledKey(key, in: "output", value, reader)
            }
        }
        return output
    }

    private static func readStore(_ node: Node, _ reader: ConfigReader) -> StoreSettings {
        var store = StoreSettings()
        for (key, _, value) in reader.mapping(node, "store", allowed: ConfigKeys.keys(of: "store")) {
            switch key {
            case "snapshotInterval":
                store.snapshotInterval = reader.duration(value, "store.snapshotInterval", range: .milliseconds(10)...(.seconds(3600)))
                    ?? store.snapshotInterval
            case "journalSync":
                store.journalSync = reader.duration(value, "store.journalSync", range: .milliseconds(10)...(.seconds(3600)))
                    ?? store.journalSync
            case "path": store.path = reader.nonEmptyString(value, "store.path") ?? store.path
            default: unhandledKey(key, in: "store", value, reader)
            }
        }
        return store
    }

    private static func readHTTP(_ node: Node, _ reader: ConfigReader) -> HTTPSettings {
        var http = HTTPSettings()
        for (key, _, value) in reader.mapping(node, "http", allowed: ConfigKeys.keys(of: "http")) {
            switch key {
            case "listen":
                if let listen = reader.nonEmptyString(value, "http.listen") {
                    if let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
                        (0...65_535).contains(port), colon != listen.startIndex
                    {
                        http.listen = listen
                    } else {
                        reader.error(value, "http.listen must be host:port, such as 127.0.0.1:8080, found \"\(listen)\"")
                    }
                }
            case "token": http.token = reader.nonEmptyString(value, "http.token")
            default: unhandledKey(key, in: "http", value, reader)
            }
        }
        return http
    }

    private static func readLog(_ node: Node, _ reader: ConfigReader) -> LogSettings {
        var log = LogSettings()
        for (key, _, value) in reader.mapping(node, "log", allowed: ConfigKeys.keys(of: "log")) {
            switch key {
            case "level":
                if let level = reader.string(value, "log.level") {
                    if LogSettings.levels.contains(level) {
                        log.level = level
                    } else {
                        reader.error(value, "log.level must be one of \(LogSettings.levels.joined(separator: ", ")), found \"\(level)\"")
                    }
                }
            default: unhandledKey(key, in: "log", value, reader)
            }
        }
        return log
    }

    /// A key of `section` that ``ConfigKeys`` lists (so the reader let it through) but no case
    /// of the section's switch reads: an error naming it, never read as another key or dropped.
    private static func unhandledKey(_ key: String, in section: String, _ node: Node, _ reader: ConfigReader) {
        let path = section.isEmpty ? key : "\(section).\(key)"
        reader.error(node, "\(path) is a key the loader lists but does not read: this build cannot apply it")
    }
}

/// Finds relative paths from the working directory, or else from the config file's directory.
struct PathResolver {
    let directory: String?

    func resolve(_ path: String) -> String {
        guard !path.hasPrefix("/"), let directory, !FileManager.default.fileExists(atPath: path) else { return path }
        let candidate = URL(fileURLWithPath: directory).appendingPathComponent(path).path
        return FileManager.default.fileExists(atPath: candidate) ? candidate : path
    }
}
