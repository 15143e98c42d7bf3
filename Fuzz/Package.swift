// swift-tools-version: 6.1
import PackageDescription

// libFuzzer's driver over the fuzz targets (`FuzzTargets`, a module of the main package whose
// sources are in Fuzz/Sources/FuzzTargets), a package of its own so that its build with
// sanitizers never touches the main build: scripts/fuzz TARGET SECONDS builds it with
// -sanitize=fuzzer,address and -DLIBFUZZER; a plain build replays files instead. The main
// package's FuzzCorpusTests (Fuzz/Tests) run every committed input (Corpus/TARGET) through
// its target with the other tests.
let package = Package(
    name: "livedata-fuzz",
    dependencies: [
        .package(name: "livedata", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "LiveDataFuzzer", dependencies: [.product(name: "FuzzTargets", package: "livedata")],
            // Its entry point is a function of its own (see the source), never top-level code.
            swiftSettings: [.unsafeFlags(["-parse-as-library"])]
        )
    ],
    swiftLanguageModes: [.v6]
)
