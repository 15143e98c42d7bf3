import Foundation
import Hummingbird
import HummingbirdTesting
import LiveDataTestSupport
@testable import LiveDataServer
import Testing

/// The floor's page, script and style sheet as the routes serve them: the files in
/// `Sources/LiveDataServer/HTTP/Assets` byte for byte, the page's placeholders filled with
/// escaped values.
@Suite("Floor page assets")
struct FloorPageTests {
    static let assets = Repository.url("Sources/LiveDataServer/HTTP/Assets")

    static func file(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: assets.appendingPathComponent(name)))
    }

    func withFloorPage(_ test: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let router = Router()
        FloorView.addFloorPage(to: router)
        try await Application(router: router).test(.router) { client in try await test(RecordingClient(client)) }
    }

    @Test("the script and the style sheet are their files, byte for byte, with their type and no-cache", arguments: [
        ("/assets/floor.js", "floor.js", "text/javascript; charset=utf-8"),
        ("/assets/floor.css", "floor.css", "text/css; charset=utf-8"),
    ])
    func staticAsset(path: String, file: String, type: String) async throws {
        let expected = try Self.file(file)
        try await withFloorPage { client in
            let response = try await client.execute(uri: path, method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == type)
            #expect(response.headers[.cacheControl] == "no-cache")
            #expect(Array(buffer: response.body) == expected)
        }
    }

    @Test("the page is floor.html with every placeholder filled")
    func page() async throws {
        var filled = String(decoding: try Self.file("floor.html"), as: UTF8.self)
        let fields = htmlEscaped(FloorStyleField.json)
        for (placeholder, value) in [("dataset", "ds1"), ("venue", "hq"), ("building", "B"), ("floor", "F3"), ("styleFields", fields)] {
            #expect(filled.contains("{{\(placeholder)}}"))
            filled = filled.replacingOccurrences(of: "{{\(placeholder)}}", with: value)
        }
        let expected = filled
        try await withFloorPage { client in
            let response = try await client.execute(uri: "/floors/ds1/hq/B/F3", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "text/html; charset=utf-8")
            #expect(response.headers[.cacheControl] == nil)
            #expect(String(buffer: response.body) == expected)
        }
    }

    @Test("a percent-encoded path gives the names as they are: a floor called F 1 is F 1, not F%201")
    func percentDecoded() async throws {
        try await withFloorPage { client in
            let response = try await client.execute(uri: "/floors/ds1/main%20site/B%2F2/F%201", method: .get)
            #expect(response.status == .ok)
            let page = String(buffer: response.body)
            #expect(page.contains(#"data-venue="main site" data-building="B/2" data-floor="F 1""#), "\(page.prefix(2000))")
        }
    }

    @Test("a floor named <b>&\" shows escaped, in the title, the heading, the label and the body's scope")
    func escaped() {
        let page = String(buffer: FloorPage.render(dataset: "d'1", venue: "v", building: "B", floor: #"<b>&""#))
        let floor = "&lt;b&gt;&amp;&quot;"
        #expect(page.contains("<title>livedata: floor \(floor), B</title>"))
        #expect(page.contains(#"data-dataset="d&#39;1" data-venue="v" data-building="B" data-floor="\#(floor)" "#))
        #expect(page.contains("· v · building B · floor \(floor)</h1>"))
        #expect(page.contains(#"aria-label="Locations on floor \#(floor)""#))
        #expect(!page.contains("<b>") && !page.contains("{{"))
    }

    @Test("a template fills its placeholders escaped")
    func filled() throws {
        let template = try PageTemplate<FloorPage.Placeholder>(Array("{{floor}}<p>{{floor}} of {{building}}</p>".utf8))
        let page = template.render { $0 == .floor ? "F<1>" : "B" }
        #expect(String(buffer: page) == "F&lt;1&gt;<p>F&lt;1&gt; of B</p>")
    }

    @Test("a template's placeholders are checked when it is read", arguments: [
        ("<p>{{room}}</p>", PageTemplateError.unknownPlaceholder("room", offset: 3)),
        ("<p>{{floor</p>", .unclosedPlaceholder(offset: 3)),
        ("<p>{{floor}</p>", .unclosedPlaceholder(offset: 3)),
    ])
    func refused(template: String, error: PageTemplateError) {
        #expect(throws: error) { try PageTemplate<FloorPage.Placeholder>(Array(template.utf8)) }
    }
}
