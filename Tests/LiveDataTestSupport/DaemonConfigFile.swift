/// A daemon's config file as the tests that run `livedata serve` write it: a broker on
/// loopback, the occupancy updates of ds1, rules, a state file and a listen address, and a
/// partition (with failover) when one is set. A test names what it varies; the rest is the
/// same everywhere.
public struct DaemonConfigFile: Sendable {
    /// A share of a partition: a venue of ds1, or one of its buildings.
    public struct Share: Sendable {
        public var venue: String
        public var building: String?

        public init(venue: String = "hq", building: String? = nil) {
            self.venue = venue
            self.building = building
        }

        public static func building(_ name: String) -> Share { Share(building: name) }
    }

    public var brokerHost = "127.0.0.1"
    public var brokerPort: Int
    public var clientId: String
    /// `broker.keepalive`; nil leaves the default.
    public var keepalive: String? = "5s"
    /// More members of `broker` (TLS files, credentials), each `key: value`.
    public var brokerMembers: [String] = []
    public var instance: String?
    public var partition: String?
    public var owns: [Share] = []
    public var failover = false
    public var rules = DaemonConfigFile.occupiedRule
    public var store: String
    public var listen = "127.0.0.1:0"

    public init(brokerPort: Int, clientId: String, store: String) {
        self.brokerPort = brokerPort
        self.clientId = clientId
        self.store = store
    }

    /// The replica `instance` of failover partition `partition`, which owns the whole venue `hq`.
    public mutating func replica(_ instance: String, of partition: String) {
        self.instance = instance
        self.partition = partition
        owns = [Share()]
        failover = true
    }

    /// One rule: an occupied room is red, with a label.
    public static func occupiedRule(label: String) -> String {
        """
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545", label: "\(label)"}
        """
    }

    /// One rule: an occupied room is red.
    public static let occupiedRule = """
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545"}
        """

    /// Occupied red and vacant green, each with its legend title.
    public static let occupiedAndVacantRules = """
          - name: occupied
            domain: occupancy
            when: nrOfPeople > 0
            style: {polygonFillColor: "#D64545"}
            legend: Occupied
          - name: vacant
            domain: occupancy
            when: nrOfPeople == 0
            style: {polygonFillColor: "#4CAF50"}
            legend: Vacant
        """

    public var yaml: String {
        var lines: [String] = []
        if let instance { lines.append("instance: \(instance)") }
        if let partition {
            lines.append("partition:")
            lines.append("  name: \(partition)")
            lines.append("  owns:")
            for share in owns {
                let building = share.building.map { ", building: \($0)" } ?? ""
                lines.append("    - {dataset: ds1, venue: \(share.venue)\(building)}")
            }
            if failover { lines.append("  failover: true") }
        }
        let broker = ["host: \(brokerHost)", "port: \(brokerPort)", "clientId: \(clientId)"]
            + (keepalive.map { ["keepalive: \($0)"] } ?? []) + brokerMembers
        lines.append("broker: {\(broker.joined(separator: ", "))}")
        lines.append("subscriptions:")
        lines.append("  - {dataset: ds1, domain: occupancy}")
        lines.append("rules:")
        lines.append(rules)
        lines.append("store: {path: \(store)}")
        lines.append(#"http: {listen: "\#(listen)"}"#)
        return lines.joined(separator: "\n") + "\n"
    }
}
