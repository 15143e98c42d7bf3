// swift-tools-version: 6.1
import PackageDescription

// The fuzzing of the parsers of outside input, a package of its own so that the main build
// never carries it:
// - FuzzTargets: each parser as a target that checks more than "no crash";
// - LiveDataFuzzer: libFuzzer's driver over one target, built by scripts/fuzz TARGET SECONDS
//   with -sanitize=fuzzer,address and -DLIBFUZZER; a plain build replays files instead;
// - FuzzCorpusTests: every committed input (Corpus/TARGET) through its target, run by
//   scripts/test after the main package's tests.
let package = Package(
    name: "livedata-fuzz",
    dependencies: [
        .package(name: "livedata", path: "..")
    ],
    targets: [
        .target(
            name: "FuzzTargets",
            dependencies: [
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "DisplayRules", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
                .product(name: "LiveStatePersistence", package: "livedata"),
                .product(name: "LiveDataConfiguration", package: "livedata"),
            ]
        ),
        .executableTarget(
            name: "LiveDataFuzzer", dependencies: ["FuzzTargets"],
            // Its entry point is a function of its own (see the source), never top-level code.
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        ),
        .testTarget(name: "FuzzCorpusTests", dependencies: ["FuzzTargets"]),
    ],
    swiftLanguageModes: [.v6]
)
