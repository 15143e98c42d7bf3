import Foundation
import LiveDataConfiguration
import LiveState
import LiveTopics

extension StateView {
    /// `{"locations": [records…], "summaries": [summaries…], "legend": {…}}` for a scope:
    /// what a new viewer of the floor or venue view starts from.
    func snapshotJSON(_ scope: EventScope) -> [UInt8] {
        let all = store.summaries.all()
        let summaries = all.filter { scope.holds(.place($0.key)) }
        var records: [LocationRecord] = []
        if scope.summariesOnly {
            // The facades' counts alone.
        } else if let location = scope.location {
            records = store.records(id: location).filter { scope.holds(.location($0.address)) }
        } else {
            // The floors in scope, read through the floor index.
            for summary in all where summary.key.floor != nil && scope.holdsFloor(summary.key) {
                records += store.records(floor: summary.key).filter { scope.holds(.location($0.address)) }
            }
        }
        let now = LiveTimestamp.now
        let text = "{\"locations\": [" + records.map(\.json).joined(separator: ", ") + "], \"summaries\": ["
            + summaries.map { $0.json(updatedAt: now) }.joined(separator: ", ") + "], \"legend\": "
            + config.ruleSet.legend(dataset: scope.dataset).json + "}"
        return Array(text.utf8)
    }

    /// The venue page's plan of a venue: its buildings' footprints and floors (with their
    /// elevations and the default floor), and the view's thresholds.
    func venueLayout(dataset: String, venue: String) -> VenueLayout {
        let settings = config.venueView
        let outlines = (config.geometry?.buildings ?? []).filter { $0.place.dataset == dataset && $0.place.venue == venue }
        // Floors that report without shapes are still floors of their building.
        var reported: [String: Set<String>] = [:]
        for summary in store.summaries.all() where summary.key.dataset == dataset && summary.key.venue == venue {
            if let floor = summary.key.floor { reported[summary.key.building, default: []].insert(floor) }
        }
        let buildings = outlines.map { outline -> VenueLayout.Building in
            let building = outline.place.building
            let configured = settings.buildings[building]
            var elevations: [String: Double] = [:]
            for floor in outline.floors { elevations[floor.floor] = floor.elevation }
            for (floor, elevation) in configured?.elevations ?? [:] { elevations[floor] = elevation }
            let names = Set(outline.floors.map(\.floor)).union(reported[building] ?? [])
            let floors = names.sorted { a, b in
                switch (elevations[a], elevations[b]) {
                case (let x?, let y?) where x != y: return x < y
                case (.some, nil): return true
                case (nil, .some): return false
                default: return a < b
                }
            }.map { VenueLayout.Floor(floor: $0, elevation: elevations[$0]) }
            let defaultFloor =
                configured?.defaultFloor.flatMap { names.contains($0) ? $0 : nil }
                ?? floors.first { $0.elevation == 0 }?.floor ?? floors.first?.floor
            return VenueLayout.Building(
                building: building, name: outline.name, footprint: outline.footprint, floors: floors, defaultFloor: defaultFloor)
        }
        return VenueLayout(
            dataset: dataset, venue: venue,
            view: .init(autoFocus: settings.autoFocus, indoorZoom: settings.indoorZoom, outdoorZoom: settings.outdoorZoom),
            buildings: buildings)
    }
}

extension EventScope {
    /// Whether some location of this floor may be in scope.
    func holdsFloor(_ place: Place) -> Bool {
        (dataset == nil || dataset == place.dataset) && (venue == nil || venue == place.venue)
            && (buildings.isEmpty || buildings.contains(place.building)) && (floor == nil || floor == place.floor)
    }
}

/// `GET /v1/venues/{dataset}/{venue}`: what the venue page draws before anything is live.
public struct VenueLayout: Codable, Sendable, Equatable {
    public struct View: Codable, Sendable, Equatable {
        public var autoFocus: Bool
        public var indoorZoom: Double
        public var outdoorZoom: Double
    }

    public struct Floor: Codable, Sendable, Equatable {
        public var floor: String
        /// Metres; none when neither the geometry nor the config gives one.
        public var elevation: Double?
    }

    public struct Building: Codable, Sendable, Equatable {
        public var building: String
        public var name: String?
        /// Outer rings of `[x, y]`, in the geometry's coordinates.
        public var footprint: [[[Double]]]
        /// Lowest first (floors without an elevation last, by name).
        public var floors: [Floor]
        /// `venueView.buildings.{building}.defaultFloor`, else the floor at elevation 0, else the lowest.
        public var defaultFloor: String?
    }

    public var dataset: String
    public var venue: String
    public var view: View
    public var buildings: [Building]
}
