/// Which rules applied, one bit per rule in application order: compared on every update
/// instead of lists of names. Up to 128 rules fit without allocating.
public struct RuleSelection: Hashable, Sendable {
    var low: UInt64 = 0
    var high: UInt64 = 0
    var overflow: [UInt64]?

    init(ruleCount: Int) {
        if ruleCount > 128 { overflow = Array(repeating: 0, count: (ruleCount - 128 + 63) / 64) }
    }

    /// Every one of `ruleCount` rules.
    static func all(ruleCount: Int) -> RuleSelection {
        var selection = RuleSelection(ruleCount: ruleCount)
        for index in 0..<ruleCount { selection.insert(index) }
        return selection
    }

    /// The selection folded into one word, for a cheap hash (selections that differ may
    /// share it).
    public var fingerprint: UInt64 {
        var word = low ^ (high &* 0x9E37_79B9_7F4A_7C15)
        if let overflow {
            for part in overflow { word = (word ^ part) &* 0xA076_1D64_78BD_642F }
        }
        return word
    }

    @inline(__always)
    func contains(_ index: Int) -> Bool {
        switch index {
        case 0..<64: low & (1 << UInt64(index)) != 0
        case 64..<128: high & (1 << UInt64(index - 64)) != 0
        default: overflow![(index - 128) >> 6] & (1 << UInt64(index & 63)) != 0
        }
    }

    /// The rules in either selection.
    func union(_ other: RuleSelection) -> RuleSelection {
        var result = self
        result.low |= other.low
        result.high |= other.high
        if let overflow = other.overflow {
            result.overflow = zip(result.overflow ?? overflow.map { _ in 0 }, overflow).map { $0 | $1 }
        }
        return result
    }

    /// The rules in this selection and not in `other`.
    func subtracting(_ other: RuleSelection) -> RuleSelection {
        var result = self
        result.low &= ~other.low
        result.high &= ~other.high
        if let overflow, let others = other.overflow {
            result.overflow = zip(overflow, others).map { $0 & ~$1 }
        }
        return result
    }

    /// Calls `body` with each selected rule, lowest first.
    @inline(__always)
    func forEach(_ body: (Int) -> Void) {
        func visit(_ word: UInt64, _ offset: Int) {
            var bits = word
            while bits != 0 {
                body(offset + bits.trailingZeroBitCount)
                bits &= bits &- 1
            }
        }
        visit(low, 0)
        visit(high, 64)
        if let overflow {
            for (index, word) in overflow.enumerated() { visit(word, 128 + index * 64) }
        }
    }

    @inline(__always)
    mutating func insert(_ index: Int) {
        switch index {
        case 0..<64: low |= 1 << UInt64(index)
        case 64..<128: high |= 1 << UInt64(index - 64)
        default: overflow![(index - 128) >> 6] |= 1 << UInt64(index & 63)
        }
    }

    /// The highest rule selected in both, if any.
    @inline(__always)
    func last(in mask: RuleSelection) -> Int? {
        if let overflow, let other = mask.overflow {
            for index in overflow.indices.reversed() {
                let both = overflow[index] & other[index]
                if both != 0 { return 128 + index * 64 + 63 - both.leadingZeroBitCount }
            }
        }
        if high & mask.high != 0 { return 64 + 63 - (high & mask.high).leadingZeroBitCount }
        if low & mask.low != 0 { return 63 - (low & mask.low).leadingZeroBitCount }
        return nil
    }

    /// How many rules are selected.
    var count: Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    /// The words, lowest rules first.
    var words: [UInt64] { [low, high] + (overflow ?? []) }
}
