import Testing

/// Waits until `condition` holds, asking every `interval`; when `timeout` passes first, records
/// an issue at the caller that says what was awaited.
///
///     try await eventually("the daemon to be ready") { await daemon.pipeline.isReady }
///
/// The condition is asked once more after the deadline, so a slow last poll still counts.
/// - Returns: whether it held.
/// - Throws: what `condition` throws, or `CancellationError` when the task is cancelled.
@discardableResult
public func eventually(
    _ awaited: @autoclosure () -> String,
    timeout: Duration = .seconds(10),
    every interval: Duration = .milliseconds(20),
    sourceLocation: SourceLocation = #_sourceLocation,
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let held = try await polling(timeout: timeout, every: interval, condition, until: { $0 }).held
    if !held {
        Issue.record("timed out after \(timeout) waiting for \(awaited())", sourceLocation: sourceLocation)
    }
    return held
}

/// Observes a value every `interval` until `condition` holds for it; when `timeout` passes
/// first, records an issue at the caller that says what was awaited and the last value seen.
///
///     let ready = try await eventually("/readyz to answer 200", observing: { try await readyz() }) { $0.status == 200 }
///
/// - Returns: the last value observed (the one that satisfied `condition`, unless it timed out).
/// - Throws: what `observe` or `condition` throw, or `CancellationError` when the task is cancelled.
@discardableResult
public func eventually<Value>(
    _ awaited: @autoclosure () -> String,
    timeout: Duration = .seconds(10),
    every interval: Duration = .milliseconds(20),
    sourceLocation: SourceLocation = #_sourceLocation,
    isolation: isolated (any Actor)? = #isolation,
    observing observe: () async throws -> Value,
    until condition: (Value) throws -> Bool
) async throws -> Value {
    let (value, held) = try await polling(timeout: timeout, every: interval, observe, until: condition)
    if !held {
        Issue.record(
            "timed out after \(timeout) waiting for \(awaited()); last observed: \(value)", sourceLocation: sourceLocation)
    }
    return value
}

/// The loop under ``eventually(_:timeout:every:sourceLocation:_:)`` and the kit's own waits
/// that answer with a `Bool` for the caller to expect: observes until `condition` holds or the
/// deadline passes, and always observes at least once.
func polling<Value>(
    timeout: Duration, every interval: Duration, isolation: isolated (any Actor)? = #isolation,
    _ observe: () async throws -> Value, until condition: (Value) throws -> Bool
) async throws -> (value: Value, held: Bool) {
    let deadline = ContinuousClock.now + timeout
    while true {
        let value = try await observe()
        if try condition(value) { return (value, true) }
        if ContinuousClock.now >= deadline { return (value, false) }
        try await Task.sleep(for: interval)
    }
}
