import Testing

@testable import LiveDataServer

@Suite("Failover: which replica publishes")
struct FailoverStateTests {
    let start = ContinuousClock.now
    let keepalive = Duration.seconds(6)

    func replica(_ name: String) -> FailoverState {
        var state = FailoverState(instance: name, keepalive: keepalive)
        state.eligible = true
        state.watching(since: start)
        return state
    }

    /// Claims, gets its claim back and acknowledged, and settles: active.
    func activated(_ name: String, at time: Duration = .zero) -> FailoverState {
        var state = replica(name)
        let now = start + time + .seconds(2)
        guard case .claim(let epoch) = state.tick(now: now) else { preconditionFailure("no claim") }
        state.acknowledged(epoch: epoch, sentAt: now)
        _ = state.observed(Lease(instance: name, epoch: epoch), now: now)
        #expect(state.tick(now: now + state.settle) == .activate(epoch: epoch))
        return state
    }

    @Test("with no lease retained, an eligible replica claims epoch 1 and is active once its claim came back and settled")
    func firstClaim() {
        var state = replica("a")
        #expect(state.tick(now: start + .milliseconds(100)) == .none, "the retained lease may still be on its way")
        var ineligible = replica("b")
        ineligible.eligible = false
        #expect(ineligible.tick(now: start + .seconds(5)) == .none, "a replica that has not joined never claims")
        #expect(state.tick(now: start + .seconds(2)) == .claim(epoch: 1))
        #expect(state.role == .claiming(1))
        state.acknowledged(epoch: 1, sentAt: start + .seconds(2))
        #expect(state.tick(now: start + .seconds(3)) == .none, "not active before its claim came back")
        #expect(state.tick(now: start + .seconds(4)) == .renew, "a claim waiting to come back is renewed all the same")
        #expect(!state.mayPublish(now: start + .seconds(4)))
        _ = state.observed(Lease(instance: "a", epoch: 1), now: start + .seconds(4))
        #expect(state.tick(now: start + .seconds(4) + .milliseconds(100)) == .none, "settling")
        #expect(state.tick(now: start + .seconds(5)) == .activate(epoch: 1))
        #expect(state.mayPublish(now: start + .seconds(5)))
        #expect(!state.mayPublish(now: start + .seconds(2) + keepalive), "publishes no longer than keepalive after the last acknowledged renewal")
    }

    @Test("a standby claims a released lease after its stagger with the next epoch, an unrenewed one only after the term, and ignores a stale release")
    func standbyClaims() {
        var state = replica("b")
        _ = state.observed(Lease(instance: "a", epoch: 4), now: start)
        #expect(state.tick(now: start + keepalive) == .none, "renewed a keepalive ago: still a's")
        _ = state.observed(Lease(instance: "c", epoch: 2, released: true), now: start + .seconds(1))
        #expect(state.tick(now: start + .seconds(2)) == .none, "an older epoch's release says nothing of a's lease")
        #expect(state.tick(now: start + keepalive * 2) == .claim(epoch: 5), "not renewed for the term: expired")

        var restarted = replica("a")
        _ = restarted.observed(Lease(instance: "a", epoch: 4), now: start)
        #expect(restarted.tick(now: start + restarted.stagger) == .none)
        #expect(
            restarted.tick(now: start + restarted.quiet + restarted.stagger) == .claim(epoch: 5),
            "its own lease, held no more (a run before this one, a broker restart): claimed again at once, not after the term")

        var other = replica("b")
        _ = other.observed(Lease(instance: "a", epoch: 4), now: start)
        _ = other.observed(Lease(instance: "a", epoch: 4, released: true), now: start + .seconds(1))
        #expect(other.tick(now: start + .seconds(1) + other.stagger) == .claim(epoch: 5))
    }

    @Test("of two claims of one epoch the one the broker delivered first wins, for both claimants; a higher epoch wins whatever the order")
    func concurrentClaims() {
        var a = replica("a")
        var b = replica("b")
        let now = start + .seconds(3)
        #expect(a.tick(now: now) == .claim(epoch: 1))
        #expect(b.tick(now: now) == .claim(epoch: 1))
        a.acknowledged(epoch: 1, sentAt: now)
        b.acknowledged(epoch: 1, sentAt: now)
        // The broker's order: a's claim, then b's; both replicas see it so.
        for lease in [Lease(instance: "a", epoch: 1), Lease(instance: "b", epoch: 1)] {
            _ = a.observed(lease, now: now)
            _ = b.observed(lease, now: now)
        }
        #expect(b.role == .standby)
        #expect(a.tick(now: now + a.settle) == .activate(epoch: 1))
        #expect(b.tick(now: now + b.settle) == .none)
        #expect(a.observed(Lease(instance: "b", epoch: 1), now: now + a.settle) == .renew, "the losing claim, retained last, is overwritten")
        #expect(a.isActive)

        var c = replica("c")
        #expect(c.tick(now: now) == .claim(epoch: 1))
        _ = c.observed(Lease(instance: "c", epoch: 1), now: now)
        #expect(c.observed(Lease(instance: "d", epoch: 2), now: now) == .depose(reason: "d claimed epoch 2 first"))
        var late = replica("e")
        #expect(late.tick(now: now, caughtUp: false) == .none, "no claim while a backlog waits")
    }

    @Test("an active steps down at a claim of its epoch or above, publishes its lease again over an older one, and stops when its lease is not renewed in time")
    func activeReplica() {
        var state = activated("a")
        #expect(state.observed(Lease(instance: "z", epoch: 0, released: true), now: start + .seconds(3)) == .renew)
        #expect(state.isActive)
        if case .depose = state.observed(Lease(instance: "b", epoch: 2), now: start + .seconds(3)) {} else {
            Issue.record("a higher epoch must depose the active")
        }
        #expect(state.role == .standby)
        #expect(!state.mayPublish(now: start + .seconds(3)))

        var lapsed = activated("a")
        let sent = start + .seconds(2)
        #expect(lapsed.tick(now: sent + keepalive / 2) == .renew)
        if case .depose = lapsed.tick(now: sent + keepalive) {} else { Issue.record("an unrenewed lease must end the active's publishing") }

        var resumed = activated("a")
        _ = resumed.holderEnded(epoch: 1)
        let after = start + .seconds(20)
        #expect(resumed.tick(now: after) == .none, "just deposed (a pause ended): no claim before it has listened")
        #expect(resumed.tick(now: after + resumed.quiet / 2) == .none)
        #expect(resumed.tick(now: after + resumed.quiet + resumed.stagger) == .claim(epoch: 2), "its own lease, nobody else's came: claimed")

        var renewed = activated("a")
        renewed.acknowledged(epoch: 1, sentAt: sent + keepalive / 2)
        #expect(renewed.mayPublish(now: sent + keepalive))
        #expect(renewed.holderEnded(epoch: 1) != .none)
        #expect(!renewed.isActive, "the connection that held the lease ended: the epoch ended with it")
    }
}
