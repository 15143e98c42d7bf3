/// Opens once, when a part the daemon waits for is up (the HTTP server listening), so
/// that READY=1 tells systemd the daemon is serving on every interface.
actor StartupGate {
    private var isOpen = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for continuation in waiting { continuation.resume() }
        waiting.removeAll()
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiting.append($0) }
    }
}
