import DisplayRules
import LiveTopics

extension LiveStore {
    /// What the broker's retained style for a location calls for.
    enum RetainedStyleVerdict {
        /// The state holds no location at that address: clear the topic.
        case unknown
        /// It shows what the state holds.
        case agrees(LocationState)
        /// It differs (or is missing): publish this, with a version above both.
        case republish(LocationState, DerivedChange)
    }

    /// Compares the style retained at the style topic of the location at `path` (its
    /// `dataset/venue/building/floor/room/location` bytes; the style's `style` member's JSON
    /// bytes and its `version`, or `nil` when there is none) with the state. The location's
    /// version is raised to the retained one when that is higher, so that versions never go
    /// backwards for a subscriber; a lower retained version (changes made while the daemon
    /// could not publish them, that came back to the same style) is published again, so that
    /// the broker and the state agree on the version too.
    func reconcile(
        retainedAtPath path: UnsafeRawBufferPointer, style: UnsafeRawBufferPointer?, version: UInt64, now: LiveTimestamp
    ) -> RetainedStyleVerdict {
        guard let state = locations.find(atPath: path) else { return .unknown }
        if version > state.version {
            state.version = version
            markDirty(state)
        }
        if let style, version == state.version, state.publishedStyle(ruleEngine, isJSON: style) { return .agrees(state) }
        // Nothing published, or another partition's style: nothing to publish again.
        return republication(state, now: now).map { .republish(state, $0) } ?? .agrees(state)
    }

    /// The current style of the location at `address`, as a change to publish again in full
    /// under the next version; `nil` when no location is there, or none is published yet.
    public func republication(at address: LocationAddress, now: LiveTimestamp) -> DerivedChange? {
        locations.find(at: address).flatMap { republication($0, now: now) }
    }

    /// The location's current style as a change to publish again in full (all its fields
    /// count as changed), under the next version.
    func republication(_ state: LocationState, now: LiveTimestamp) -> DerivedChange? {
        guard state.foreign == nil, let key = state.published else { return nil }
        state.version += 1
        markDirty(state)
        return DerivedChange(
            address: state.address, key: key, before: .none, ruleEngine: ruleEngine, values: state.values,
            version: state.version, updatedAt: now)
    }
}
