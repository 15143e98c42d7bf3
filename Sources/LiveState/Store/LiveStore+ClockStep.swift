import DisplayRules
import LiveTopics

extension LiveStore {
    /// The daemon's clock was stepped by `milliseconds` (forward when positive). Every value
    /// stamped on receipt moves with it, so that its age (and so its expiry) and its order
    /// against what follows stay what they were; a value its sender stamped stays as it is.
    /// Values received on the stepped clock (their time in `stampedAfter`: the step is seen
    /// a moment after it is made) stay as they are. Expiries are scheduled again, and the
    /// moved locations written at the next snapshot.
    /// - Returns: the values moved.
    public func clockStepped(by milliseconds: Int64, stampedAfter: ClosedRange<LiveTimestamp>? = nil) -> Int {
        var moved = 0
        expiries.removeAll(keepingCapacity: true)
        for state in locations.locations {
            var movedHere = false
            for index in state.values.indices where state.values[index].stampedOnReceipt {
                if let stampedAfter, stampedAfter.contains(state.values[index].timestamp) { continue }
                state.values[index].timestamp = state.values[index].timestamp.adding(milliseconds: milliseconds)
                movedHere = true
                moved += 1
            }
            if movedHere { markDirty(state) }
            state.scheduledExpiries = 0
            scheduleAll(state)
        }
        return moved
    }
}
