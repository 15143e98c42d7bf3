// swift-tools-version: 6.1
import PackageDescription

// A package of its own so that the main build never pulls in the benchmark harness. It links
// the pure modules only (and persistence for the restore): no MQTT client, no HTTP server.
// Run from this directory: swift package benchmark
let package = Package(
    name: "livedata-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Named, because a path dependency is otherwise known by its folder name.
        .package(name: "livedata", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibMosquitto",
            path: "Benchmarks/CLibMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // The reference the topic index is measured against: libmosquitto's own matching, one
        // filter after another.
        .target(
            name: "LinearTopicMatcher",
            dependencies: ["CLibMosquitto"],
            path: "Benchmarks/LinearTopicMatcher"
        ),
        .target(
            name: "BenchmarkFixtures",
            dependencies: [
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "DisplayRules", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
            ],
            path: "Benchmarks/BenchmarkFixtures"
        ),
        .executableTarget(
            name: "TopicIndexBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                "LinearTopicMatcher",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LiveTopics", package: "livedata"),
            ],
            path: "Benchmarks/TopicIndexBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "PayloadDecodingBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LiveTopics", package: "livedata"),
            ],
            path: "Benchmarks/PayloadDecodingBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "PipelineBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
            ],
            path: "Benchmarks/PipelineBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "MemoryBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
            ],
            path: "Benchmarks/MemoryBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "RestoreBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
                .product(name: "LiveStatePersistence", package: "livedata"),
            ],
            path: "Benchmarks/RestoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "StyleBenchmarks",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "DisplayRules", package: "livedata"),
            ],
            path: "Benchmarks/StyleBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Not a benchmark: the pipeline's work as a plain program, for callgrind.
        .executableTarget(
            name: "PipelineProbe",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
            ],
            path: "Probes/PipelineProbe"
        ),
        // Not a benchmark: the end-to-end fill's work on the pipeline thread (a new location
        // and its published style per update), as a plain program, for callgrind.
        .executableTarget(
            name: "FillProbe",
            dependencies: [
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "DisplayRules", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
                .product(name: "LiveStatePersistence", package: "livedata"),
            ],
            path: "Probes/FillProbe"
        ),
        // Not a benchmark: what a changed style costs once found (StyleBenchmarks' work),
        // as a plain program, for callgrind and alternating runs.
        .executableTarget(
            name: "StyleProbe",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "DisplayRules", package: "livedata"),
            ],
            path: "Probes/StyleProbe"
        ),
        // The start (restore and journal replay) as a plain program, for perf.
        .executableTarget(
            name: "StartProbe",
            dependencies: [
                "BenchmarkFixtures",
                .product(name: "LiveTopics", package: "livedata"),
                .product(name: "LiveState", package: "livedata"),
                .product(name: "LiveStatePersistence", package: "livedata"),
            ],
            path: "Probes/StartProbe"
        ),
    ],
    swiftLanguageModes: [.v6]
)
