import BenchmarkFixtures
import DisplayRules
import LiveTopics

// What the daemon does with a style once the pipeline has found that it changed, as a plain
// program: layering the style from its rules, finding the changed fields, writing its JSON,
// and the whole derived-change payload. Prints the time of each per change (the median of
// a few rounds); for counting instructions, as with PipelineProbe:
//
//   swift build -c release --product StyleProbe
//   strip --strip-debug -o /tmp/style-probe .build/release/StyleProbe
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measured*' /tmp/style-probe [LOCATIONS [ROUNDS]]

@inline(never)
func measuredLayering(_ fixtures: PublicationFixtures) -> Int {
    var total = 0
    for change in fixtures.changes { total &+= change.style.isEmpty ? 0 : 1 }
    return total
}

@inline(never)
func measuredDiff(_ fixtures: PublicationFixtures) -> Int {
    var total = 0
    for (new, old) in fixtures.styles { total &+= Int(truncatingIfNeeded: new.changedFieldSet(from: old).bits) }
    return total
}

@inline(never)
func measuredEquality(_ fixtures: PublicationFixtures) -> Int {
    var total = 0
    for (new, old) in fixtures.styles where new == old { total &+= 1 }
    return total
}

@inline(never)
func measuredEncoding(_ fixtures: PublicationFixtures) -> Int {
    var stream = JSONStream(capacity: 512)
    var total = 0
    for (new, _) in fixtures.styles {
        stream.reset()
        new.write(to: &stream)
        total &+= stream.bytes.count
    }
    return total
}

@inline(never)
func measuredPayload(_ fixtures: PublicationFixtures) -> Int {
    var stream = JSONStream(capacity: 1024)
    var total = 0
    for change in fixtures.changes {
        stream.reset()
        change.write(to: &stream)
        total &+= stream.bytes.count
    }
    return total
}

let locations = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 10_000
let rounds = CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 7
let fixtures = PublicationFixtures(locations: locations, updates: 100_000)
let clock = ContinuousClock()
var sink = 0
for (name, work) in [
    ("layering", measuredLayering), ("diff", measuredDiff), ("equality", measuredEquality), ("json", measuredEncoding),
    ("payload", measuredPayload),
] as [(String, (PublicationFixtures) -> Int)] {
    var times: [Double] = []
    for _ in 0..<rounds {
        let elapsed = clock.measure { sink &+= work(fixtures) }
        times.append((Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9) / Double(fixtures.changes.count))
    }
    times.sort()
    print("\(name): \(Int(times[times.count / 2])) ns per change (median of \(rounds) rounds of \(fixtures.changes.count) changes; best \(Int(times[0])))")
}
if sink == 42 { print("") }
