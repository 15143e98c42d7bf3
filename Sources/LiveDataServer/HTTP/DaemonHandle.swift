import Synchronization

/// Where the HTTP interface finds the pipeline once the daemon has built it.
public final class DaemonHandle: Sendable {
    private let current = Mutex<LivePipeline?>(nil)

    public init() {}

    public var pipeline: LivePipeline? { current.withLock { $0 } }

    func set(_ pipeline: LivePipeline) {
        current.withLock { $0 = pipeline }
    }
}
