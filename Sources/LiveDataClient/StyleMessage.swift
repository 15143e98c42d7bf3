import Foundation

/// A derived change as a map client reads it (`docs/asyncapi.yaml`, message
/// `derivedChange`): the members a client draws from and orders by. Members it does not
/// use are not decoded, so that a newer daemon's additions do not break it.
public struct StyleMessage: Decodable, Sendable, Equatable {
    public struct Place: Codable, Sendable, Hashable {
        public var dataset: String
        public var venue: String
        public var building: String
        public var floor: String
        public var room: String
        public var location: String

        /// `dataset/venue/building/floor/room/location`.
        public var path: String { [dataset, venue, building, floor, room, location].joined(separator: "/") }
    }

    public struct Badge: Decodable, Sendable, Equatable {
        public var text: String?
    }

    public struct Style: Decodable, Sendable, Equatable {
        public var visible: Bool?
        public var label: String?
        public var badge: Badge?
        public var layer: String?
        public var polygonFillColor: String?
    }

    public var location: String
    public var topic: Place
    public var style: Style
    public var rules: [String]
    public var epoch: UInt64?
    public var version: UInt64
    public var updatedAt: String?
    public var format: Int?

    /// The pair a client orders a location's changes by: the epoch first, absent as 0.
    public var order: Order { Order(epoch: epoch ?? 0, version: version) }
}

/// (epoch, version), compared epoch first.
public struct Order: Comparable, Sendable, Hashable, CustomStringConvertible {
    public var epoch: UInt64
    public var version: UInt64

    public init(epoch: UInt64, version: UInt64) {
        self.epoch = epoch
        self.version = version
    }

    public static func < (a: Order, b: Order) -> Bool { (a.epoch, a.version) < (b.epoch, b.version) }

    public var description: String { "epoch \(epoch), version \(version)" }
}

/// A dataset's legend as a client reads it (message `legend`).
public struct LegendMessage: Decodable, Sendable, Equatable {
    public struct Entry: Decodable, Sendable, Equatable {
        public var title: String
        public var layer: String?
        public var rules: [String]
    }

    public var entries: [Entry]
    public var format: Int?
}

/// The failover lease as a client reads it (message `lease`): which replica publishes.
public struct LeaseMessage: Decodable, Sendable, Equatable {
    public var instance: String
    public var epoch: UInt64
    public var released: Bool?
}
