import Testing

@testable import LiveDataServer

@Suite("Log lines")
struct LineLogHandlerTests {
    @Test("control characters from outside are escaped; other text stays as it is", arguments: [
        ("plain text, ünïcödé ✓", "plain text, ünïcödé ✓"),
        ("a\nwarning [livedata] forged", "a\\u{A}warning [livedata] forged"),
        ("bell\u{07} esc\u{1B}[2J del\u{7F} c1\u{9B}", "bell\\u{7} esc\\u{1B}[2J del\\u{7F} c1\\u{9B}"),
    ])
    func escapes(text: String, logged: String) {
        #expect(LineLogHandler.escaped(text) == logged)
    }
}
