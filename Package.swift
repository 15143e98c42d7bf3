// swift-tools-version: 6.1
import PackageDescription

// Module graph (docs/architecture.md, "Modules"): the pure logic (LiveTopics → DisplayRules →
// LiveState) imports no I/O; persistence (SQLite) and the MQTT client (libmosquitto) are
// modules of their own; the daemon (LiveDataServer) and the executable wire them together.
let package = Package(
    name: "livedata",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "livedata", targets: ["livedata"]),
        .library(name: "LiveTopics", targets: ["LiveTopics"]),
        .library(name: "Mosquitto", targets: ["Mosquitto"]),
        .library(name: "DisplayRules", targets: ["DisplayRules"]),
        .library(name: "LiveState", targets: ["LiveState"]),
        .library(name: "LiveStatePersistence", targets: ["LiveStatePersistence"]),
        .library(name: "LiveDataServer", targets: ["LiveDataServer"]),
        .library(name: "LiveDataConfiguration", targets: ["LiveDataConfiguration"]),
        .library(name: "LiveDataClient", targets: ["LiveDataClient"]),
        // The fuzz targets, for libFuzzer's driver in `Fuzz/` (a package of its own, built
        // with sanitizers by scripts/fuzz).
        .library(name: "FuzzTargets", targets: ["FuzzTargets"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.4"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Tests only: an event-stream viewer over NIO (already under Hummingbird).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // Tests only: child processes (brokers, daemons, tools) with a clean signal mask.
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // libmosquitto's socket calls through user-space buffers (its GOT entries redirected).
        .target(name: "CMosquittoIO"),
        .target(
            name: "Mosquitto",
            dependencies: [
                "CMosquitto",
                "CMosquittoIO",
                "LiveTopics",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "LiveTopics"),
        // What a map client does with the daemon's output (the contract's rules), for
        // `livedata watch` and for Swift clients: no I/O.
        .target(name: "LiveDataClient"),
        .target(name: "DisplayRules", dependencies: ["LiveTopics"]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // The C library's malloc.h: the daemon hands free heap pages back after a start.
        .systemLibrary(name: "CMalloc"),
        // mimalloc: linked into the executable only, its malloc serves the whole daemon.
        .systemLibrary(name: "CMimalloc", providers: [.apt(["libmimalloc-dev"])]),
        .target(name: "CPrefetch"),
        // CRC-32C in hardware where the processor has it (the journal's checksums).
        .target(name: "CChecksum"),
        // The pure core: no C library (CPrefetch is one compiler builtin in a header), no I/O.
        .target(name: "LiveState", dependencies: ["LiveTopics", "DisplayRules", "CPrefetch"]),
        .target(
            name: "LiveStatePersistence",
            dependencies: ["LiveTopics", "DisplayRules", "LiveState", "CSQLite", "CChecksum", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "LiveDataConfiguration",
            dependencies: ["LiveTopics", "DisplayRules", .product(name: "Yams", package: "Yams")]
        ),
        .target(
            name: "LiveDataServer",
            dependencies: [
                "LiveTopics", "DisplayRules", "LiveState", "LiveStatePersistence", "LiveDataConfiguration", "Mosquitto", "CMalloc",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The floor view's page, script and style sheet, compiled in as byte arrays
            // (`PackageResources`): the daemon stays one file, with no bundle beside it.
            resources: [
                .embedInCode("HTTP/Assets/floor.html"),
                .embedInCode("HTTP/Assets/floor.js"),
                .embedInCode("HTTP/Assets/floor.css"),
                .embedInCode("HTTP/Assets/venues.html"),
                .embedInCode("HTTP/Assets/venues.js"),
                .embedInCode("HTTP/Assets/venue.html"),
                .embedInCode("HTTP/Assets/venue.js"),
                .embedInCode("HTTP/Assets/venue.css"),
            ]
        ),
        .executableTarget(
            name: "livedata",
            dependencies: [
                "LiveTopics",
                "Mosquitto",
                "DisplayRules",
                "LiveState",
                "LiveStatePersistence",
                "LiveDataConfiguration",
                "LiveDataServer",
                "LiveDataClient",
                "CMimalloc",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The test kit: brokers, daemons and tools as child processes, an event-stream viewer,
        // and `eventually` for waits with a deadline.
        .target(
            name: "LiveDataTestSupport",
            dependencies: [
                "Mosquitto", "LiveTopics",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/LiveDataTestSupport"
        ),
        .testTarget(name: "LiveDataTestSupportTests", dependencies: ["LiveDataTestSupport"]),
        .testTarget(name: "LiveDataClientTests", dependencies: ["LiveDataClient"]),
        .testTarget(name: "LiveTopicsTests", dependencies: ["LiveTopics", "LiveDataTestSupport"]),
        .testTarget(name: "DisplayRulesTests", dependencies: ["DisplayRules", "LiveTopics", "LiveDataTestSupport"]),
        .testTarget(
            name: "LiveStateTests",
            dependencies: ["LiveState", "LiveStatePersistence", "DisplayRules", "LiveTopics", "LiveDataTestSupport"]
        ),
        .testTarget(
            name: "LiveStatePersistenceTests",
            dependencies: ["LiveStatePersistence", "LiveState", "DisplayRules", "LiveTopics", "LiveDataTestSupport"],
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "LiveDataConfigurationTests", dependencies: ["LiveDataConfiguration", "DisplayRules", "LiveTopics"]),
        .testTarget(name: "MosquittoTests", dependencies: ["Mosquitto", "LiveTopics", "CMosquittoIO"]),
        // Each parser of outside input with the properties that must hold of what it accepts;
        // the tests run every committed input of `Fuzz/Corpus/TARGET` through it.
        .target(
            name: "FuzzTargets",
            dependencies: ["LiveTopics", "DisplayRules", "LiveState", "LiveStatePersistence", "LiveDataConfiguration"],
            path: "Fuzz/Sources/FuzzTargets"
        ),
        .testTarget(name: "FuzzCorpusTests", dependencies: ["FuzzTargets"], path: "Fuzz/Tests/FuzzCorpusTests"),
        // The daemon's parts in process, with no broker: the HTTP routes, the event hub and
        // stream, logging, systemd notification.
        .testTarget(
            name: "LiveDataServerTests",
            dependencies: [
                "LiveDataServer", "LiveDataConfiguration", "LiveTopics", "LiveState", "Mosquitto", "LiveDataTestSupport", "CMalloc",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // A real broker, the whole daemon, the command line.
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "Mosquitto", "LiveTopics", "LiveDataTestSupport", "livedata", "LiveDataServer", "LiveDataConfiguration",
                "LiveState", "LiveStatePersistence", "DisplayRules",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
