/// A failover replica's role, for `/readyz`, `/metrics` and `STATUS=`.
public struct ReplicaRole: Sendable, Equatable, Codable {
    public enum Role: String, Sendable, Codable { case standby, claiming, active }
    public var partition: String
    public var role: Role
    /// This replica's epoch while claiming or active; else the epoch of the lease in force.
    public var epoch: UInt64
    /// The replica that holds the lease, as far as this one has seen.
    public var active: String?
    public var takeovers: Int
    public var depositions: Int
    /// Its state is whole (copied, when it started with none): it may take over.
    public var joined: Bool

    /// `active, epoch 8`, `claiming epoch 8`, `standby (east-1 active, epoch 7)`.
    public var summary: String {
        switch role {
        case .active: "active, epoch \(epoch)"
        case .claiming: "claiming epoch \(epoch)"
        case .standby: "standby (" + (active.map { "\($0) active, epoch \(epoch)" } ?? "no replica active") + ")"
        }
    }
}
