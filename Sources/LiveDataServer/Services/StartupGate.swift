/// Opens once, when a part the daemon waits for is up (the HTTP server listening, the first
/// convergence, a replica's join), so that READY=1 tells systemd the daemon is serving on
/// every interface.
///
/// A wait also ends when its task is cancelled: a start that fails or is stopped before the
/// gate opens (an HTTP server that cannot bind never opens it) must not hold the service
/// group's shutdown forever. A waiter checks `Task.isCancelled` after it returns.
actor StartupGate {
    private var opened = false
    private var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0

    /// Whether it has opened.
    var isOpen: Bool { opened }

    func open() {
        opened = true
        for continuation in waiting.values { continuation.resume() }
        waiting.removeAll()
    }

    /// Returns once the gate is open, or once the calling task is cancelled.
    func wait() async {
        if opened { return }
        let waiter = nextWaiter
        nextWaiter += 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if opened || Task.isCancelled {
                    continuation.resume()
                } else {
                    waiting[waiter] = continuation
                }
            }
        } onCancel: {
            // The handler cannot wait for the actor: the release runs after the wait has
            // stored its continuation (the actor runs one job at a time), and finds nothing
            // when the gate opened first.
            Task { await self.release(waiter) }
        }
    }

    private func release(_ waiter: Int) {
        waiting.removeValue(forKey: waiter)?.resume()
    }
}
