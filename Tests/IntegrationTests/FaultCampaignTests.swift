import Foundation
import LiveDataTestSupport
import Testing

/// The fault campaign's short form: `scripts/fault-campaign --short` runs every fault of the
/// long form but the soak (the broker killed with and without its store, the disk full, SIGKILL
/// during a restore and during a convergence, the state file truncated, the wall clock stepped,
/// the broker cut off) at 50,000 locations against the daemon built with the tests, with its own
/// brokers on loopback ports. It needs root (a tmpfs, a network namespace) and libfaketime
/// (Debian's `faketime`); without them the script refuses, and so this test fails.
@Suite("Fault campaign", .timeLimit(.minutes(15)), .serialized)
struct FaultCampaignTests {
    static let faults = [
        "broker-saved", "broker-empty", "disk-full", "kill-restore", "kill-converge", "truncate", "clock", "cut",
    ]

    @Test("every fault at 50,000 locations: nothing lost, no version back, converged again")
    func shortCampaign() async throws {
        let daemon = try CommandRunner().executable
        let runDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("livedata-fault-campaign-test-\(UUID().uuidString)")
        // The script's own time limit ends it, and everything it started, before the test's does.
        let campaign = try await ChildProcess.start(
            Repository.url("scripts/fault-campaign").path,
            ["--short", "--livedata", daemon.path, "--run-dir", runDirectory.path, "--time-limit", "780"],
            in: Repository.root)
        let result = try await campaign.result(timeout: .seconds(840))
        let report = result.standardOutput.split(separator: "\n").suffix(60).joined(separator: "\n")
        #expect(result.status == 0, "scripts/fault-campaign --short ended with \(result.status):\n\(report)\n\(result.standardError)")
        // The summary's line of each fault: its name, figures, and "pass".
        let lines = result.outputLines
        for fault in Self.faults {
            let line = lines.last { $0.hasPrefix(fault + " ") }
            #expect(line?.hasSuffix("pass") == true, "\(fault): \(line ?? "no summary line")")
        }
        #expect(lines.contains("RESULT: PASS"), "\(report)")
        let results = try JSONSerialization.jsonObject(
            with: Data(contentsOf: runDirectory.appendingPathComponent("results.json"))) as? [[String: Any]] ?? []
        #expect(results.map { $0["fault"] as? String } == Self.faults.map { Optional($0) })
        for fault in results {
            let name = fault["fault"] as? String ?? "?"
            #expect(fault["lost"] as? Int == 0, "\(name): updates lost \(fault["lost"] ?? "none counted")")
            #expect(fault["versions_back"] as? Int == 0, "\(name): versions back \(fault["versions_back"] ?? "none counted")")
            #expect((fault["peak_rss_bytes"] as? Int ?? 0) > 0, "\(name): no memory sampled")
        }
        try? FileManager.default.removeItem(at: runDirectory)
    }
}
