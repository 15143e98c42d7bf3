import LiveDataTestSupport
import Testing

/// The documentation points at what exists: every repository path that README.md and
/// docs/*.md name in inline code, and every link and heading anchor between them, checked by
/// scripts/check-doc-paths (which says what it reads and which placeholders it skips).
@Suite("Documentation paths", .timeLimit(.minutes(1)))
struct DocumentationPathTests {
    @Test("scripts/check-doc-paths passes: every path, link and anchor in README.md and docs/ exists")
    func checkDocPaths() async throws {
        let result = try await Repository.runScript("scripts/check-doc-paths")
        #expect(
            result.status == 0,
            "scripts/check-doc-paths exited with \(result.status):\n\(result.standardOutput)\(result.standardError)")
    }
}
