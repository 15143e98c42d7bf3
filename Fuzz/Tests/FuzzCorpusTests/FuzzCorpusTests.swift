import Foundation
import FuzzTargets
import Testing

/// Every file of each fuzz target's corpus (`Fuzz/Corpus/TARGET/`: the seeds, and every
/// input that once failed) run through the target as a test: what fuzzing found stays fixed.
@Suite("Fuzz corpora")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Corpus")

    @Test("each corpus file runs through its target without a trap or a broken property", arguments: FuzzTargets.names)
    func corpus(target: String) throws {
        let folder = Self.corpus.appendingPathComponent(target)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files.count >= 5, "the \(target) corpus has seeds")
        for file in files {
            let data = try Data(contentsOf: folder.appendingPathComponent(file))
            data.withUnsafeBytes { FuzzTargets.run(target, $0) }
        }
    }
}
