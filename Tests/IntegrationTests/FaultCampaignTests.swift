import Foundation
import LiveDataTestSupport
import Testing

/// The fault campaign's short form: `scripts/fault-campaign --short --only FAULT` for each fault
/// of the long form but the soak (the broker killed with and without its store, the disk full,
/// SIGKILL during a restore and during a convergence, the state file truncated, the wall clock
/// stepped, the broker cut off), at 50,000 locations, against the daemon built with the tests,
/// with a broker of its own on a loopback port. The script needs root (a tmpfs, a network
/// namespace) and Debian's `faketime`; without them it refuses, and the test fails.
@Suite("Fault campaign", .timeLimit(.minutes(10)), .serialized)
struct FaultCampaignTests {
    static let faults = [
        "broker-saved", "broker-empty", "disk-full", "kill-restore", "kill-converge", "truncate", "clock", "cut",
    ]

    /// What the script reported for one fault: its exit status, its output, and its entry of
    /// results.json.
    struct Outcome {
        var status: Int32
        var output: String
        var figures: [String: Any]
    }

    func campaign(_ fault: String) async throws -> Outcome {
        let daemon = try CommandRunner().executable
        let runDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("livedata-fault-campaign-\(fault)-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: runDirectory) }
        // The script's own time limit stops it, and everything it started, before the test's.
        let process = try await ChildProcess.start(
            Repository.url("scripts/fault-campaign").path,
            ["--short", "--only", fault, "--livedata", daemon.path, "--run-dir", runDirectory.path, "--time-limit", "500"],
            in: Repository.root)
        let result = try await process.result(timeout: .seconds(560))
        let output = result.standardOutput.split(separator: "\n").suffix(40).joined(separator: "\n") + "\n" + result.standardError
        let data = try? Data(contentsOf: runDirectory.appendingPathComponent("results.json"))
        let results = data.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [[String: Any]] } ?? []
        return Outcome(status: result.status, output: output, figures: results.first { $0["fault"] as? String == fault } ?? [:])
    }

    func check(_ outcome: Outcome, _ fault: String) {
        #expect(outcome.status == 0, "scripts/fault-campaign --short --only \(fault) ended with \(outcome.status):\n\(outcome.output)")
        #expect(outcome.figures["passed"] as? Bool == true, "\(fault): \(outcome.figures["problems"] ?? "no results")")
        #expect(outcome.figures["lost"] as? Int == 0, "\(fault): updates lost: \(outcome.figures["lost"] ?? "not counted")")
        #expect(
            outcome.figures["versions_back"] as? Int == 0,
            "\(fault): versions back: \(outcome.figures["versions_back"] ?? "not counted")")
        #expect((outcome.figures["peak_rss_bytes"] as? Int ?? 0) > 0, "\(fault): no memory sampled")
    }

    @Test("at 50,000 locations the fault loses nothing, sends no version back, and the broker converges", arguments: faults)
    func fault(_ fault: String) async throws {
        let outcome = try await campaign(fault)
        check(outcome, fault)
    }
}
