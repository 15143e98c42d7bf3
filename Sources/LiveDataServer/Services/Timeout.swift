/// Runs `operation` for at most `timeout`: its result, or `nil` when the time ran out first.
/// The operation then is cancelled and awaited, so nothing of it outlives the call (it must
/// answer cancellation, as the MQTT client's calls do).
/// - Throws: what the operation throws, when it ends first.
func withTimeout<Result: Sendable>(
    _ timeout: Duration, _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result? {
    try await withThrowingTaskGroup(of: Result?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        return try await group.next() ?? nil
    }
}
