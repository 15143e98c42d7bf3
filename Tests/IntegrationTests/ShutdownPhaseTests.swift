import DisplayRules
import Foundation
import LiveDataTestSupport
import LiveState
import LiveStatePersistence
import LiveTopics
import Testing

/// No stop waits forever: SIGTERM in each phase of a start, and of a start that fails, ends
/// the daemon within a few seconds, with exit 0 for a clean stop.
@Suite("SIGTERM in every phase of a start", .serialized, .timeLimit(.minutes(5)))
struct ShutdownPhaseTests {
    /// From SIGTERM to the exit.
    static let bound = Duration.seconds(5)
    /// From SIGTERM to the exit during the first convergence: the stop waits up to 2 s for
    /// the broker to acknowledge `offline` behind the convergence's publications, then writes
    /// every location to the state file.
    static let convergingBound = Duration.seconds(8)
    /// Locations of the state file the restore phases read: enough that the restore lasts
    /// well over the time it takes to see it start.
    static let storedLocations = 300_000
    /// Locations of the state file of the convergence phase: its first convergence publishes
    /// every style again (the broker is empty) for seconds; fewer than the restore's, as the
    /// stop writes them all to the state file.
    static let convergedLocations = 100_000

    enum Phase: String, CaseIterable, CustomTestStringConvertible {
        /// The broker refuses connections: the daemon retries.
        case waitingForBroker
        /// Restoring a large state file.
        case restoring
        /// Connected, publishing the restored styles in the first convergence.
        case converging
        /// Ready.
        case serving
        /// The HTTP address is taken while a large state file is restored: the start is
        /// failing as the signal comes.
        case failingStart

        var testDescription: String { rawValue }
    }

    static func yaml(brokerPort: Int, store: String, listen: String = "127.0.0.1:0") -> String {
        var file = DaemonConfigFile(brokerPort: brokerPort, clientId: "shutdown-phase-test", store: store)
        file.listen = listen
        return file.yaml
    }

    /// A state file of `count` locations, each with an occupancy value and no style yet.
    static func writeStateFile(_ path: String, count: Int) throws {
        let database = try StateDatabase(path: path)
        let now = LiveTimestamp.now
        var rows: [LocationRow] = []
        rows.reserveCapacity(10_000)
        for index in 1...count {
            let address = LocationAddress(
                dataset: "ds1", venue: "hq", building: "B\(index % 10)", floor: "F\(index % 7)", room: "R\(index % 100)",
                location: "loc-\(index)")
            let value = DomainValue(domain: "occupancy", properties: ["nrOfPeople": "\(index % 3)", "capacity": "8"], timestamp: now)
            rows.append(LocationRow(row: Int64(index), record: LocationRecord(address: address, values: [value], version: 1)))
            if rows.count == 10_000 || index == count {
                try database.write(rows)
                rows.removeAll(keepingCapacity: true)
            }
        }
    }

    /// Whether a `STATUS=` line sent so far starts with `prefix`.
    static func saidStatus(_ notify: NotifySocket, startingWith prefix: String) -> Bool {
        notify.messages.contains { $0.split(separator: "\n").contains { $0.hasPrefix("STATUS=" + prefix) } }
    }

    @Test("SIGTERM ends the daemon within a few seconds", arguments: Phase.allCases)
    func stop(in phase: Phase) async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let directory = try TestDirectory.make(prefix: "shutdown-\(phase.rawValue)")
        let store = directory.appendingPathComponent("state.db").path
        let configPath = directory.appendingPathComponent("livedata.yaml").path
        var held: HeldPort?
        defer { held?.close() }
        let yaml: String
        switch phase {
        case .waitingForBroker:
            yaml = Self.yaml(brokerPort: try freeLoopbackPort(), store: store)
        case .restoring:
            try Self.writeStateFile(store, count: Self.storedLocations)
            yaml = Self.yaml(brokerPort: broker.port, store: store)
        case .converging:
            try Self.writeStateFile(store, count: Self.convergedLocations)
            yaml = Self.yaml(brokerPort: broker.port, store: store)
        case .serving:
            yaml = Self.yaml(brokerPort: broker.port, store: store)
        case .failingStart:
            try Self.writeStateFile(store, count: Self.storedLocations)
            held = try HeldPort()
            yaml = Self.yaml(brokerPort: broker.port, store: store, listen: "127.0.0.1:\(held?.port ?? 0)")
        }
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
        let notify = try NotifySocket()
        let running = try await CommandRunner().start(["serve", "--config", configPath], environment: ["NOTIFY_SOCKET": notify.path])

        switch phase {
        case .waitingForBroker:
            try await eventually("a refused connection logged", timeout: .seconds(10), every: .milliseconds(50)) {
                running.standardError.contains("refused")
            }
        case .restoring, .failingStart:
            // Said from inside the service group: its signal handlers are in place.
            try await eventually("the restore to start", timeout: .seconds(20), every: .milliseconds(5)) {
                Self.saidStatus(notify, startingWith: "restoring")
            }
        case .converging:
            try await eventually("the first convergence to start", timeout: .seconds(60), every: .milliseconds(5)) {
                Self.saidStatus(notify, startingWith: "connected to")
            }
            #expect(!notify.messages.contains { $0.contains("READY=1") }, "still converging as the signal comes")
        case .serving:
            #expect(await notify.wait(for: "READY=1", timeout: .seconds(30)), "\(running.standardError.suffix(2000))")
        }
        let baseline = try await CommandRunner().startBaseline()
        let signalledAt = ContinuousClock.now
        running.signal(SIGTERM)
        let result = try await running.result(timeout: .seconds(30))
        let took = max(.zero, ContinuousClock.now - signalledAt - baseline)
        #expect(took <= (phase == .converging ? Self.convergingBound : Self.bound), "\(phase): exited \(took) after SIGTERM\n\(result.standardError.suffix(3000))")
        switch phase {
        case .failingStart:
            // The signal and the failure race: a stop (0) or the failure (1), never a hang.
            #expect([0, 1].contains(result.status), "\(result.standardError.suffix(3000))")
        default:
            #expect(result.status == 0, "\(phase): exit \(result.status)\n\(result.standardError.suffix(3000))")
        }
        switch phase {
        case .restoring:
            #expect(result.standardError.contains("stopped during the start"), "the signal came during the restore")
            #expect(!result.standardError.contains("restored \(Self.storedLocations) locations"), "the restore stopped short")
        case .failingStart:
            #expect(result.standardError.contains("cannot listen on 127.0.0.1:"), "\(result.standardError.suffix(2000))")
        case .converging:
            #expect(!result.standardError.contains("stopped during the start"), "the signal came after the restore")
            #expect(!result.standardError.contains("ready store.locations"), "the signal came before the daemon was ready")
        default:
            break
        }
        print("shutdown: SIGTERM while \(phase.rawValue): exit \(result.status) after \(took)")
    }
}
