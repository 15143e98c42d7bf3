import DisplayRules
import LiveState
import LiveTopics

/// Records in the state file's form (``RecordCodec``), one after the other in one buffer,
/// with their rows: what a snapshot hands the writer. Encoded on the pipeline's thread from
/// the locations in place (``init(_:in:of:)``), so that no record is built, copied across
/// threads and destroyed on the writer's: building the records, copying them into the
/// writer's array and releasing them there would cost about as much as encoding them.
public struct EncodedRecords: Sendable {
    /// The rows, in the order the records are in.
    public private(set) var rows: [Int64] = []
    /// Where each record ends in `bytes`.
    private var ends: [Int] = []
    private var bytes: ByteWriter

    public var count: Int { rows.count }
    public var isEmpty: Bool { rows.isEmpty }

    /// Room for about `capacity` records.
    public init(capacity: Int = 0) {
        rows.reserveCapacity(capacity)
        ends.reserveCapacity(capacity)
        bytes = ByteWriter(capacity: max(capacity, 1) * 256)
    }

    /// The records of the changed locations in `range`, as they are now. A style that
    /// locations share through their key's kept rendering is encoded for the first of them;
    /// the others copy its bytes (a venue holds few distinct styles, and encoding each
    /// location's again is a large part of a snapshot's work: docs/performance.md).
    public init(_ changed: LiveStore.ChangedLocations, in range: Range<Int>, of core: LiveCore) {
        self.init(changed, in: range, of: core.store)
    }

    /// ``init(_:in:of:)-(_,_,LiveCore)`` over the store itself.
    public init(_ changed: LiveStore.ChangedLocations, in range: Range<Int>, of store: LiveStore) {
        self.init(capacity: range.count)
        // Each rendering is held here while its bytes are looked up by its identity, so
        // that no other object can take that identity meanwhile.
        var encoded: [ObjectIdentifier: (rendering: RenderedStyle, bytes: Range<Int>)] = [:]
        store.forEachRecord(changed, in: range) { row, address, values, published, version in
            RecordCodec.encode(address: address, values: values, version: version, into: &bytes)
            switch published {
            case .none:
                RecordCodec.encode(published: nil, into: &bytes)
            case .derived(let derived):
                RecordCodec.encode(published: derived, into: &bytes)
            case .kept(let rendering):
                let identity = ObjectIdentifier(rendering)
                if let earlier = encoded[identity] {
                    bytes.appendCopy(of: earlier.bytes)
                } else {
                    let start = bytes.count
                    RecordCodec.encode(published: rendering.derived, into: &bytes)
                    encoded[identity] = (rendering, start..<bytes.count)
                }
            }
            rows.append(row)
            ends.append(bytes.count)
        }
    }

    /// These records.
    public init(_ records: [LocationRow]) {
        self.init(capacity: records.count)
        for record in records { append(record) }
    }

    public mutating func append(_ record: LocationRow) {
        RecordCodec.encode(record.record, into: &bytes, appending: true)
        rows.append(record.row)
        ends.append(bytes.count)
    }

    /// Lends the buffer and a function that finds record `index`'s bytes in it.
    func withRecords<Result, Failure: Error>(
        _ body: (_ record: (Int) -> UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try ends.withUnsafeBufferPointer { ends throws(Failure) in
            try bytes.withUnsafeBytes { (buffer) throws(Failure) in
                try body { index in
                    let start = index == 0 ? 0 : ends[index - 1]
                    return UnsafeRawBufferPointer(rebasing: buffer[start..<ends[index]])
                }
            }
        }
    }
}
