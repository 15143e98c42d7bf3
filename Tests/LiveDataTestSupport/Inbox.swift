import Foundation
import Mosquitto

/// Collects what an async stream delivers so a test can wait for it with a deadline.
public actor Inbox<Element: Sendable> {
    public private(set) var items: [Element] = []
    private var task: Task<Void, Never>?

    public init() {}

    /// Starts collecting from a stream.
    public static func collecting(_ stream: AsyncStream<Element>) async -> Inbox<Element> {
        let inbox = Inbox()
        await inbox.start(stream)
        return inbox
    }

    private func start(_ stream: AsyncStream<Element>) {
        task = Task { [weak self] in
            for await item in stream { await self?.append(item) }
        }
    }

    private func append(_ item: Element) {
        items.append(item)
    }

    /// Waits until `predicate` holds for the items, or the timeout passes.
    /// - Returns: whether it held.
    @discardableResult
    public func wait(
        timeout: Duration = .seconds(10), until predicate: @Sendable ([Element]) -> Bool
    ) async -> Bool {
        // Cancelled: the items as they are decide.
        (try? await polling(timeout: timeout, every: .milliseconds(10), { items }, until: predicate).held) ?? predicate(items)
    }

    /// Waits until there are at least `count` items.
    @discardableResult
    public func wait(forCount count: Int, timeout: Duration = .seconds(10)) async -> [Element] {
        await wait(timeout: timeout) { $0.count >= count }
        return items
    }
}

/// Settings for a test client of a broker.
extension MQTTConfiguration {
    public static func test(port: Int, protocolVersion: MQTTProtocolVersion = .v5) -> MQTTConfiguration {
        var configuration = MQTTConfiguration(host: "127.0.0.1", port: port, protocolVersion: protocolVersion)
        configuration.reconnect = MQTTBackoff(initial: .milliseconds(100), maximum: .milliseconds(500), jitter: 0)
        configuration.keepalive = .seconds(5)
        return configuration
    }
}
