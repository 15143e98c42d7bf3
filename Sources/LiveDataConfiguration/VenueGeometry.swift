import Foundation
import LiveTopics

/// Location shapes for the floor view, from a GeoJSON FeatureCollection (`geometry:`): one
/// Feature per location, `properties.id` the location id, a Polygon, MultiPolygon or Point.
/// Coordinates are longitude/latitude (WGS84) or plain metres; the page fits whatever
/// bounds a floor has. A feature may name its place (`properties.dataset`, `venue`,
/// `building`, `floor`) so that it is drawn before its location first reports; without
/// them it is drawn wherever the state has a location with its id.
///
/// For the venue view, a feature may also be a building's footprint (`properties.kind:
/// "building"`, with its dataset, venue and building) or a floor's outline (`"floor"`, with
/// its floor too); any placed feature may give its floor's `properties.elevation` (metres),
/// so that floors of neighbouring buildings line up. A building without a footprint of its
/// own gets the outline around its locations' shapes (``buildings``).
public struct VenueGeometry: Sendable, Equatable {
    public struct Feature: Sendable, Equatable {
        /// What a feature stands for: a location (the default), or a building's or a floor's outline.
        public enum Kind: String, Sendable, Equatable {
            case location, building, floor
        }

        public var id: String
        public var kind: Kind = .location
        /// `properties.elevation`: the height of its floor, in metres.
        public var elevation: Double?
        /// `properties.name`, shown when no style label is set.
        public var name: String?
        /// Where it is drawn before its location reports: any of the four may be missing.
        public var dataset: String?
        public var venue: String?
        public var building: String?
        public var floor: String?
        public var shape: Shape

        public init(
            id: String, name: String? = nil, dataset: String? = nil, venue: String? = nil, building: String? = nil,
            floor: String? = nil, shape: Shape
        ) {
            self.id = id
            self.name = name
            self.dataset = dataset
            self.venue = venue
            self.building = building
            self.floor = floor
            self.shape = shape
        }
    }

    public enum Shape: Sendable, Equatable {
        /// Rings of `[x, y]` points; the first is the outline, the others holes.
        case polygon([[[Double]]])
        case multiPolygon([[[[Double]]]])
        case point([Double])
    }

    public var features: [Feature] {
        didSet { buildings = BuildingOutline.outlines(of: features) }
    }

    /// Every building the features place, with its footprint and floors (made once, when
    /// the geometry is read, since a venue's footprints take every point of every shape).
    public private(set) var buildings: [BuildingOutline]

    public init(features: [Feature] = []) {
        self.features = features
        buildings = BuildingOutline.outlines(of: features)
    }

    /// A problem in the geometry file, with the feature it is in.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var file: String
        /// The feature's index in `features` (from 0) and its id, if the problem is in one.
        public var feature: Int?
        public var id: String?
        public var message: String

        public var description: String {
            guard let feature else { return "\(file): \(message)" }
            return "\(file): feature \(feature)" + (id.map { " (id \"\($0)\")" } ?? "") + ": \(message)"
        }
    }

    /// Reads a FeatureCollection. Every bad feature is reported (not only the first).
    /// - Throws: the problems, when there is any.
    public init(geoJSON data: Data, file: String) throws(GeometryErrors) {
        func fail(_ message: String) -> GeometryErrors { GeometryErrors([Problem(file: file, message: message)]) }
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch let DecodingError.dataCorrupted(context) {
            let cause = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] ?? context.debugDescription
            throw fail("not valid JSON: \(cause)")
        } catch {
            throw fail("not valid JSON: \(error)")
        }
        guard case .object(let collection) = root, collection["type"]?.string == "FeatureCollection" else {
            throw fail(#"expected a GeoJSON object with "type": "FeatureCollection""#)
        }
        guard case .array(let list) = collection["features"] else { throw fail(#"expected "features": [ … ]"#) }
        var problems: [Problem] = []
        var seen: [String: Int] = [:]
        var features: [Feature] = []
        for (index, item) in list.enumerated() {
            func problem(_ message: String, _ id: String? = nil) {
                problems.append(Problem(file: file, feature: index, id: id, message: message))
            }
            guard case .object(let object) = item, object["type"]?.string == "Feature" else {
                problem(#"expected an object with "type": "Feature""#)
                continue
            }
            let properties: [String: JSONValue] = if case .object(let properties) = object["properties"] { properties } else { [:] }
            var kind = VenueGeometry.Feature.Kind.location
            if let name = properties["kind"]?.string {
                guard let known = VenueGeometry.Feature.Kind(rawValue: name) else {
                    problem(#"properties.kind must be "location", "building" or "floor", found "\#(name)""#, properties["id"]?.string)
                    continue
                }
                kind = known
            }
            var elevation: Double?
            if let value = properties["elevation"] {
                guard case .number(let metres) = value, metres.isFinite else {
                    problem("properties.elevation must be a number (metres)", properties["id"]?.string)
                    continue
                }
                elevation = metres
            }
            guard let id = properties["id"]?.string, !id.isEmpty else {
                problem(#"properties.id (the location id, a string) is missing"#)
                continue
            }
            if let first = seen[id] {
                problem("the id is also feature \(first)'s: one feature per location", id)
                continue
            }
            seen[id] = index
            guard case .object(let geometry) = object["geometry"], let type = geometry["type"]?.string else {
                problem(#"expected "geometry": {"type": …, "coordinates": …}"#, id)
                continue
            }
            let shape: Shape
            switch (type, geometry["coordinates"]) {
            case ("Polygon", let coordinates):
                guard let rings = Self.rings(coordinates) else {
                    problem("a Polygon's coordinates must be rings of at least 4 [x, y] points, finite numbers, each ring closed", id)
                    continue
                }
                shape = .polygon(rings)
            case ("MultiPolygon", let coordinates):
                guard case .array(let polygons) = coordinates, !polygons.isEmpty else {
                    problem("a MultiPolygon's coordinates must be a list of polygons", id)
                    continue
                }
                let parsed = polygons.compactMap(Self.rings)
                guard parsed.count == polygons.count else {
                    problem("each polygon of a MultiPolygon must be rings of at least 4 [x, y] points, finite numbers, each ring closed", id)
                    continue
                }
                shape = .multiPolygon(parsed)
            case ("Point", let coordinates):
                guard let point = Self.point(coordinates) else {
                    problem("a Point's coordinates must be [x, y], finite numbers", id)
                    continue
                }
                shape = .point(point)
            default:
                problem("geometry type \"\(type)\" is not drawn: use Polygon, MultiPolygon or Point", id)
                continue
            }
            var feature = Feature(
                id: id, name: properties["name"]?.string, dataset: properties["dataset"]?.string,
                venue: properties["venue"]?.string, building: properties["building"]?.string,
                floor: properties["floor"]?.string, shape: shape)
            feature.kind = kind
            feature.elevation = elevation
            if kind != .location, feature.dataset == nil || feature.venue == nil || feature.building == nil {
                problem("a \(kind.rawValue)'s outline needs properties.dataset, venue and building", id)
                continue
            }
            if kind == .floor, feature.floor == nil {
                problem("a floor's outline needs properties.floor", id)
                continue
            }
            if kind != .location, case .point = shape {
                problem("a \(kind.rawValue)'s outline must be a Polygon or MultiPolygon", id)
                continue
            }
            features.append(feature)
        }
        guard problems.isEmpty else { throw GeometryErrors(problems) }
        self.init(features: features)
    }

    private static func point(_ value: JSONValue?) -> [Double]? {
        guard case .array(let numbers) = value, numbers.count >= 2, case .number(let x) = numbers[0], case .number(let y) = numbers[1],
            x.isFinite, y.isFinite
        else { return nil }
        return [x, y]
    }

    private static func rings(_ value: JSONValue?) -> [[[Double]]]? {
        guard case .array(let list) = value, !list.isEmpty else { return nil }
        var rings: [[[Double]]] = []
        for ring in list {
            guard case .array(let points) = ring, points.count >= 4 else { return nil }
            let parsed = points.compactMap(point)
            guard parsed.count == points.count, parsed.first == parsed.last else { return nil }
            rings.append(parsed)
        }
        return rings
    }

    /// Ids of features without a floor of their own and with no location in `known` (the
    /// catalog's): drawn only where a location with that id reports, so probably a typo.
    public func unplacedUnknownIDs(known: Set<String>) -> [String] {
        features.filter { $0.kind == .location && $0.floor == nil && !known.contains($0.id) }.map(\.id)
    }

    /// The GeoJSON text of this geometry (what `livedata simulate --write-geometry` writes).
    public var geoJSON: String {
        "{\"type\": \"FeatureCollection\", \"features\": [\n" + features.map { "  " + $0.geoJSON }.joined(separator: ",\n") + "\n]}\n"
    }

    /// The features drawn on a floor: those placed on it, and those with the id of a
    /// location the state has there (`ids`).
    public func features(dataset: String, venue: String, building: String, floor: String, ids: Set<String>) -> [Feature] {
        features.filter { feature in
            guard feature.kind == .location else { return false }
            if let placed = feature.floor {
                return placed == floor && (feature.building ?? building) == building && (feature.venue ?? venue) == venue
                    && (feature.dataset ?? dataset) == dataset
            }
            return ids.contains(feature.id)
        }
    }
}

extension VenueGeometry.Feature {
    /// The feature as one line of GeoJSON.
    public var geoJSON: String {
        func point(_ point: [Double]) -> String { "[" + point.map(jsonNumber).joined(separator: ", ") + "]" }
        func ring(_ ring: [[Double]]) -> String { "[" + ring.map(point).joined(separator: ", ") + "]" }
        func polygon(_ rings: [[[Double]]]) -> String { "[" + rings.map(ring).joined(separator: ", ") + "]" }
        var properties = [#""id": \#(jsonQuoted(id))"#]
        if kind != .location { properties.append(#""kind": \#(jsonQuoted(kind.rawValue))"#) }
        for (key, value) in [("name", name), ("dataset", dataset), ("venue", venue), ("building", building), ("floor", floor)] {
            if let value { properties.append("\(jsonQuoted(key)): \(jsonQuoted(value))") }
        }
        if let elevation { properties.append(#""elevation": \#(jsonNumber(elevation))"#) }
        let geometry: String = switch shape {
        case .polygon(let rings): #"{"type": "Polygon", "coordinates": \#(polygon(rings))}"#
        case .multiPolygon(let polygons): #"{"type": "MultiPolygon", "coordinates": [\#(polygons.map(polygon).joined(separator: ", "))]}"#
        case .point(let value): #"{"type": "Point", "coordinates": \#(point(value))}"#
        }
        return #"{"type": "Feature", "properties": {\#(properties.joined(separator: ", "))}, "geometry": \#(geometry)}"#
    }
}

/// Every problem found in a geometry file.
public struct GeometryErrors: Error, Sendable, Equatable, CustomStringConvertible {
    public var problems: [VenueGeometry.Problem]

    public init(_ problems: [VenueGeometry.Problem]) {
        self.problems = problems
    }

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}
