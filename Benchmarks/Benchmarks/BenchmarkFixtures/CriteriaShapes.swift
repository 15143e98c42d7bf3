import LiveTopics

/// Filters shaped like the criteria real deployments register, and topics to match them with.
///
/// The venue: 10 datasets × 5 venues × 4 buildings × 10 floors × 20 rooms × 10 locations,
/// 5 domains. Filters, all distinct:
/// - 60 % an exact location and domain (`ds3/v1/b2/f7/r12/l4/occupancy`);
/// - 12 % a `+` at one of venue, building, floor, room or location;
/// - 8 % domain criteria with several `+` (`ds3/v1/+/+/+/+/co2`, `ds3/+/b2/f7/+/+/occupancy`);
/// - 10 % `#` tails (`ds3/v1/b2/#`, `ds3/v1/b2/f7/#`, `ds3/v1/b2/f7/r12/#`);
/// - 10 % criteria for other datasets that the topics never hit.
public enum CriteriaShapes {
    public static let domains = ["occupancy", "availability", "co2", "temperature", "position"]

    public static func filters(count: Int, seed: UInt64 = 42) -> [String] {
        var random = SplitMix64(seed: seed)
        var seen = Set<String>()
        var filters: [String] = []
        filters.reserveCapacity(count)
        while filters.count < count {
            var levels = randomLocation(&random)
            let roll = random.next() % 100
            switch roll {
            case 0..<60:
                break
            case 60..<72:
                levels[1 + Int(random.next() % 5)] = "+"
            case 72..<80:
                if random.next() % 2 == 0 {
                    levels = [levels[0], levels[1], "+", "+", "+", "+", levels[6]]
                } else {
                    levels = [levels[0], "+", levels[2], levels[3], "+", "+", levels[6]]
                }
            case 80..<90:
                levels = Array(levels.prefix(3 + Int(random.next() % 3))) + ["#"]
            default:
                levels[0] = "ds\(10 + random.next() % 90)"
                if random.next() % 2 == 0 { levels[5] = "+" }
            }
            let filter = levels.joined(separator: "/")
            if seen.insert(filter).inserted { filters.append(filter) }
        }
        return filters
    }

    public static func topics(count: Int, seed: UInt64 = 7) -> [String] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in randomLocation(&random).joined(separator: "/") }
    }

    static func randomLocation(_ random: inout SplitMix64) -> [String] {
        [
            "ds\(random.next() % 10)", "v\(random.next() % 5)", "b\(random.next() % 4)", "f\(random.next() % 10)",
            "r\(random.next() % 20)", "l\(random.next() % 10)", domains[Int(random.next() % UInt64(domains.count))],
        ]
    }
}

/// A small seeded generator, so every run measures the same filters and topics.
public struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
