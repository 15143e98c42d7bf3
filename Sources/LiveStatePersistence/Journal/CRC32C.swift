import CChecksum

/// CRC-32C (Castagnoli), the checksum of each journal record: the processor's own
/// instruction where it has one (eight bytes a step), else slicing by 8 (a 100-byte record
/// costs a few dozen table reads). Every message received is checksummed on the network
/// thread as it is journaled.
enum CRC32C {
    /// Whether the processor's instruction is used.
    static let inHardware = livedata_crc32c_available() != 0

    /// Eight 256-entry tables: `tables[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
    static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            tables[byte] = crc
        }
        for byte in 0..<256 {
            var crc = tables[byte]
            for slice in 1..<8 {
                crc = (crc >> 8) ^ tables[Int(crc & 0xFF)]
                tables[slice * 256 + byte] = crc
            }
        }
        return tables
    }()

    /// The checksum of `bytes`, continuing from `crc` (the checksum of what came before).
    static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard inHardware, let base = bytes.baseAddress else { return tableChecksum(bytes, continuing: crc) }
        return ~livedata_crc32c(~crc, base, bytes.count)
    }

    /// ``checksum(_:continuing:)`` from the tables, whatever the processor has.
    static func tableChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var crc = ~crc
        var index = 0
        let count = bytes.count
        tables.withUnsafeBufferPointer { table in
            while count - index >= 8 {
                let word = bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self).littleEndian ^ UInt64(crc)
                crc =
                    table[7 * 256 + Int(word & 0xFF)] ^ table[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ table[5 * 256 + Int((word >> 16) & 0xFF)] ^ table[4 * 256 + Int((word >> 24) & 0xFF)]
                    ^ table[3 * 256 + Int((word >> 32) & 0xFF)] ^ table[2 * 256 + Int((word >> 40) & 0xFF)]
                    ^ table[1 * 256 + Int((word >> 48) & 0xFF)] ^ table[Int(word >> 56)]
                index += 8
            }
            while index < count {
                crc = (crc >> 8) ^ table[Int((crc ^ UInt32(bytes[index])) & 0xFF)]
                index += 1
            }
        }
        return ~crc
    }
}
