/// The delays between reconnection attempts: a value type so that the policy can be
/// tested without a broker or a clock.
struct ReconnectBackoff {
    let policy: MQTTBackoff
    private(set) var attempt = 0

    init(_ policy: MQTTBackoff) {
        self.policy = policy
    }

    /// The delay before the next attempt; each call doubles it, up to the maximum.
    mutating func next<R: RandomNumberGenerator>(using random: inout R) -> Duration {
        let base = min(policy.initial * Double(1 << min(attempt, 30)), policy.maximum)
        attempt += 1
        guard policy.jitter > 0 else { return base }
        let jitter = Double.random(in: -policy.jitter...policy.jitter, using: &random)
        return base * (1 + jitter)
    }

    /// Forget failed attempts (after a successful connection).
    mutating func reset() {
        attempt = 0
    }
}
