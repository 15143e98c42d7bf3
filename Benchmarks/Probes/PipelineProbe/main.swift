import BenchmarkFixtures
import LiveState
import LiveTopics

// The pipeline benchmark's work as a plain program, for counting instructions (wall-clock
// time on a shared machine drifts too much to compare two small changes):
//
//   swift build -c release --product PipelineProbe
//   strip --strip-debug -o /tmp/probe .build/release/PipelineProbe
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measuredRegion*' /tmp/probe [LOCATIONS [WARM-UP]]
//
// divides the reported total by the 100,000 updates of the measured region.

/// The measured updates; not inlined, so that callgrind can count it alone.
@inline(never)
func measuredRegion(_ engine: LiveCore, _ updates: [(topic: String, payload: [UInt8])], _ now: inout LiveTimestamp) -> Int {
    var changed = 0
    for update in updates {
        now.millisecondsSince1970 += 1
        if case .changed = engine.process(topic: update.topic, payload: update.payload, receivedAt: now) { changed += 1 }
    }
    return changed
}

let locations = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 10_000
// Updates per location before measuring, as the pipeline benchmark's warm-up gives them:
// most locations then hold a value of every domain.
let warmUp = CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 20
let engine = LiveCore(ruleSet: PipelineFixtures.ruleSet(), subscriptions: PipelineFixtures.subscriptions)
var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
for update in PipelineFixtures.updates(count: locations * warmUp, locations: locations, seed: 1) {
    now.millisecondsSince1970 += 1
    _ = engine.process(topic: update.topic, payload: update.payload, receivedAt: now)
}
let updates = PipelineFixtures.updates(count: 100_000, locations: locations, seed: 2)
let clock = ContinuousClock()
var changed = 0
let elapsed = clock.measure { changed = measuredRegion(engine, updates, &now) }
let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
print("\(updates.count) updates over \(locations) locations, \(changed) style changes, \(Int(nanoseconds / Double(updates.count))) ns each")
