import LiveTopics
import Yams

/// `venueView:` — how the venue page (`/venues/{dataset}/{venue}`) moves between the
/// outdoor view, where every building is a facade, and a building's floor.
public struct VenueViewSettings: Sendable, Equatable {
    /// Per building (`venueView.buildings.{building}`): its default floor and its floors' elevations.
    public struct Building: Sendable, Equatable {
        /// `defaultFloor`: shown when nothing else chooses (default: the floor at elevation
        /// 0, else the lowest, else the first by name).
        public var defaultFloor: String?
        /// `elevations` (`{floor: metres}`): override the geometry's `properties.elevation`.
        public var elevations: [String: Double] = [:]

        public init(defaultFloor: String? = nil, elevations: [String: Double] = [:]) {
            self.defaultFloor = defaultFloor
            self.elevations = elevations
        }
    }

    /// `autoFocus` (default true): the building most centred in view opens past
    /// ``indoorZoom``; off, a click opens one.
    public var autoFocus = true
    /// `indoorZoom` (default 18.5): the zoom level from which a building opens.
    public var indoorZoom = 18.5
    /// `outdoorZoom` (default 17.5): below it every building is a facade again. Lower than
    /// ``indoorZoom``, so that a view between the two keeps what it shows.
    public var outdoorZoom = 17.5
    /// `buildings`, by building id.
    public var buildings: [String: Building] = [:]

    public init() {}
}

extension LiveDataConfig {
    static func readVenueView(_ node: Node, _ reader: ConfigReader) -> VenueViewSettings {
        var view = VenueViewSettings()
        var indoorNode: Node?
        for (key, _, value) in reader.mapping(node, "venueView", allowed: ConfigKeys.keys(of: "venueView")) {
            switch key {
            case "autoFocus": view.autoFocus = reader.bool(value, "venueView.autoFocus") ?? view.autoFocus
            case "indoorZoom":
                indoorNode = value
                view.indoorZoom = reader.double(value, "venueView.indoorZoom", range: 1...24) ?? view.indoorZoom
            case "outdoorZoom": view.outdoorZoom = reader.double(value, "venueView.outdoorZoom", range: 1...24) ?? view.outdoorZoom
            case "buildings":
                for (building, _, entry) in reader.mapping(value, "venueView.buildings", allowed: nil) {
                    view.buildings[building] = readBuilding(entry, reader, building)
                }
            default: reader.error(value, "venueView.\(key) is a key the loader lists but does not read: this build cannot apply it")
            }
        }
        if view.outdoorZoom > view.indoorZoom {
            reader.error(
                indoorNode ?? node,
                "venueView.outdoorZoom (\(jsonNumber(view.outdoorZoom))) must not be above venueView.indoorZoom (\(jsonNumber(view.indoorZoom)))")
        }
        return view
    }

    private static func readBuilding(_ node: Node, _ reader: ConfigReader, _ building: String) -> VenueViewSettings.Building {
        var settings = VenueViewSettings.Building()
        let section = "venueView.buildings.\(building)"
        for (key, _, value) in reader.mapping(node, section, allowed: ConfigKeys.keys(of: "venueView.buildings.*")) {
            switch key {
            case "defaultFloor": settings.defaultFloor = reader.nonEmptyString(value, "\(section).defaultFloor")
            case "elevations":
                for (floor, _, metres) in reader.mapping(value, "\(section).elevations", allowed: nil) {
                    if let elevation = reader.double(metres, "\(section).elevations.\(floor)", range: -10_000...10_000) {
                        settings.elevations[floor] = elevation
                    }
                }
            default: reader.error(value, "\(section).\(key) is a key the loader lists but does not read: this build cannot apply it")
            }
        }
        return settings
    }
}
