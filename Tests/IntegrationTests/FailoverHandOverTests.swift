import Foundation
import LiveDataTestSupport
import Logging
import Mosquitto
import Synchronization
import Testing

/// Failover's hand-overs without a crash (a clean stop, a pause past the lease), the takeover
/// that skips the full read, and the state copy, with ``FailoverTests``' replicas, recorder
/// and feed: a suite of its own, so that it runs beside the crashes of ``FailoverTests``
/// and the cut of ``FailoverCutTests`` rather than after them.
@Suite("Failover: hand-overs, takeovers without the read, the state copy", .serialized, .timeLimit(.minutes(5)))
struct FailoverHandOverTests {
    let logger = Logger(label: "test")
    let failover = FailoverTests()

    @Test("a clean stop of the active hands on what waits and releases the lease: the standby takes over at once; STATUS= says each one's role")
    func cleanStop() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let (stopping, other, epoch, recorder, feed) = try await failover.pair(broker)
        try await eventually("STATUS= to name the roles", timeout: .seconds(15), every: .milliseconds(200)) {
            stopping.saidStatus(startingWith: "active, epoch \(epoch);") && other.saidStatus(startingWith: "standby (\(stopping.name) active, epoch \(epoch));")
        }
        try await feed.send(400)
        let stoppedAt = ContinuousClock.now
        stopping.running.signal(SIGTERM)
        #expect(try await stopping.running.result(timeout: .seconds(15)).status == 0)
        try await feed.send(400, from: 400)
        let (_, newEpoch) = try await failover.active(among: [other])
        #expect(newEpoch == epoch + 1)
        let published = recorder.styles(after: stoppedAt).first { $0.epoch == newEpoch }
        #expect(published != nil)
        if let published {
            #expect(published.at - stoppedAt <= .seconds(4), "took over \(published.at - stoppedAt) after the stop")
            print("failover: SIGTERM to the first style under the new epoch: \(published.at - stoppedAt)")
        }
        let released = recorder.all.contains {
            $0.topic == "livedata/owner/east" && String(decoding: $0.payload, as: UTF8.self).contains("\"released\":true")
                && String(decoding: $0.payload, as: UTF8.self).contains(stopping.name)
        }
        #expect(released, "the stopping replica released its lease")
        try await failover.expectConverged(broker, feed, active: other)
        #expect(recorder.backwards().isEmpty)
        other.running.signal(SIGTERM)
        #expect(try await other.running.result(timeout: .seconds(15)).status == 0)
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }

    @Test("the active paused (SIGSTOP) past its lease, then resumed: it publishes nothing after resuming and stands by")
    func pausedActive() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let (paused, other, epoch, recorder, feed) = try await failover.pair(broker)
        try await feed.send(400)
        let pausedAt = ContinuousClock.now
        paused.running.signal(SIGSTOP)
        // Updates meanwhile: the paused one has them queued at the broker when it wakes.
        try await feed.send(400, from: 400)
        let (_, newEpoch) = try await failover.active(among: [other])
        #expect(newEpoch > epoch)
        if let published = recorder.styles(after: pausedAt).first(where: { $0.epoch == newEpoch }) {
            #expect(published.at - pausedAt <= FailoverTests.takeoverBound, "took over in \(published.at - pausedAt)")
            print("failover: SIGSTOP to the first style under the new epoch: \(published.at - pausedAt)")
        }
        try await feed.send(400, from: 800)
        let resumedAt = ContinuousClock.now
        paused.running.signal(SIGCONT)
        try await feed.send(400, from: 1200)
        let standingBy = try await eventually("the resumed replica to say standby", timeout: .seconds(20), every: .milliseconds(200)) {
            await failover.role(paused)?.role == "standby"
        }
        if !standingBy {
            Issue.record("paused: \(paused.running.standardError.suffix(4000))\nother: \(other.running.standardError.suffix(4000))")
        }
        try await failover.expectConverged(broker, feed, active: other)
        let late = recorder.styles(after: resumedAt).filter { $0.epoch == epoch }
        #expect(late.isEmpty, "the deposed replica published \(late.count) styles after resuming")
        #expect(recorder.backwards().isEmpty, "versions went backwards at \(recorder.backwards().prefix(5))")
        #expect(await failover.role(other)?.role == "active", "the replica that took over is still active: no flapping")
        for replica in [paused, other] { replica.running.signal(SIGTERM) }
        for replica in [paused, other] { #expect(try await replica.running.result(timeout: .seconds(15)).status == 0) }
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }

    @Test("a standby that read every marker of the active takes over without reading back the retained styles; nothing is lost, no version goes back")
    func takeoverWithoutRead() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let (active, standby, epoch, recorder, feed) = try await failover.followedPair(broker)
        // Killed in the middle of a burst: some of its changes never reach the broker.
        try await feed.send(300, from: 600, pause: .microseconds(100))
        let killedAt = ContinuousClock.now
        active.running.signal(SIGKILL)
        try await feed.send(300, from: 900)
        let (_, newEpoch) = try await failover.active(among: [standby])
        #expect(newEpoch > epoch)
        let published = recorder.styles(after: killedAt).first { $0.epoch == newEpoch }
        #expect(published != nil, "the new active published")
        if let published {
            #expect(published.at - killedAt <= FailoverTests.takeoverBound, "took over in \(published.at - killedAt)")
            print("failover without a read: SIGKILL to the first style under the new epoch: \(published.at - killedAt)")
        }
        try await failover.expectConverged(broker, feed, active: standby)
        #expect(recorder.backwards().isEmpty, "versions went backwards at \(recorder.backwards().prefix(5))")
        let counts = try await failover.convergences(standby)
        #expect(counts.skipped == 1 && counts.finished == 0 && counts.read == 0, "skipped, finished, read: \(counts)")
        #expect(
            standby.running.standardError.contains("saw every acknowledgement of epoch \(epoch)"),
            "\(standby.running.standardError.suffix(3000))")
        standby.running.signal(SIGTERM)
        #expect(try await standby.running.result(timeout: .seconds(15)).status == 0)
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }

    @Test("a standby that missed a marker of the active reads back every retained style when it takes over; nothing is lost")
    func missedMarkerForcesRead() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let (active, standby, epoch, recorder, feed) = try await failover.followedPair(broker)
        try await feed.send(300, from: 600, pause: .microseconds(100))
        // The active paused, so that it sends no marker more; then a marker that skips some
        // of its sequence reaches the standby, as if the broker had lost those.
        active.running.signal(SIGSTOP)
        let last = try #require(recorder.markers.last)
        var skipping = last
        skipping["sequence"] = (last["sequence"] as? Int ?? 0) + 5
        skipping["covers"] = (last["sequence"] as? Int ?? 0) + 4
        try await feed.client.publish(
            "livedata/sync/east", payload: Array(try JSONSerialization.data(withJSONObject: skipping)), qos: .atLeastOnce)
        try await eventually("the standby to read the marker") { recorder.markers.count > 0 && recorder.markers.last?["sequence"] as? Int == skipping["sequence"] as? Int }
        try await Task.sleep(for: .milliseconds(300))
        let killedAt = ContinuousClock.now
        active.running.signal(SIGKILL)
        try await feed.send(300, from: 900)
        let (_, newEpoch) = try await failover.active(among: [standby])
        #expect(newEpoch > epoch)
        #expect(recorder.styles(after: killedAt).contains { $0.epoch == newEpoch }, "the new active published")
        try await failover.expectConverged(broker, feed, active: standby)
        #expect(recorder.backwards().isEmpty, "versions went backwards at \(recorder.backwards().prefix(5))")
        let counts = try await failover.convergences(standby)
        #expect(counts.skipped == 0 && counts.finished >= 1 && counts.read >= Double(FailoverTests.locations), "skipped, finished, read: \(counts)")
        #expect(standby.running.standardError.contains("a marker of the active was missed"), "\(standby.running.standardError.suffix(3000))")
        standby.running.signal(SIGTERM)
        #expect(try await standby.running.result(timeout: .seconds(15)).status == 0)
        await recorder.client.disconnect()
        await feed.client.disconnect()
    }

    @Test("the state copy goes out a part at a time while updates keep flowing: every location once, none older than a copy before, and the last copy is every last update")
    func stateCopyWhileUpdating() async throws {
        let broker = try await MosquittoBroker.start()
        defer { Task { await broker.stop() } }
        let peer = try await failover.start("east-1", broker: broker)
        _ = try await failover.active(among: [peer])
        let publisher = try MQTTClient(configuration: .test(port: broker.port), logger: logger)
        try await publisher.connect()
        // Several parts' worth (a part is 4,096 locations).
        let count = 10_000
        func topic(_ index: Int) -> String { "ds1/hq/C/F\(index / 1000)/R\(index / 10)/spot-\(index)/occupancy" }
        func payload(_ people: Int) -> String { #"{"properties": {"nrOfPeople": "\#(people)", "capacity": "8"}}"# }
        for index in 0..<count { try await publisher.publish(topic(index), text: payload(1), qos: .atLeastOnce) }
        try await eventually("the peer to hold every location", timeout: .seconds(60), every: .milliseconds(200)) {
            let text = try await LoopbackHTTP.request("GET", port: peer.httpPort, path: "/metrics").body
            return CrashRecoveryTests.metric(text, "livedata_locations_tracked") == Double(count)
        }
        /// Each location's people count in a copy; fails on a location twice or a line that does not parse.
        func copy() async throws -> [Int: Int] {
            let answer = try await LoopbackHTTP.request("GET", port: peer.httpPort, path: "/v1/state", headers: ["Authorization": "Bearer sesame"])
            #expect(answer.status == 200)
            var people: [Int: Int] = [:]
            for line in answer.body.split(separator: "\n") {
                let parts = line.split(separator: "\t", maxSplits: 1)
                guard parts.count == 2, let location = parts[0].split(separator: "/")[5].split(separator: "-").last.flatMap({ Int($0) }),
                    let object = try? JSONSerialization.jsonObject(with: Data(parts[1].utf8)) as? [String: Any],
                    let value = (object["properties"] as? [String: Any])?["nrOfPeople"] as? String, let number = Int(value)
                else {
                    Issue.record("a line of the copy does not read: \(line.prefix(200))")
                    continue
                }
                #expect(people[location] == nil, "location \(location) twice in one copy")
                people[location] = number
            }
            return people
        }
        let sent = FailoverTests.Count()
        let flowing = Task {
            var round = 2
            while !Task.isCancelled {
                for index in stride(from: round % 7, to: count, by: 7) {
                    try await publisher.publish(topic(index), text: payload(round), qos: .atLeastOnce)
                    sent.add()
                }
                round += 1
            }
        }
        func processed() async throws -> Double {
            CrashRecoveryTests.metric(try await LoopbackHTTP.request("GET", port: peer.httpPort, path: "/metrics").body, "livedata_updates_processed_total") ?? 0
        }
        var previous: [Int: Int] = [:]
        for _ in 0..<4 {
            let before = try await processed()
            let sentBefore = sent.value
            let people = try await copy()
            let after = try await processed()
            #expect(people.count == count, "every location once: \(people.count) of \(count)")
            let older = previous.filter { (people[$0.key] ?? 0) < $0.value }
            #expect(older.isEmpty, "values older than in the copy before: \(older.prefix(5))")
            #expect(after > before || sent.value == sentBefore, "the peer took updates during the copy (\(before) → \(after))")
            previous = people
        }
        flowing.cancel()
        _ = await flowing.result
        // Every update acknowledged is processed, then a copy shows each location's last.
        try await eventually("the peer to be idle", timeout: .seconds(30), every: .milliseconds(300)) {
            let first = try await processed()
            try await Task.sleep(for: .milliseconds(500))
            return try await processed() == first
        }
        let last = try await copy()
        let expected = try await LoopbackHTTP.request("GET", port: peer.httpPort, path: "/v1/floors/ds1/hq/C/F3")
        let records = (try JSONSerialization.jsonObject(with: Data(expected.body.utf8)) as? [String: Any])?["locations"] as? [[String: Any]] ?? []
        #expect(records.count == 1000)
        for record in records {
            guard let id = (record["location"] as? String)?.split(separator: "-").last.flatMap({ Int($0) }),
                let live = (record["live"] as? [String: Any])?["occupancy"] as? [String: Any], let value = live["nrOfPeople"] as? String
            else { continue }
            #expect(last[id] == Int(value), "the last copy shows spot-\(id) as the peer holds it")
        }
        peer.running.signal(SIGTERM)
        #expect(try await peer.running.result(timeout: .seconds(15)).status == 0)
        await publisher.disconnect()
    }
}
