import LiveDataTestSupport
import Testing

@testable import LiveTopics

@Suite("A topic's bytes read eight at a time")
struct TopicBytesTests {
    /// What the scan should find, a byte at a time: the slashes, or `nil` for a byte a topic
    /// name may not hold; and whether every byte is ASCII.
    static func reference(_ bytes: [UInt8]) -> (slashes: [Int], ascii: Bool)? {
        if bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 }) { return nil }
        return (bytes.indices.filter { bytes[$0] == UInt8(ascii: "/") }, bytes.allSatisfy { $0 < 0x80 })
    }

    static func scanned(_ bytes: [UInt8]) -> (slashes: [Int], ascii: Bool)? {
        var slashes: [Int] = []
        let ascii = bytes.withUnsafeBytes { bytes in
            TopicBytes.scan(bytes) { slash in
                slashes.append(slash)
                return true
            }
        }
        return ascii.map { (slashes, $0) }
    }

    @Test(
        "one byte of each kind at every place of topics up to three words long (a whole word, the overlapping last one, a short topic)",
        arguments: [
            UInt8(ascii: "/"), UInt8(ascii: "+"), UInt8(ascii: "#"), 0, 0xC3, 0x7F, 0x80, UInt8(ascii: "a"), UInt8(ascii: "."),
            0x2F | 0x80,
        ] as [UInt8])
    func everyPlace(byte: UInt8) {
        for count in 1...24 {
            for place in 0..<count {
                // Slashes elsewhere too, so that positions before and after the byte are checked.
                var bytes = (0..<count).map { $0 % 5 == 4 ? UInt8(ascii: "/") : UInt8(ascii: "x") }
                bytes[place] = byte
                let expected = Self.reference(bytes)
                let found = Self.scanned(bytes)
                #expect(found?.slashes == expected?.slashes && found?.ascii == expected?.ascii, "\(bytes) \(count) \(place)")
            }
        }
    }

    @Test("random topics are read as a byte at a time reads them")
    func random() {
        var random = SplitMix64(seed: 7)
        let alphabet: [UInt8] = [UInt8(ascii: "/"), UInt8(ascii: "a"), UInt8(ascii: "0"), 0xE2, 0x82, 0xAC, UInt8(ascii: "$")]
        for _ in 0..<5000 {
            let count = Int(random.next() % 80)
            var bytes = (0..<count).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
            if count > 0, random.next() % 4 == 0 {
                bytes[Int(random.next() % UInt64(count))] = [UInt8(ascii: "+"), UInt8(ascii: "#"), 0][Int(random.next() % 3)]
            }
            let expected = Self.reference(bytes)
            let found = Self.scanned(bytes)
            #expect(found?.slashes == expected?.slashes && found?.ascii == expected?.ascii, "\(bytes)")
        }
    }

    @Test("the scan stops at the slash its caller refuses")
    func stops() {
        var seen: [Int] = []
        let result = Array("a/b/c/d".utf8).withUnsafeBytes { bytes in
            TopicBytes.scan(bytes) { slash in
                seen.append(slash)
                return seen.count < 2
            }
        }
        #expect(result == nil)
        #expect(seen == [1, 3])
    }
}
