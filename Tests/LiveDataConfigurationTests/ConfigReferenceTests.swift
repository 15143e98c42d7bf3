import Foundation
import LiveDataConfiguration
import Testing

/// The README's configuration reference lists every key the loader reads, and nothing else.
@Suite("Configuration reference")
struct ConfigReferenceTests {
    /// The rows of the README's "Configuration reference" table: key, type, default, meaning.
    static func referenceRows() throws -> [[String]] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let start = text.range(of: "\n## Configuration reference\n") else { return [] }
        let section = text[start.upperBound...].prefix { _ in true }
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        return section[..<end].split(separator: "\n").filter { $0.hasPrefix("| `") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    @Test("every key the loader reads has a row, and every row is a key the loader reads")
    func keysMatchTheLoader() throws {
        let rows = try Self.referenceRows()
        #expect(!rows.isEmpty, "README.md has no \"## Configuration reference\" table")
        let documented = rows.map { $0[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
        let known = ConfigKeys.paths
        let missing = known.filter { !documented.contains($0) }
        let unknown = documented.filter { !known.contains($0) }
        #expect(missing.isEmpty, "keys the loader reads that README.md does not document: \(missing)")
        #expect(unknown.isEmpty, "README.md documents keys the loader does not read: \(unknown)")
        #expect(Set(documented).count == documented.count, "a key documented twice: \(documented)")
    }

    @Test("every row gives a type and a meaning")
    func rowsAreComplete() throws {
        for row in try Self.referenceRows() {
            #expect(row.count == 4, "\(row[0]): expected key | type | default | meaning")
            guard row.count == 4 else { continue }
            #expect(!row[1].isEmpty, "\(row[0]) has no type")
            #expect(!row[3].isEmpty, "\(row[0]) has no meaning")
        }
    }

    @Test("the default the reference gives a switch is the loader's")
    func switchDefaultsMatchTheLoader() throws {
        // Each switch the reference gives a plain `true` or `false` for.
        let switches: [String: KeyPath<LiveDataConfig, Bool>] = [
            "broker.cleanStart": \.broker.cleanStart,
            "broker.bufferedSocket": \.broker.bufferedSocket,
            "broker.outputConnection": \.broker.outputConnection,
            "output.retain": \.output.retain,
        ]
        let defaults = try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml")
        for row in try Self.referenceRows() where row.count == 4 && row[1] == "boolean" {
            let key = row[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            guard let documented = ["`true`": true, "`false`": false][row[2]] else { continue }
            guard let path = switches[key] else {
                Issue.record("\(key): add it to the switches of this test")
                continue
            }
            #expect(defaults[keyPath: path] == documented, "README.md gives \(key) the default \(row[2])")
        }
    }

    @Test("the loader refuses a key the reference does not list, naming the section's keys")
    func unknownKeyRefused() {
        var message = ""
        do throws(ConfigErrors) {
            _ = try LiveDataConfig.parse(yaml: "output: {prefx: x}\n", file: "t.yaml")
        } catch {
            message = error.errors.map(\.description).joined(separator: "\n")
        }
        #expect(message.contains("unknown key \"prefx\" in output"), "\(message)")
        for key in ConfigKeys.keys(of: "output") { #expect(message.contains(key), "\(message) does not name \(key)") }
    }
}
