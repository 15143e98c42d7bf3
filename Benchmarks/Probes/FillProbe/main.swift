import DisplayRules
import Foundation
import LiveState
import LiveStatePersistence
import LiveTopics

// The pipeline thread's work for each update of the end-to-end benchmark's fill at a
// million locations (`bench.py --updates 1000000 --locations 1000000`): every update is a
// new location's first occupancy value, under the benchmark's rules, and its style is
// published (the style topic and the JSON payload built as the publisher builds them).
// Leaves out what the daemon's other threads do (the socket, the journal, libmosquitto)
// and the snapshot. For counting instructions:
//
//   swift build -c release --product FillProbe
//   strip --strip-debug -o /tmp/fill .build/release/FillProbe
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measuredRegion*' /tmp/fill [LOCATIONS [MEASURED]]
//
// divides the reported total by the measured updates (100,000 unless given).
//
// With a third argument, a path: the snapshot that follows instead, every location the fill
// changed written to a new state file at that path in the daemon's parts
// (`LivePipeline.flush`), counted with `--toggle-collect='*measuredSnapshot*'`.

/// The measured updates; not inlined, so that callgrind can count it alone.
@inline(never)
func measuredRegion(_ engine: LiveCore, _ format: OutputFormat, _ updates: [(topic: String, payload: [UInt8])], _ now: inout LiveTimestamp)
    -> Int
{
    var bytes = 0
    // One stream for every payload, as the publisher writes them.
    var stream = JSONStream(capacity: 512)
    for update in updates {
        now.millisecondsSince1970 += 1
        guard case .changed(let change) = engine.process(topic: update.topic, payload: update.payload, receivedAt: now) else { continue }
        // The publisher hands the client the style prefix and the address's path, which
        // the client puts together in its own copy: no topic string is built here either.
        stream.reset()
        change.write(to: &stream, epoch: format.epoch)
        bytes += format.stylePrefix.utf8.count + change.address.path.utf8.count + stream.count
    }
    return bytes
}

/// The end-to-end benchmark's rules (`Benchmarks/EndToEnd/bench.py`).
func benchmarkRules() -> RuleSet {
    var rules: [Rule] = []
    func add(_ name: String, _ domain: String, _ condition: String, _ style: Style) {
        rules.append(
            Rule(
                name: name, domain: domain, condition: try! CompiledExpression(condition, domain: domain), scope: nil,
                style: try! StyleTemplate(style, domain: domain), legend: nil, layer: nil, priority: 0, order: rules.count))
    }
    add("vacant", "occupancy", "nrOfPeople == 0", Style([.polygonFillColor: .color(Color("#4CAF50")!)]))
    add("occupied", "occupancy", "nrOfPeople > 0", Style([.polygonFillColor: .color(Color("#D64545")!), .label: .text("{nrOfPeople}")]))
    add("hot", "temperature", "temperature > 25", Style([.polygonStrokeColor: .color(Color("#E65100")!)]))
    add("cold", "temperature", "temperature < 18", Style([.polygonStrokeColor: .color(Color("#1565C0")!)]))
    add("stuffy", "co2", "co2Level > 1000", Style([.badge: .badge(Badge(text: "CO2 {co2Level}"))]))
    add("booked", "availability", #"available == "false""#, Style([.icon: .text("booked.svg")]))
    return RuleSet(
        main: try! StyleTemplate(Style([.visible: .flag(true), .polygonFillColor: .color(Color("#E0E0E0")!)]), domain: nil),
        rules: rules, domains: [:])
}

/// Update `sent` of the benchmark's publisher (`Benchmarks/EndToEnd/publisher.c`): location
/// `sent % locations`, occupancy for the first pass over the locations.
func update(_ sent: Int, locations: Int, seed: inout UInt64, milliseconds: Int64) -> (topic: String, payload: [UInt8]) {
    let number = sent % locations
    seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    let value = UInt32(truncatingIfNeeded: seed >> 33)
    let topic = "bench/hq/b\(number % 4)/f\(number / 4 % 10)/r\(number / 40 % 25)/loc-\(number)/occupancy"
    let payload = #"{"timestamp":\#(milliseconds),"properties":{"nrOfPeople":"\#(value % 9)"}}"#
    return (topic, Array(payload.utf8))
}

let locations = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000_000
let measured = CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 100_000
let engine = LiveCore(ruleSet: benchmarkRules(), subscriptions: [try! TopicCriteria(dataset: "bench")])
let format = OutputFormat(prefix: "livedata")
var now = LiveTimestamp(millisecondsSince1970: 1_763_720_000_000)
var seed: UInt64 = 12345
// The first 10 % of the fill before measuring (the table and summaries hold some locations).
let before = locations / 10
for sent in 0..<before {
    let (topic, payload) = update(sent, locations: locations, seed: &seed, milliseconds: now.millisecondsSince1970)
    now.millisecondsSince1970 += 1
    _ = engine.process(topic: topic, payload: payload, receivedAt: now)
}
// Each sent a millisecond before it is received.
let updates = (before..<(before + measured)).map {
    update($0, locations: locations, seed: &seed, milliseconds: now.millisecondsSince1970 + Int64($0 - before))
}
/// The snapshot after the fill: the changed locations' records, encoded and written to the
/// state file in parts of 8,192 as the daemon's flush writes them (here on one thread).
@inline(never)
func measuredSnapshot(_ store: LiveStore, _ database: StateDatabase) throws -> Int {
    let changed = store.takeChangedLocations()
    var start = 0
    while start < changed.count {
        let end = min(start + 8_192, changed.count)
        try database.write(EncodedRecords(changed, in: start..<end, of: store))
        start = end
    }
    return changed.count
}

let clock = ContinuousClock()
var bytes = 0
let elapsed = clock.measure { bytes = measuredRegion(engine, format, updates, &now) }
let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
print("\(updates.count) new locations of \(locations), \(bytes / max(updates.count, 1)) bytes published each, \(Int(nanoseconds / Double(updates.count))) ns each")
if let path = CommandLine.arguments.dropFirst(3).first {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    let database = try StateDatabase(path: path)
    var written = 0
    let snapshot = try clock.measure { written = try measuredSnapshot(engine.store, database) }
    let snapshotNanoseconds = Double(snapshot.components.seconds) * 1e9 + Double(snapshot.components.attoseconds) / 1e9
    print("snapshot: \(written) locations written, \(Int(snapshotNanoseconds / Double(max(written, 1)))) ns each")
}
