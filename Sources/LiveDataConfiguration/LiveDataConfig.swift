import DisplayRules
import LiveTopics

/// The daemon's settings, from one YAML file (config/livedata.yaml documents every key).
/// Every key is optional except each rule's `name`; unknown keys are errors.
public struct LiveDataConfig: Sendable {
    /// The file it was read from.
    public var file: String
    public var broker: BrokerSettings
    /// Topic criteria to subscribe to; default: every live-data topic.
    public var subscriptions: [TopicCriteria]
    /// Styles, rules, domain settings and the catalog.
    public var ruleSet: RuleSet
    public var output: OutputSettings
    public var store: StoreSettings
    public var http: HTTPSettings
    public var log: LogSettings
    public var limits = LimitSettings()
    /// `geometry:` — location shapes for the floor view, if given.
    public var geometry: VenueGeometry?
    /// `venueView:` — the venue page's focus thresholds and its buildings' floors.
    public var venueView = VenueViewSettings()
    /// `instance`: this daemon's name in its status topic (default: `broker.clientId`).
    public var instance: String?
    /// `partition: {name, owns}`: the venues or buildings this daemon owns when several share
    /// the broker; none: it owns everything.
    public var partition: Partition?
    /// `partition.bridge`: the `remote_clientid` of the bridge that carries this daemon's
    /// broker to a central one; when it comes back up, the daemon publishes its recent
    /// clears again (a bridge may have lost them while down). None: no bridge watched.
    public var bridge: String?
    /// `partition.bridgeHorizon`: how long a clear is recorded to be published again when
    /// the bridge comes back (an outage longer than this may leave a stale style on the
    /// central broker).
    public var bridgeHorizon: Duration = Self.defaultBridgeHorizon
    public static let defaultBridgeHorizon: Duration = .seconds(7 * 86_400)
    /// `partition.failover`: replicas of the partition (same `partition`, each its own
    /// `instance`) share it, one active at a time, under a lease at `{prefix}/owner/{name}`
    /// (see `ReplicaStage`). Off: this daemon is its partition's only owner.
    public var failover = false
    /// `partition.peers`: the HTTP addresses (`http://host:port`) of the partition's other
    /// replicas, from which a replica that starts with an empty state copies the active's.
    public var peers: [String] = []
    /// This daemon's name: `instance`, else the broker client id.
    public var instanceName: String { instance ?? broker.clientId }

    /// The name in the status topic (`{prefix}/status/{name}`): with a partition or an
    /// `instance`, this daemon's; alone on its prefix, none (`{prefix}/status`, as before).
    public var statusInstance: String? { partition != nil || instance != nil ? instanceName : nil }

    /// The filters the daemon subscribes to: the configured ones, narrowed to the partition.
    public var partitionSubscriptions: [TopicCriteria] {
        guard let partition else { return subscriptions }
        return subscriptions.flatMap(partition.narrow)
    }

    /// What loading found odd but not wrong (logged at start).
    public var warnings: [String] = []

    public init(
        file: String = "<defaults>", broker: BrokerSettings = BrokerSettings(),
        subscriptions: [TopicCriteria] = [try! TopicCriteria()], ruleSet: RuleSet = RuleSet(),
        output: OutputSettings = OutputSettings(), store: StoreSettings = StoreSettings(),
        http: HTTPSettings = HTTPSettings(), log: LogSettings = LogSettings()
    ) {
        self.file = file
        self.broker = broker
        self.subscriptions = subscriptions
        self.ruleSet = ruleSet
        self.output = output
        self.store = store
        self.http = http
        self.log = log
    }
}

/// `broker:` — how to reach the MQTT broker.
public struct BrokerSettings: Sendable, Equatable {
    /// `host`, default `127.0.0.1`.
    public var host = "127.0.0.1"
    /// `port`, default 1883.
    public var port = 1883
    /// `clientId`, default `livedata`; fixed, so that the broker keeps the session.
    public var clientId = "livedata"
    /// `protocol`: `mqtt5` (default) or `mqtt311`.
    public var protocolVersion = "mqtt5"
    /// `username`, default none.
    public var username: String?
    /// `passwordFile`; `$LIVEDATA_MQTT_PASSWORD` overrides it.
    public var passwordFile: String?
    /// The password from `$LIVEDATA_MQTT_PASSWORD`, if set.
    public var passwordFromEnvironment: String?
    /// `keepalive`, default 30s, or ``failoverKeepalive`` with `partition.failover`; 5s to
    /// 65535s in whole seconds (libmosquitto refuses less than 5 s, MQTT counts it in
    /// seconds in 16 bits).
    public var keepalive: Duration = .seconds(30)
    /// The keepalive of a failover replica whose config gives none: a lease not renewed for
    /// 1.5 keepalives expires, so a paused or cut-off active is replaced within about 8 s.
    public static let failoverKeepalive: Duration = .seconds(5)
    /// The keepalives the broker and libmosquitto take.
    public static let keepaliveRange: ClosedRange<Duration> = .seconds(5)...(.seconds(65_535))
    /// `reconnectMaximum`, default 10s (1s to 10m): the longest wait between two attempts to
    /// connect to the broker (the waits start at half a second and double). A broker or a link
    /// that comes back is found at most this long after it did.
    public var reconnectMaximum: Duration = .seconds(10)
    /// The `reconnectMaximum`s taken.
    public static let reconnectMaximumRange: ClosedRange<Duration> = .seconds(1)...(.seconds(600))
    /// `qos` of the subscriptions, default 1.
    public var qos = 1
    /// `cleanStart`, default false: a persistent session keeps updates while the daemon is down.
    public var cleanStart = false
    /// `bufferedSocket`, default false (libmosquitto's own calls). True redirects
    /// libmosquitto's imports, which does four things:
    /// - its socket reads come from a buffer and its writes go out once a network pass, a
    ///   few system calls per pass instead of about five per message (plain TCP only; TLS
    ///   connections keep the library's calls);
    /// - its writes to the wake-up socket pair of each of the daemon's clients, which
    ///   nobody reads, are left out;
    /// - its monotonic clock is the coarse one (it keeps whole seconds of it);
    /// - its locks are checked instead of taken: every call into libmosquitto for a
    ///   connection must be made on that connection's network thread (the daemon's are,
    ///   every connection's, TLS or not), and one that is not stops the daemon with a
    ///   message naming the call and both threads.
    /// It reaches into libmosquitto's import table, so it is opt-in; a library it cannot
    /// reach keeps its own calls, with a notice.
    public var bufferedSocket = false
    /// `outputConnection`, default true: the daemon publishes on a second connection of its
    /// own (client id `{clientId}-output`) rather than on the one it receives on. mosquitto
    /// reads one packet from each ready connection in turn, and one connection would carry
    /// two packets per update (the update's acknowledgement and its style) against the
    /// publisher's one: the styles would fall behind whenever the broker is busy.
    public var outputConnection = true
    /// `outputConnections`, default 4 (1 to 16): how many connections the output publishes
    /// over (client ids `{clientId}-output`, `{clientId}-output-2`…), a location's styles
    /// always on the same one. The broker reads one packet from each connection in turn,
    /// so the output gets that many turns for the publisher's one and catches up after a
    /// pause instead of lagging for as long as the stream lasts; each connection has its own
    /// window (`max_inflight_messages` is per client), and libmosquitto, which walks its
    /// list of unacknowledged publications on every publish and acknowledgement, walks a
    /// shorter one. With `outputConnection: false` the output shares the one connection.
    public var outputConnections = 4
    /// `tls: {caFile, certFile, keyFile}`, default none (plain TCP).
    public var tls: TLSSettings?

    public init() {}
}

/// `broker.tls:` — PEM files.
public struct TLSSettings: Sendable, Equatable {
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

/// `output:` — what the daemon publishes.
public struct OutputSettings: Sendable, Equatable {
    /// `prefix` of every topic it publishes, default `livedata`.
    public var prefix = "livedata"
    /// `retain`, default true: late subscribers get the current state at once.
    public var retain = true
    /// `qos`, default 1.
    public var qos = 1
    /// `summaryInterval`: at most one summary per floor or building per interval, default 1s.
    public var summaryInterval: Duration = .seconds(1)
    /// `minInterval` (duration, default 0: publish at once): at most one derived change per
    /// location per interval. The first goes out at once; later ones within the interval
    /// wait, each replacing the one before, and the last goes out when the interval ends:
    /// the final state is never lost. The floor view still gets every change.
    public var minInterval: Duration = .zero

    public init() {}
}

/// `store:` — persistence.
public struct StoreSettings: Sendable, Equatable {
    /// `path` of the SQLite file, default `data/state.db`; `":memory:"` keeps nothing.
    /// The intake journal is the folder `{path}.journal` beside it.
    public var path = "data/state.db"
    /// `snapshotInterval` (duration, default 5s): how often changed locations are written
    /// to the SQLite file. The journal holds every update in between.
    public var snapshotInterval: Duration = .seconds(5)
    /// `journalSync` (duration, default 1s): how often the journal is brought to the disk
    /// (`fdatasync`); a power loss may take back what came since. A crash of the daemon
    /// alone loses nothing.
    public var journalSync: Duration = .seconds(1)

    public init() {}

    public var isInMemory: Bool { path == ":memory:" }

    /// The intake journal's folder.
    public var journalPath: String { path + ".journal" }
}

/// `http:` — the HTTP interface.
public struct HTTPSettings: Sendable, Equatable {
    /// `listen` address, default `127.0.0.1:8080`.
    public var listen = "127.0.0.1:8080"
    /// `token` that guards the write endpoints; `$LIVEDATA_HTTP_TOKEN` overrides it.
    public var token: String?

    public init() {}
}

/// `limits:` — bounds on what the daemon accepts.
public struct LimitSettings: Sendable, Equatable {
    /// `futureSkew` (duration, default 5m): an update whose timestamp is further ahead of
    /// the daemon's clock is refused (`future_timestamp`) rather than stored, where it
    /// would make every later update of its location and domain look out of order.
    public var futureSkew: Duration = .seconds(300)
    /// `queue` (count, default 10,000): received updates waiting for the pipeline. When
    /// that many wait, the daemon stops reading from the broker until there is room: the
    /// broker's session queue holds the rest.
    public var queue = 10_000
    /// `queueBytes` (bytes, default 32 MiB): the same bound on their size.
    public var queueBytes = 32 << 20
    /// `locations` (default 1,000,000): new locations beyond it are refused
    /// (`too_many_locations`).
    public var locations = 1_000_000
    /// `domains` (default 16): domains per location; a further one is refused (`too_many_domains`).
    public var domains = 16
    /// `payloadSize` (bytes, default 64 KiB; also the MQTT 5 Maximum Packet Size the daemon
    /// asks the broker for, plus room for the topic), `properties` per update (64),
    /// `nameLength` and `valueLength` of a property (128 and 1,024 bytes).
    public var payload = PayloadLimits.standard

    public init() {}
}

/// `log:` — logging.
public struct LogSettings: Sendable, Equatable {
    /// `level`: trace, debug, info (default), notice, warning, error, critical.
    public var level = "info"

    public init() {}

    public static let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
}
