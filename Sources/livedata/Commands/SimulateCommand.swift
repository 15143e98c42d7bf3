import ArgumentParser
import Foundation
import LiveDataConfiguration
import LiveTopics
import Mosquitto

struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Publish a realistic synthetic venue feed: the demo feed and the load generator.",
        discussion: """
            Buildings, floors, meeting rooms, desks and assets: meeting rooms fill and empty \
            over a working day (with the CO2 and temperature that follow), desks are booked and \
            freed, assets move along corridors, between floors and between buildings. Every \
            other building stands a storey lower, so floor numbers do not line up across \
            buildings; --write-geometry writes each floor's elevation. Topics: \
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

    @Option(help: "How many locations to simulate (rooms, desks and assets), 20 a floor.")
    var locations = 180

    @Option(help: "Floors per building: the locations fill buildings of this many floors, side by side.")
    var floors = 3

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

    @Option(help: ArgumentHelp("The simulated day's hour to start at (0-24, such as 9.5), so that rooms fill at once in a demo; default: the time now.", valueName: "hour"))
    var startHour: Double?

    @Option(help: ArgumentHelp("Write the venue's floor plans (rooms, desks and assets as GeoJSON, for the daemon's geometry: key) to this file and exit.", valueName: "file"))
    var writeGeometry: String?

    @Flag(name: .shortAndLong, help: "Log connection details on standard error.")
    var verbose = false

    func validate() throws {
        if locations < 1 { throw ValidationError("--locations must be at least 1") }
        if floors < 1 { throw ValidationError("--floors must be at least 1") }
        if rate <= 0 { throw ValidationError("--rate must be more than 0") }
        if speed <= 0 { throw ValidationError("--speed must be more than 0") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be more than 0 seconds") }
        if let startHour, !(0...24).contains(startHour) { throw ValidationError("--start-hour must be from 0 to 24") }
        for (name, value) in [("dataset", dataset), ("venue", venue)] {
            if value.isEmpty || value.contains(where: { "/+#".contains($0) }) {
                throw ValidationError("--\(name) must be one topic level, without '/', '+' or '#'")
            }
        }
    }

    func run() async throws {
        if let writeGeometry {
            let venue = SimulatedVenue(dataset: dataset, venue: self.venue, locations: locations, floors: floors)
            let geometry = venue.geometry()
            do {
                try geometry.geoJSON.write(toFile: writeGeometry, atomically: true, encoding: .utf8)
            } catch {
                throw CommandFailure(message: "cannot write \(writeGeometry): \(error.localizedDescription)", exitCode: 1)
            }
            printError(
                "wrote \(geometry.features.count) shapes on \(geometry.buildings.map(\.floors.count).reduce(0, +)) floor plans of \(geometry.buildings.count) buildings to \(writeGeometry)")
            return
        }
        let client = try MQTTClient(configuration: broker.configuration(), logger: makeLogger(verbose: verbose))
        try await client.connect()
        var venue = SimulatedVenue(dataset: dataset, venue: self.venue, locations: locations, floors: floors)
        let clock = ContinuousClock()
        let start = clock.now
        let interval = Duration.seconds(1 / rate)
        let startOfDay = startHour.map { hour in
            Calendar(identifier: .gregorian).startOfDay(for: Date()).addingTimeInterval(hour * 3600)
        } ?? Date()
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

/// A venue of several buildings whose rooms fill over a working day, and whose assets move
/// between floors and buildings.
///
/// Buildings stand in rows of five, 80 m apart; each has `floors` storeys of 4 m, and every
/// other one stands a storey lower on its slope, so that its floor numbers do not line up
/// with its neighbours': floor F2 of B1 is at the elevation of F3 of B2.
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
        /// An asset's place in its building's corridor, in metres from the building's corner.
        var x = 10.0
    }

    private(set) var locations: [Location] = []
    private var random = SystemRandomNumberGenerator()
    let floorsPerBuilding: Int
    let buildingCount: Int
    static let locationsPerFloor = 20
    static let storey = 4.0
    /// Where the venue's south-west corner is (longitude, latitude).
    static let origin = (longitude: 12.5683, latitude: 55.6761)

    init(dataset: String, venue: String, locations count: Int, floors: Int = 3) {
        floorsPerBuilding = max(floors, 1)
        let floorCount = (count + Self.locationsPerFloor - 1) / Self.locationsPerFloor
        buildingCount = (floorCount + floorsPerBuilding - 1) / floorsPerBuilding
        for number in 0..<count {
            let floorNumber = number / Self.locationsPerFloor
            let buildingIndex = floorNumber / floorsPerBuilding
            let index = floorNumber % floorsPerBuilding
            let building = "B\(buildingIndex + 1)"
            let slot = number % Self.locationsPerFloor
            let room = "R\(index + 1)\(String(format: "%02d", slot / 4 + 1))"
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
                dataset: dataset, venue: venue, building: building, floor: Self.floorName(index), room: room, location: id)
            locations.append(Location(address: address, kind: kind, floorIndex: index, x: 4 + Double(slot) * 2.5))
        }
    }

    static func floorName(_ index: Int) -> String { "F\(index + 1)" }

    /// The elevation of floor `index` (from 0) of building `building` (from 0), in metres.
    static func elevation(building: Int, floor index: Int) -> Double {
        Double(index - building % 2) * storey
    }

    /// The building's number (from 0) in `B{n}`.
    static func buildingIndex(_ building: String) -> Int { (Int(building.dropFirst()) ?? 1) - 1 }

    /// A point of building `index`'s plan (metres from its corner) as longitude and latitude.
    static func lonLat(building index: Int, _ x: Double, _ y: Double) -> [Double] {
        let east = Double(index % 5) * 80 + x
        let north = Double(index / 5) * 50 + y
        let metresPerDegreeLongitude = 111_320 * cos(origin.latitude * .pi / 180)
        let longitude = origin.longitude + east / metresPerDegreeLongitude
        let latitude = origin.latitude + north / 110_540
        return [(longitude * 1e7).rounded() / 1e7, (latitude * 1e7).rounded() / 1e7]
    }

    /// An asset's address on floor `index` (from 0) of a building, in that floor's first room.
    static func moved(_ address: LocationAddress, toBuilding building: String, floor index: Int) -> LocationAddress {
        LocationAddress(
            dataset: address.dataset, venue: address.venue, building: building, floor: floorName(index),
            room: "R\(index + 1)01", location: address.location)
    }

    /// Floor plans of the venue in longitude and latitude: on each floor the meeting rooms
    /// side by side along the north wall, a corridor, and the desks in open-plan clusters
    /// to the south; each floor's outline with its elevation. Assets are points drawn on
    /// whichever floor they report from, at the position they report.
    func geometry() -> VenueGeometry {
        func rectangle(_ building: Int, _ x: Double, _ y: Double, _ width: Double, _ height: Double) -> VenueGeometry.Shape {
            let corners = [(x, y), (x + width, y), (x + width, y + height), (x, y + height), (x, y)]
            return .polygon([corners.map { Self.lonLat(building: building, $0.0, $0.1) }])
        }
        var features: [VenueGeometry.Feature] = []
        var floors: [String: (rooms: Int, desks: Int, assets: Int)] = [:]
        var outlined: Set<String> = []
        for location in locations {
            let address = location.address
            let building = Self.buildingIndex(address.building)
            let floorKey = "\(address.building)/\(address.floor)"
            if outlined.insert(floorKey).inserted {
                var outline = VenueGeometry.Feature(
                    id: "floor-\(address.building)-\(address.floor)", dataset: address.dataset, venue: address.venue,
                    building: address.building, floor: address.floor, shape: rectangle(building, 0, 0, 60, 30))
                outline.kind = .floor
                outline.elevation = Self.elevation(building: building, floor: location.floorIndex)
                features.append(outline)
            }
            var counts = floors[floorKey, default: (0, 0, 0)]
            let shape: VenueGeometry.Shape
            var placed = true
            switch location.kind {
            case .room:
                // 8 rooms a floor, 7.5 m wide, 12 m deep, north of the corridor (y 18-30).
                shape = rectangle(building, Double(counts.rooms % 8) * 7.5, 18 + Double(counts.rooms / 8) * 12, 7.5, 12)
                counts.rooms += 1
            case .desk:
                // Clusters of 6 desks (2 rows), 3 m x 1.6 m each.
                let cluster = counts.desks / 6
                let seat = counts.desks % 6
                let x = 4 + Double(cluster % 2) * 30 + Double(seat % 3) * 3.4 + Double(cluster / 2) * 12
                let y = 4 + Double(seat / 3) * 2.2 + Double(cluster / 4) * 8
                shape = rectangle(building, x, y, 3, 1.6)
                counts.desks += 1
            case .asset:
                shape = .point(Self.lonLat(building: building, location.x, 15))
                counts.assets += 1
                placed = false
            }
            floors[floorKey] = counts
            features.append(
                VenueGeometry.Feature(
                    id: address.location, name: nil, dataset: placed ? address.dataset : nil, venue: placed ? address.venue : nil,
                    building: placed ? address.building : nil, floor: placed ? address.floor : nil, shape: shape))
        }
        return VenueGeometry(features: features)
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
            // Along its building's corridor; now and then it rides the lift, and more rarely
            // it crosses to the next building, onto the floor at the elevation it left.
            location.x = min(58, max(2, location.x + Double.random(in: -3...3, using: &random)))
            let roll = Double.random(in: 0...1, using: &random)
            var building = Self.buildingIndex(location.address.building)
            if roll < 0.02, buildingCount > 1 {
                let elevation = Self.elevation(building: building, floor: location.floorIndex)
                building = (building + 1) % buildingCount
                let level = Int((elevation / Self.storey).rounded()) + building % 2
                location.floorIndex = min(max(level, 0), floorsPerBuilding - 1)
                location.x = 2
                location.address = Self.moved(location.address, toBuilding: "B\(building + 1)", floor: location.floorIndex)
            } else if roll < 0.07 {
                location.floorIndex = Int.random(in: 0..<floorsPerBuilding, using: &random)
                location.address = Self.moved(location.address, toBuilding: location.address.building, floor: location.floorIndex)
            }
            let position = Self.lonLat(building: building, location.x, 15)
            domain = .position
            properties[DomainProperty.latitude] = String(format: "%.7f", position[1])
            properties[DomainProperty.longitude] = String(format: "%.7f", position[0])
            properties[DomainProperty.floorIndex] = String(location.floorIndex)
        }
        locations[index] = location
        let update = LiveUpdate(
            topic: location.address.topic(domain: domain.rawValue), timestamp: timestamp, originSourceId: "simulator",
            properties: properties)
        return (update.topic.description, update.payload)
    }
}
