import Foundation
import Testing

@testable import Mosquitto

@Suite("The outbox: publications handed to the network thread, without a broker")
struct OutboxTests {
    /// Every record of `outbox`, read back as the network thread reads them.
    func records(_ outbox: Outbox) -> [(topic: String, payload: [UInt8], qos: Int32, retain: Bool)] {
        outbox.bytes.withUnsafeBytes { raw in
            var offset = 0
            return (0..<outbox.count).map { _ in
                let record = Outbox.record(at: raw.baseAddress! + offset)
                offset += record.size
                #expect(strlen(record.topic) == record.topicLength)
                return (
                    String(cString: record.topic),
                    Array(UnsafeRawBufferPointer(start: record.payload, count: record.payloadLength)), record.qos, record.retain
                )
            }
        }
    }

    func append(_ outbox: inout Outbox, _ topic: String, then rest: String = "", _ payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false) {
        payload.withUnsafeBytes { bytes in
            outbox.append(topic, then: rest, payload: bytes, qos: qos, retain: retain, waiter: nil, origin: nil)
        }
    }

    @Test("records come back in order: the topic's two parts joined and NUL-terminated, the payload, QoS and retain flag")
    func roundTrip() {
        var outbox = Outbox()
        append(&outbox, "site/style/", then: "ds1/hq/B/F3/R7/room-1", Array("{\"a\":1}".utf8), retain: true)
        append(&outbox, "site/status", [], qos: .atMostOnce)
        append(&outbox, "", then: "only/the/rest", Array(repeating: 0, count: 3), qos: .exactlyOnce)
        let read = records(outbox)
        #expect(read.map(\.topic) == ["site/style/ds1/hq/B/F3/R7/room-1", "site/status", "only/the/rest"])
        #expect(read.map(\.payload) == [Array("{\"a\":1}".utf8), [], [0, 0, 0]])
        #expect(read.map(\.qos) == [1, 0, 2])
        #expect(read.map(\.retain) == [true, false, false])
    }

    @Test("what arrives is taken after what waited; dropping the first records keeps the rest whole")
    func takeAndDrop() {
        var waiting = Outbox()
        append(&waiting, "a", [1])
        append(&waiting, "b", [2, 2])
        var arrived = Outbox()
        append(&arrived, "c", [3, 3, 3])
        waiting.take(from: &arrived)
        #expect(arrived.isEmpty && arrived.bytes.isEmpty)
        #expect(records(waiting).map(\.topic) == ["a", "b", "c"])
        let first = waiting.bytes.withUnsafeBytes { Outbox.record(at: $0.baseAddress!).size }
        waiting.removeFirst(1, size: first)
        #expect(records(waiting).map(\.topic) == ["b", "c"])
        #expect(records(waiting).map(\.payload) == [[2, 2], [3, 3, 3]])
        var empty = Outbox()
        empty.take(from: &waiting)
        #expect(waiting.isEmpty)
        #expect(records(empty).map(\.topic) == ["b", "c"])
        empty.removeFirst(2, size: empty.bytes.count)
        #expect(empty.isEmpty && empty.bytes.isEmpty)
    }

    @Test("kept topics read back across the ring's end; one overwritten since is reported as such")
    func keptTopics() {
        var kept = Outbox.KeptTopics()
        let long = String(repeating: "x", count: 1_000)
        var places: [Outbox.KeptTopics.Place] = []
        // Past the ring's size, so that some topics wrap around its end.
        for number in 0..<(Outbox.KeptTopics.capacity / 1_000 + 5) {
            let topic = "t/\(number)/" + long
            places.append(topic.withCString { kept.keep($0, count: strlen($0)) })
        }
        #expect(kept.text(places[0]) == "(a topic no longer kept)")
        for (number, place) in places.enumerated().suffix(60) {
            #expect(kept.text(place) == "t/\(number)/" + long)
        }
    }
}
