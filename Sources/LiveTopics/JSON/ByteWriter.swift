/// A growing buffer of bytes written through a pointer: one capacity check per piece, then
/// stores, where `Array.append` checks uniqueness and capacity for every piece and byte.
/// What the daemon writes for every change goes through one: the published JSON
/// (``JSONStream``) and the state file's records.
///
/// A copy is a buffer of its own: the storage is shared until one of them writes. So it can
/// be handed from one thread to another as an array can (`@unchecked`: the check that
/// a writer holds the only reference is the one an array makes).
public struct ByteWriter: @unchecked Sendable {
    /// Owns the storage; shared by copies until one of them writes.
    @usableFromInline
    final class Owner {
        @usableFromInline let base: UnsafeMutablePointer<UInt8>

        @usableFromInline
        init(capacity: Int) {
            base = .allocate(capacity: capacity)
        }

        deinit { base.deallocate() }
    }

    @usableFromInline var owner: Owner
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    /// Bytes written.
    public var count: Int

    public init(capacity: Int = 256) {
        let capacity = max(capacity, 16)
        owner = Owner(capacity: capacity)
        base = owner.base
        self.capacity = capacity
        count = 0
    }

    /// The bytes (a copy).
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Lends the bytes written so far, without a copy.
    @inlinable
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Empties the buffer and keeps its storage.
    @inlinable
    public mutating func reset() { count = 0 }

    /// Room for `needed` more bytes: where to write them (then ``advance(_:)`` by what was written).
    @inlinable
    public mutating func room(_ needed: Int) -> UnsafeMutablePointer<UInt8> {
        if !isKnownUniquelyReferenced(&owner) || count + needed > capacity { grow(count + needed) }
        return base + count
    }

    /// Counts `written` bytes written at ``room(_:)``.
    @inlinable
    public mutating func advance(_ written: Int) { count += written }

    @inlinable
    public mutating func append(_ byte: UInt8) {
        room(1).pointee = byte
        count += 1
    }

    @inlinable
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        let at = room(bytes.count)
        if let source = bytes.baseAddress, bytes.count > 0 { at.update(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count) }
        count += bytes.count
    }

    /// Writes again bytes this buffer already holds, at `range`, after what it holds.
    @inlinable
    public mutating func appendCopy(of range: Range<Int>) {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "a copy of bytes not written")
        let at = room(range.count)
        at.update(from: base + range.lowerBound, count: range.count)
        count += range.count
    }

    /// A string's UTF-8.
    @inlinable
    public mutating func append(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) != nil { return }
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// A variable-length unsigned integer: seven bits a byte, low first, the high bit set on
    /// all but the last.
    @inlinable
    public mutating func appendVarint(_ value: UInt64) {
        count += Self.putVarint(value, at: room(10))
    }

    /// Writes ``appendVarint(_:)``'s bytes at `at` (room for up to 10), for a writer that
    /// took room for several pieces at once; returns how many it wrote.
    @inlinable
    public static func putVarint(_ value: UInt64, at: UnsafeMutablePointer<UInt8>) -> Int {
        var value = value
        var index = 0
        while value >= 0x80 {
            at[index] = UInt8(truncatingIfNeeded: value) | 0x80
            value >>= 7
            index += 1
        }
        at[index] = UInt8(value)
        return index + 1
    }

    /// A buffer of this writer's own with room for `needed` bytes in all.
    @usableFromInline
    mutating func grow(_ needed: Int) {
        let capacity = max(needed, self.capacity * 2)
        let owner = Owner(capacity: capacity)
        owner.base.initialize(from: base, count: count)
        self.owner = owner
        base = owner.base
        self.capacity = capacity
    }
}
