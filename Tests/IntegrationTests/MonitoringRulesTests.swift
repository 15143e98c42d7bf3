import LiveDataTestSupport
import Testing

/// The operators' monitoring kit (config/prometheus, config/grafana), checked by Prometheus's
/// own tools through scripts/check-monitoring: the alerting rules load and pass their unit
/// tests, the dashboard is valid JSON with valid queries, and every metric they name is one
/// the daemon exports.
@Suite("Monitoring rules and dashboard", .timeLimit(.minutes(1)))
struct MonitoringRulesTests {
    @Test("scripts/check-monitoring passes: promtool checks and tests the alerts, and only exported metrics are named")
    func checkMonitoring() async throws {
        let result = try await Repository.runScript("scripts/check-monitoring")
        // Without promtool the script fails with the way to install it (apt-get install -y
        // prometheus), and so does this test: a check that was never run is not a pass.
        #expect(
            result.status == 0,
            "scripts/check-monitoring exited with \(result.status):\n\(result.standardOutput)\(result.standardError)")
    }
}
