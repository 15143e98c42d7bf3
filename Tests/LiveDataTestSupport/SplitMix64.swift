import Foundation
import Testing

/// A small seeded random generator, so that a failing random case can be replayed.
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

extension SplitMix64 {
    /// The environment variable that replays a run's random choices.
    public static let seedVariable = "LIVEDATA_TEST_SEED"

    /// A seed for `what`: `$LIVEDATA_TEST_SEED` when it is set, so that a failing run can be
    /// replayed, else a fresh one. Printed either way, with how to replay it.
    public static func testSeed(
        _ what: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> UInt64 {
        var seed = UInt64.random(in: 0...UInt64.max)
        if let text = environment[seedVariable] {
            if let given = UInt64(text) {
                seed = given
            } else {
                Issue.record("\(seedVariable)=\(text) is not a seed (a number from 0 to \(UInt64.max))", sourceLocation: sourceLocation)
            }
        }
        print("\(what): seed \(seed) (\(seedVariable)=\(seed) replays it)")
        return seed
    }

    /// A generator seeded by ``testSeed(_:environment:sourceLocation:)``.
    public static func seeded(
        for what: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> SplitMix64 {
        SplitMix64(seed: testSeed(what, environment: environment, sourceLocation: sourceLocation))
    }
}
