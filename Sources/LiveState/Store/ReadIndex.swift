import LiveTopics

/// The store's locations by identity (dataset and id) and by floor, kept up to date as
/// locations are added and move, so that a query (the HTTP interface's, or the store's own
/// when a topic names a new placement) finds them without scanning every location. Off the
/// update path: only a new location or a move touches it.
///
/// Keyed by a hash of the identity's bytes rather than by a string: a restore adds a million
/// of them, and a string key would be made and hashed for each.
struct ReadIndex {
    /// By identity hash, the one location with it; a hash several locations share (a
    /// collision) is in `shared` instead, so the common case costs no array.
    private var byIdentity: [UInt64: LocationState] = [:]
    private var shared: [UInt64: [LocationState]] = [:]
    /// By floor aggregate (one per floor, see ``SummaryTracker``), the floor's locations.
    private var byFloor: [ObjectIdentifier: [LocationState]] = [:]

    mutating func reserveCapacity(_ count: Int) {
        byIdentity.reserveCapacity(count)
    }

    /// The hash of a dataset and a location id.
    static func identityHash(dataset: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer) -> UInt64 {
        LocationTable.hash(id, continuing: LocationTable.hash(dataset))
    }

    static func identityHash(_ address: LocationAddress) -> UInt64 {
        address.withPathBytes { path in
            let (dataset, id) = LocationAddress.identity(ofPath: path)
            return identityHash(dataset: dataset, id: id)
        }
    }

    /// `identity`: its ``identityHash(_:)``, when the caller has it.
    mutating func insert(_ state: LocationState, identity: UInt64? = nil) {
        let key = identity ?? Self.identityHash(state.address)
        if !shared.isEmpty, var locations = shared[key] {
            locations.append(state)
            shared[key] = locations
        } else if let other = byIdentity.updateValue(state, forKey: key) {
            byIdentity[key] = nil
            shared[key] = [other, state]
        }
        byFloor[ObjectIdentifier(state.floorSummary), default: []].append(state)
    }

    /// Takes a location out (before it moves; it is inserted again at its new place).
    mutating func remove(_ state: LocationState) {
        byFloor[ObjectIdentifier(state.floorSummary)]?.removeAll { $0 === state }
        let key = Self.identityHash(state.address)
        if byIdentity[key] === state {
            byIdentity[key] = nil
        } else if var locations = shared[key] {
            locations.removeAll { $0 === state }
            if locations.count == 1 {
                shared[key] = nil
                byIdentity[key] = locations[0]
            } else {
                shared[key] = locations
            }
        }
    }

    /// The location with this dataset and id, wherever it is placed.
    func location(dataset: String, id: String) -> LocationState? {
        var dataset = dataset
        var id = id
        let key = dataset.withUTF8 { dataset in id.withUTF8 { Self.identityHash(dataset: .init(dataset), id: .init($0)) } }
        let test = { (state: LocationState) in state.address.has(.dataset, dataset) && state.address.has(.location, id) }
        if let one = byIdentity[key] { return test(one) ? one : nil }
        return shared[key]?.first(where: test)
    }

    /// The location with this address's dataset and id, wherever it is placed.
    func location(identityOf address: LocationAddress, identity: UInt64? = nil) -> LocationState? {
        let key = identity ?? Self.identityHash(address)
        if let one = byIdentity[key] { return one.address.hasIdentity(of: address) ? one : nil }
        return shared[key]?.first { $0.address.hasIdentity(of: address) }
    }

    /// The locations of the floor whose summary aggregate this is.
    func locations(floor: SummaryTracker.Aggregate) -> [LocationState] { byFloor[ObjectIdentifier(floor)] ?? [] }
}
