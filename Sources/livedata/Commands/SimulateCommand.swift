import ArgumentParser
import Foundation
import LiveTopics
import Mosquitto

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Publish a realistic synthetic venue feed: the demo feed and the load generator.",
        discussion: """
            Buildings, floors, meeting rooms, desks and assets: meeting rooms fill and empty \
            over a working day (with the CO2 and temperature that follow), desks are booked and \
            freed, assets move between floors. Topics: \
            {dataset}/{venue}/B{n}/F{n}/R{n}{nn}/{room-|desk-|asset-}…/{domain}, matching \
            config/livedata.yaml. A progress line goes to standard error.

            Examples:
              livedata simulate                              # 20 updates/s, until Ctrl-C
              livedata simulate --rate 5000 --locations 100000 --duration 60
              livedata simulate --speed 60                   # a working hour per minute
            """
    )

    @OptionGroup(title: "Broker")
    var broker: BrokerOptions

    @Option(help: "Dataset (first topic level).")
    var dataset = "demo"

    @Option(help: "Venue (second topic level).")
    var venue = "hq"

    @Option(help: "How many locations to simulate (rooms, desks and assets).")
    var locations = 60

    @Option(help: "Updates per second.")
    var rate = 20.0

    @Option(help: "Stop after this many seconds (default: run until interrupted).")
    var duration: Double?

    @Option(help: "How fast the simulated working day runs: 1 is real time, 60 is an hour per minute.")
    var speed = 1.0

    @Option(help: "QoS of the updates.")
    var qos: MQTTQoS = .atLeastOnce

    @Flag(help: "Publish the updates retained.")
    var retain = false

    @Flag(name: .shortAndLong, help: "Log connection details on standard error.")
    var verbose = false

    func validate() throws {
        if locations < 1 { throw ValidationError("--locations must be at least 1") }
        if rate <= 0 { throw ValidationError("--rate must be more than 0") }
        if speed <= 0 { throw ValidationError("--speed must be more than 0") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be more than 0 seconds") }
        for (name, value) in [("dataset", dataset), ("venue", venue)] {
            if value.isEmpty || value.contains(where: { "/+#".contains($0) }) {
                throw ValidationError("--\(name) must be one topic level, without '/', '+' or '#'")
            }
        }
    }

    func run() async throws {
        let client = try MQTTClient(configuration: broker.configuration(), logger: makeLogger(verbose: verbose))
        try await client.connect()
        var venue = SimulatedVenue(dataset: dataset, venue: self.venue, locations: locations)
        let clock = ContinuousClock()
        let start = clock.now
        let interval = Duration.seconds(1 / rate)
        let startOfDay = Date()
        var next = start
        var published = 0
        var failed = 0
        var lastReport = start
        let terminal = isatty(STDERR_FILENO) == 1
        while true {
            let now = clock.now
            if let duration, now - start >= .milliseconds(Int64(duration * 1000)) { break }
            let elapsed = now - start
            let simulated = startOfDay.addingTimeInterval(
                (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) * speed)
            let (topic, payload) = venue.nextUpdate(at: simulated)
            do {
                try client.send(topic, payload: Array(payload.utf8), qos: qos, retain: retain)
                published += 1
            } catch {
                failed += 1
            }
            if now - lastReport >= .seconds(1) {
                let seconds = Double((now - start).components.seconds) + Double((now - start).components.attoseconds) / 1e18
                let line = "published \(published) updates (\(String(format: "%.1f", Double(published) / max(seconds, 0.001)))/s) for \(locations) locations" + (failed > 0 ? ", \(failed) refused while disconnected" : "")
                if terminal {
                    FileHandle.standardError.write(Data(("\r" + line + "   ").utf8))
                } else if Int(seconds) % 5 == 0 {
                    printError(line)
                }
                lastReport = now
            }
            next = next + interval
            if next > clock.now { try await clock.sleep(until: next) } else if clock.now - next > .seconds(1) { next = clock.now }
        }
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
        await client.disconnect()
        printError("published \(published) updates" + (failed > 0 ? "; \(failed) refused while disconnected" : ""))
    }
}

/// A venue whose rooms fill over a working day.
struct SimulatedVenue {
    enum Kind {
        case room(capacity: Int)
        case desk
        case asset
    }

    struct Location {
        var address: LocationAddress
        var kind: Kind
        var people = 0
        var co2 = 450.0
        var temperature = 21.0
        var booked = false
        var floorIndex = 0
        var latitude = 55.6761
        var longitude = 12.5683
    }

    private(set) var locations: [Location] = []
    private var random = SystemRandomNumberGenerator()

    static let floorsPerBuilding = 3

    /// An asset's address on floor `index` (from 0) of its building, in that floor's first room.
    static func moved(_ address: LocationAddress, toFloor index: Int) -> LocationAddress {
        LocationAddress(
            dataset: address.dataset, venue: address.venue, building: address.building, floor: "F\(index + 1)",
            room: "R\(index + 1)01", location: address.location)
    }

    init(dataset: String, venue: String, locations count: Int) {
        let floorsPerBuilding = Self.floorsPerBuilding
        let locationsPerFloor = 20
        for number in 0..<count {
            let floorNumber = number / locationsPerFloor
            let building = "B\(floorNumber / floorsPerBuilding + 1)"
            let floor = "F\(floorNumber % floorsPerBuilding + 1)"
            let slot = number % locationsPerFloor
            let room = "R\(floorNumber % floorsPerBuilding + 1)\(String(format: "%02d", slot / 4 + 1))"
            let kind: Kind
            let id: String
            // Ids are unique in the dataset: a location is its dataset and id.
            switch number % 10 {
            case 0..<4:
                kind = .room(capacity: [4, 6, 8, 12][number % 4])
                id = "room-\(building)-\(room.dropFirst())-\(slot)"
            case 4..<9:
                kind = .desk
                id = "desk-\(building)-\(room.dropFirst())-\(slot)"
            default:
                kind = .asset
                id = "asset-\(number / 10 + 1)"
            }
            let address = LocationAddress(
                dataset: dataset, venue: venue, building: building, floor: floor, room: room, location: id)
            locations.append(Location(address: address, kind: kind, floorIndex: floorNumber % floorsPerBuilding))
        }
    }

    /// How busy the building is at this time of day: 0 at night, about 0.7 at the peaks.
    static func busyness(at date: Date) -> Double {
        let hour = Double(Calendar(identifier: .gregorian).component(.hour, from: date))
            + Double(Calendar(identifier: .gregorian).component(.minute, from: date)) / 60
        switch hour {
        case ..<7, 20...: return 0.02
        case 7..<10: return 0.02 + (hour - 7) / 3 * 0.68
        case 10..<12: return 0.7
        case 12..<13: return 0.4
        case 13..<16: return 0.65
        default: return max(0.02, 0.65 - (hour - 16) / 4 * 0.63)
        }
    }

    /// The next update: a random location, one of its domains, drifted toward the time of day.
    mutating func nextUpdate(at date: Date) -> (topic: String, payload: String) {
        let index = Int.random(in: 0..<locations.count, using: &random)
        var location = locations[index]
        let busy = Self.busyness(at: date)
        // The simulated clock only drives how busy it is; updates carry the real time, so that
        // a restarted simulator is never older than what the daemon stored.
        let timestamp = LiveTimestamp.now
        let domain: BuiltInDomain
        var properties = LiveProperties()
        switch location.kind {
        case .room(let capacity):
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                let target = Int((Double(capacity) * busy * Double.random(in: 0.3...1.5, using: &random)).rounded())
                location.people = max(0, min(capacity + 1, location.people + (target > location.people ? 1 : target < location.people ? -1 : 0)))
                domain = .occupancy
                properties[DomainProperty.nrOfPeople] = String(location.people)
                properties[DomainProperty.capacity] = String(capacity)
            case 1:
                location.co2 += (420 + Double(location.people) * 90 - location.co2) * 0.2 + Double.random(in: -15...15, using: &random)
                domain = .co2
                properties[DomainProperty.co2Level] = String(Int(location.co2.rounded()))
            default:
                location.temperature += (20.5 + Double(location.people) * 0.4 - location.temperature) * 0.1
                    + Double.random(in: -0.1...0.1, using: &random)
                domain = .temperature
                properties[DomainProperty.temperature] = String(format: "%.1f", location.temperature)
            }
        case .desk:
            if Double.random(in: 0...1, using: &random) < 0.5 { location.booked = Double.random(in: 0...1, using: &random) < busy + 0.1 }
            domain = .availability
            properties[DomainProperty.available] = location.booked ? "false" : "true"
        case .asset:
            location.latitude += Double.random(in: -0.0001...0.0001, using: &random)
            location.longitude += Double.random(in: -0.0001...0.0001, using: &random)
            if Double.random(in: 0...1, using: &random) < 0.05 {
                // It rides the lift: the same asset, placed on another floor of its building.
                location.floorIndex = Int.random(in: 0..<Self.floorsPerBuilding, using: &random)
                location.address = Self.moved(location.address, toFloor: location.floorIndex)
            }
            domain = .position
            properties[DomainProperty.latitude] = String(format: "%.6f", location.latitude)
            properties[DomainProperty.longitude] = String(format: "%.6f", location.longitude)
            properties[DomainProperty.floorIndex] = String(location.floorIndex)
        }
        locations[index] = location
        let update = LiveUpdate(
            topic: location.address.topic(domain: domain.rawValue), timestamp: timestamp, originSourceId: "simulator",
            properties: properties)
        return (update.topic.description, update.payload)
    }
}
