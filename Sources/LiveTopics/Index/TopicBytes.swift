/// A topic's bytes read eight at a time: every topic that reaches the index, and every new
/// location's topic, is scanned for its slashes and for the bytes a topic name may not hold,
/// and a byte at a time that scan cost more than the rest of the match.
enum TopicBytes {
    /// Calls `slash` with the position of every `/`, in order, until it returns `false`.
    /// - Returns: `nil` when a byte is `+`, `#` or NUL, or `slash` returned `false`;
    ///   otherwise whether every byte is ASCII.
    @inline(__always)
    static func scan(_ bytes: UnsafeRawBufferPointer, slash: (Int) -> Bool) -> Bool? {
        let count = bytes.count
        var highBits: UInt64 = 0
        var index = 0
        while index < count {
            var word: UInt64
            if index + 8 <= count {
                word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
            } else if count >= 8 {
                // The last bytes, in a word that overlaps the one before: the bytes already
                // read are shifted out, and a byte that is none of those looked for shifted in.
                let shift = UInt64(index + 8 - count) * 8
                word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)) &>> shift
                word |= padding &<< (64 - shift)
            } else {
                word = padding
                for offset in 0..<count {
                    let shift = UInt64(offset * 8)
                    word = word & ~(0xFF &<< shift) | UInt64(bytes[offset]) &<< shift
                }
            }
            highBits |= word
            let forbidden = contains(UInt8(ascii: "+"), word) | contains(UInt8(ascii: "#"), word) | contains(0, word)
            if forbidden != 0 { return nil }
            var slashes = positions(of: UInt8(ascii: "/"), in: word)
            while slashes != 0 {
                // Little-endian: the lowest flagged byte comes first.
                guard slash(index + slashes.trailingZeroBitCount >> 3) else { return nil }
                slashes &= slashes &- 1
            }
            index += 8
        }
        return highBits & 0x8080_8080_8080_8080 == 0
    }

    /// Fills a word past a topic's last byte: `a`, which no test looks for.
    private static let padding: UInt64 = 0x6161_6161_6161_6161
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Not zero when a byte of `word` is `byte` (the usual "has a zero byte" test: flags
    /// above a true match may be false, so it tells whether, not where).
    @inline(__always)
    private static func contains(_ byte: UInt8, _ word: UInt64) -> UInt64 {
        let x = word ^ (ones &* UInt64(byte))
        return (x &- ones) & ~x & highs
    }

    /// The high bit of every byte of `word` that is `byte`, and of no other: exact, so that
    /// each flag is a position.
    @inline(__always)
    private static func positions(of byte: UInt8, in word: UInt64) -> UInt64 {
        let x = word ^ (ones &* UInt64(byte))
        let low = ~highs
        return ~(((x & low) &+ low) | x | low)
    }
}
