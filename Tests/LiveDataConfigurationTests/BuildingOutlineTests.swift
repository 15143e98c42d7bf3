import Foundation
import Testing

@testable import LiveDataConfiguration

/// The buildings the venue view draws from afar: their footprints (their own feature, else
/// the outline around their shapes) and their floors' elevations; and `venueView:`.
@Suite("Building outlines and venue view settings")
struct BuildingOutlineTests {
    static let geometry = """
        {"type": "FeatureCollection", "features": [
          {"type": "Feature", "properties": {"id": "a-1", "dataset": "ds", "venue": "v", "building": "A", "floor": "F1", "elevation": 0},
           "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 3], [0, 3], [0, 0]]]}},
          {"type": "Feature", "properties": {"id": "a-2", "dataset": "ds", "venue": "v", "building": "A", "floor": "F2"},
           "geometry": {"type": "Polygon", "coordinates": [[[2, 2], [6, 2], [6, 8], [2, 8], [2, 2]]]}},
          {"type": "Feature", "properties": {"id": "a-f2", "kind": "floor", "elevation": 4.5, "dataset": "ds", "venue": "v", "building": "A", "floor": "F2"},
           "geometry": {"type": "Polygon", "coordinates": [[[1, 1], [2, 1], [2, 2], [1, 1]]]}},
          {"type": "Feature", "properties": {"id": "b", "kind": "building", "name": "North", "dataset": "ds", "venue": "v", "building": "B"},
           "geometry": {"type": "Polygon", "coordinates": [[[20, 0], [30, 0], [30, 10], [20, 0]]]}},
          {"type": "Feature", "properties": {"id": "b-1", "dataset": "ds", "venue": "v", "building": "B", "floor": "L0", "elevation": -4},
           "geometry": {"type": "Polygon", "coordinates": [[[21, 1], [22, 1], [22, 2], [21, 1]]]}},
          {"type": "Feature", "properties": {"id": "asset-1"}, "geometry": {"type": "Point", "coordinates": [3, 3]}}
        ]}
        """

    @Test("a building without a feature of its own gets the convex outline of every shape on every floor; one with a feature gets that; elevations come from a floor's outline first")
    func outlines() throws {
        let geometry = try VenueGeometry(geoJSON: Data(Self.geometry.utf8), file: "venue.geojson")
        #expect(geometry.buildings.map(\.place.building) == ["A", "B"])
        let a = geometry.buildings[0]
        // The hull of both floors' rooms and the floor outline: (0,0) (4,0) (6,2) (6,8) (2,8) (0,3).
        #expect(a.footprint == [[[0, 0], [4, 0], [6, 2], [6, 8], [2, 8], [0, 3], [0, 0]]])
        #expect(a.floors == [.init(floor: "F1", elevation: 0), .init(floor: "F2", elevation: 4.5)])
        let b = geometry.buildings[1]
        #expect(b.name == "North")
        #expect(b.footprint == [[[20, 0], [30, 0], [30, 10], [20, 0]]])
        #expect(b.floors == [.init(floor: "L0", elevation: -4)])
        // Outlines are not locations: no floor draws them.
        #expect(geometry.features(dataset: "ds", venue: "v", building: "A", floor: "F2", ids: []).map(\.id) == ["a-2"])
        #expect(try VenueGeometry(geoJSON: Data(geometry.geoJSON.utf8), file: "again") == geometry)
    }

    @Test("an outline without its place, a point as an outline, an unknown kind and a bad elevation are refused with the feature named")
    func refused() {
        let text = """
            {"type": "FeatureCollection", "features": [
              {"type": "Feature", "properties": {"id": "x", "kind": "building", "dataset": "ds"},
               "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}},
              {"type": "Feature", "properties": {"id": "y", "kind": "floor", "dataset": "ds", "venue": "v", "building": "A", "floor": "F1"},
               "geometry": {"type": "Point", "coordinates": [0, 0]}},
              {"type": "Feature", "properties": {"id": "z", "kind": "wing"}, "geometry": {"type": "Point", "coordinates": [0, 0]}},
              {"type": "Feature", "properties": {"id": "w", "elevation": "high"}, "geometry": {"type": "Point", "coordinates": [0, 0]}}
            ]}
            """
        #expect {
            try VenueGeometry(geoJSON: Data(text.utf8), file: "venue.geojson")
        } throws: { error in
            let problems = (error as? GeometryErrors)?.problems ?? []
            return problems.map(\.feature) == [0, 1, 2, 3] && problems[0].message.contains("dataset, venue and building")
                && problems[1].message.contains("Polygon") && problems[2].message.contains("\"wing\"")
                && problems[3].message.contains("elevation")
        }
    }

    @Test("venueView: thresholds, auto focus and per-building floors load; an outdoor zoom above the indoor one is refused")
    func settings() throws {
        let config = try LiveDataConfig.parse(
            yaml: """
                venueView:
                  autoFocus: false
                  indoorZoom: 19
                  outdoorZoom: 18
                  buildings:
                    B2: {defaultFloor: F2, elevations: {F1: -4, F2: 0}}
                """, file: "t.yaml", environment: [:])
        #expect(config.venueView.autoFocus == false)
        #expect(config.venueView.indoorZoom == 19 && config.venueView.outdoorZoom == 18)
        #expect(config.venueView.buildings["B2"] == .init(defaultFloor: "F2", elevations: ["F1": -4, "F2": 0]))
        let defaults = try LiveDataConfig.parse(yaml: "rules: []\n", file: "t.yaml", environment: [:])
        #expect(defaults.venueView == VenueViewSettings())
        #expect(throws: ConfigErrors.self) {
            try LiveDataConfig.parse(yaml: "venueView: {indoorZoom: 17, outdoorZoom: 18}\n", file: "t.yaml", environment: [:])
        }
        #expect(throws: ConfigErrors.self) {
            try LiveDataConfig.parse(yaml: "venueView: {buildings: {B: {floor: F1}}}\n", file: "t.yaml", environment: [:])
        }
    }
}
