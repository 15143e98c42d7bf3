import LiveTopics

/// The locations whose first style waits to be published, each as a reference to the
/// location rather than as a change in the output's line: its change is made from the
/// state when the output has room for it (``next(now:)``).
///
/// A burst of new locations arriving faster than the broker's window lets their styles out
/// would otherwise wait as a change each, with its key in the line's table and in its order
/// (docs/performance.md has what that costs); here one waits as a reference. A
/// location's later changes while its first style waits are not needed: the style made when
/// it leaves is the location's style then, at its place then, all its fields counting as
/// changed (nothing of it was published before).
public struct FirstStyles {
    private let store: LiveStore
    /// What waits is `waiting[head...]`, in the order the locations came.
    private var waiting: [LocationState] = []
    private var head = 0
    /// First styles that waited here so far.
    public private(set) var kept = 0

    public init(store: LiveStore) { self.store = store }

    /// Locations whose first style waits.
    public var count: Int { waiting.count - head }
    public var isEmpty: Bool { head == waiting.count }

    /// Whether the output need not put `change` in line: its location's first style waits
    /// here already (the style made when it leaves is the one it has then), or `change` is a
    /// first style and `lineIsLong`, and from now on it waits here. One lookup of the
    /// location, and none while nothing waits and `change` is not a first style.
    public mutating func takes(_ change: DerivedChange, lineIsLong: @autoclosure () -> Bool) -> Bool {
        let keeps = change.isFirst && lineIsLong()
        guard keeps || !isEmpty, let state = store.locations.find(at: change.address) else { return false }
        if state.firstStyleWaits { return true }
        guard keeps else { return false }
        state.firstStyleWaits = true
        waiting.append(state)
        kept += 1
        return true
    }

    /// The first style of the location that has waited longest, as a change made from the
    /// state now, under its current version; nil when none waits.
    public mutating func next(now: LiveTimestamp) -> DerivedChange? {
        while head < waiting.count {
            let state = waiting[head]
            head += 1
            state.firstStyleWaits = false
            if head == waiting.count {
                waiting = []
                head = 0
            } else if head >= 4096 && head * 2 >= waiting.count {
                waiting.removeSubrange(0..<head)
                head = 0
            }
            if let change = store.firstStyle(state, now: now) { return change }
        }
        return nil
    }

    /// Forgets every waiting first style (the output stops publishing: a change of role).
    public mutating func removeAll() {
        for state in waiting[head...] { state.firstStyleWaits = false }
        waiting = []
        head = 0
    }
}

extension LiveStore {
    /// The location's style as its first publication: all its fields count as changed,
    /// under the version it has now (the changes it made while its first style waited
    /// raised it, and none of them was published).
    func firstStyle(_ state: LocationState, now: LiveTimestamp) -> DerivedChange? {
        guard state.foreign == nil, let key = state.published else { return nil }
        return DerivedChange(
            address: state.address, key: key, before: .none, ruleEngine: ruleEngine, values: state.values,
            version: state.version, updatedAt: now)
    }
}
