import DisplayRules
import LiveDataConfiguration
import LiveState
import LiveTopics

/// The state as the HTTP routes and the floor view's event stream may see it: read-only
/// answers over the store and the config. Made by ``LivePipeline/read(_:)`` on the
/// pipeline for the length of one query, so that every answer is of one moment; never kept.
struct StateView {
    let store: LiveStore
    let config: LiveDataConfig

    /// The records of every location with this id (the topic's location level): one per
    /// dataset that has it, in address order.
    func records(id: String) -> [LocationRecord] { store.records(id: id) }

    /// The current record of a location.
    func record(_ address: LocationAddress) -> LocationRecord? { store[address] }

    /// Every location of a floor.
    func floor(_ key: Place) -> [LocationRecord] { store.records(floor: key) }

    /// Every layer the rules and styles name, and whether it is hidden.
    var layers: [LiveQueries.Layer] {
        let hidden = store.hiddenLayers
        return Set(config.ruleSet.layers).union(hidden).sorted().map { LiveQueries.Layer(name: $0, hidden: hidden.contains($0)) }
    }

    /// Every floor and building with locations, and their summaries, in key order.
    var summaries: [SummaryTracker.Summary] { store.summaries.all() }

    /// The legend for a dataset.
    func legend(dataset: String?) -> Legend { config.ruleSet.legend(dataset: dataset) }

    /// Floors the geometry places shapes on, whether or not a location reported there yet.
    var geometryFloors: [Place] {
        guard let geometry = config.geometry else { return [] }
        return Set(
            geometry.features.compactMap { feature -> Place? in
                guard let dataset = feature.dataset, let venue = feature.venue, let building = feature.building,
                    let floor = feature.floor
                else { return nil }
                return Place(dataset: dataset, venue: venue, building: building, floor: floor)
            }
        ).sorted()
    }

    /// `{"features": [GeoJSON features…]}`: the shapes drawn on a floor (see
    /// ``VenueGeometry/features(dataset:venue:building:floor:ids:)``); empty without a
    /// `geometry:` file.
    func geometryJSON(_ key: Place) -> String {
        guard let geometry = config.geometry, let floor = key.floor else { return #"{"features": []}"# }
        let ids = Set(store.records(floor: key).map(\.address.location))
        let features = geometry.features(dataset: key.dataset, venue: key.venue, building: key.building, floor: floor, ids: ids)
        return "{\"features\": [" + features.map(\.geoJSON).joined(separator: ", ") + "]}"
    }
}
