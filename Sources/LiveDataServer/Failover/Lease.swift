import Foundation
import LiveTopics

/// The retained message at `{prefix}/owner/{partition}` that says which replica of a
/// partition is active: `{"instance": "east-1", "epoch": 7}`; the will of the connection that
/// holds it releases it: `{"instance": "east-1", "epoch": 7, "released": true}`. Other fields
/// are allowed and ignored.
struct Lease: Codable, Equatable, Sendable {
    var instance: String
    var epoch: UInt64
    /// The holder's connection ended (its will), or it stepped down.
    var released: Bool?
    /// The payloads' layout (``WireFormat``); absent in a lease of a daemon before it was written.
    var format: Int?

    init(instance: String, epoch: UInt64, released: Bool = false) {
        self.instance = instance
        self.epoch = epoch
        self.released = released ? true : nil
        self.format = WireFormat.version
    }

    var isReleased: Bool { released ?? false }

    /// The lease as published: compact JSON.
    var payload: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Array((try? encoder.encode(self)) ?? Data())
    }

    /// The lease a retained payload holds; nil for an empty one (nobody's) and for one that
    /// is not a lease (said in the log by the caller).
    init?(payload: UnsafeRawBufferPointer) {
        guard !payload.isEmpty, let lease = try? JSONDecoder().decode(Lease.self, from: Data(payload)) else { return nil }
        self = lease
    }
}
