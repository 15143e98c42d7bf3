// swift-tools-version: 6.1
import PackageDescription

// libFuzzer over the parsers of outside input (see Sources/FuzzTargets in the main package).
// A package of its own: it is built with -sanitize=fuzzer,address, which the main build is
// not. Run it through scripts/fuzz TARGET SECONDS.
let package = Package(
    name: "livedata-fuzz",
    dependencies: [
        .package(name: "livedata", path: "..")
    ],
    targets: [
        .executableTarget(
            name: "LiveDataFuzzer",
            dependencies: [.product(name: "FuzzTargets", package: "livedata")]
        )
    ],
    swiftLanguageModes: [.v6]
)
