import Foundation
import Testing

@testable import LiveDataConfiguration

@Suite("Floor view geometry")
struct VenueGeometryTests {
    func load(_ text: String) throws(GeometryErrors) -> VenueGeometry {
        try VenueGeometry(geoJSON: Data(text.utf8), file: "venue.geojson")
    }

    @Test("polygons, multipolygons and points load, with their place; 0 and 1 are coordinates, not booleans")
    func loads() throws {
        let geometry = try load(
            """
            {"type": "FeatureCollection", "features": [
              {"type": "Feature", "properties": {"id": "room-1", "name": "Fjord", "dataset": "ds", "venue": "v", "building": "B", "floor": "F1"},
               "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}},
              {"type": "Feature", "properties": {"id": "wing"},
               "geometry": {"type": "MultiPolygon", "coordinates": [[[[2, 2], [3, 2], [3, 3], [2, 2]]], [[[5, 5], [6, 5], [6, 6], [5, 5]]]]}},
              {"type": "Feature", "properties": {"id": "asset-1"}, "geometry": {"type": "Point", "coordinates": [12.5683, 55.6761]}}
            ]}
            """)
        #expect(geometry.features.map(\.id) == ["room-1", "wing", "asset-1"])
        #expect(geometry.features[0].name == "Fjord")
        #expect(geometry.features[0].shape == .polygon([[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]))
        #expect(geometry.features[2].shape == .point([12.5683, 55.6761]))
        // Placed features are drawn on their floor; the others where their id reports.
        let drawn = geometry.features(dataset: "ds", venue: "v", building: "B", floor: "F1", ids: ["asset-1"]).map(\.id)
        #expect(drawn == ["room-1", "asset-1"])
        // What it writes reads back the same.
        #expect(try load(geometry.geoJSON) == geometry)
    }

    @Test("every bad feature is named by index and id, with what was expected")
    func errors() {
        #expect(throws: GeometryErrors.self) { try load("[1, 2]") }
        do {
            _ = try load(
                """
                {"type": "FeatureCollection", "features": [
                  {"type": "Feature", "properties": {"id": "a"}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]}},
                  {"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [0, 0]}},
                  {"type": "Feature", "properties": {"id": "c"}, "geometry": {"type": "Point", "coordinates": [true, 0]}},
                  {"type": "Feature", "properties": {"id": "d"}, "geometry": {"type": "LineString", "coordinates": [[0, 0], [1, 1]]}},
                  {"type": "Feature", "properties": {"id": "e"}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 2]]]}},
                  {"type": "Feature", "properties": {"id": "e"}, "geometry": {"type": "Point", "coordinates": [0, 0]}}
                ]}
                """)
            Issue.record("expected errors")
        } catch {
            let lines = error.description.split(separator: "\n").map(String.init)
            #expect(lines.count == 6)
            #expect(lines[0].hasPrefix(#"venue.geojson: feature 0 (id "a"): a Polygon's coordinates must be rings of at least 4"#))
            #expect(lines[1] == "venue.geojson: feature 1: properties.id (the location id, a string) is missing")
            #expect(lines[2].hasPrefix(#"venue.geojson: feature 2 (id "c"): a Point's coordinates"#))
            #expect(lines[3].contains(#"geometry type "LineString" is not drawn"#))
            #expect(lines[4].contains("each ring closed"))
            #expect(lines[5].contains("also feature 4's"))
        }
    }

    @Test("the config's geometry: key loads the file; a bad one is a config error; unknown unplaced ids are warnings")
    func configKey() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("geometry-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "id,name,type,capacity\nroom-1,Fjord,meetingroom,8\n".write(toFile: directory + "/locations.csv", atomically: true, encoding: .utf8)
        try """
        {"type": "FeatureCollection", "features": [
          {"type": "Feature", "properties": {"id": "room-1"}, "geometry": {"type": "Point", "coordinates": [0, 0]}},
          {"type": "Feature", "properties": {"id": "room-9"}, "geometry": {"type": "Point", "coordinates": [1, 0]}}
        ]}
        """.write(toFile: directory + "/venue.geojson", atomically: true, encoding: .utf8)
        try "catalog: locations.csv\ngeometry: venue.geojson\n".write(toFile: directory + "/ok.yaml", atomically: true, encoding: .utf8)
        let config = try LiveDataConfig.load(path: directory + "/ok.yaml")
        #expect(config.geometry?.features.count == 2)
        #expect(config.warnings.count == 1)
        #expect(config.warnings.first?.contains("room-9") == true)

        try #"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"id": "x"}, "geometry": {"type": "Point", "coordinates": ["a", 0]}}]}"#
            .write(toFile: directory + "/bad.geojson", atomically: true, encoding: .utf8)
        try "geometry: bad.geojson\n".write(toFile: directory + "/bad.yaml", atomically: true, encoding: .utf8)
        #expect {
            _ = try LiveDataConfig.load(path: directory + "/bad.yaml")
        } throws: { error in
            "\(error)".contains(#"bad.yaml:1:11: the geometry: "#) && "\(error)".contains(#"feature 0 (id "x")"#)
        }
    }
}
