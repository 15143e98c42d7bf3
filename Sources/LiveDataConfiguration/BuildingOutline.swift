import LiveTopics

/// A building as the venue view draws it from afar: its footprint (a facade), and its floors
/// with their elevations. The footprint is the building's own feature (`properties.kind:
/// "building"`) when the geometry has one, else the convex outline around every shape placed
/// in the building, on any floor.
public struct BuildingOutline: Sendable, Equatable {
    public struct Floor: Sendable, Equatable {
        public var floor: String
        /// From a feature's `properties.elevation` (a floor's outline first), if any gives one.
        public var elevation: Double?
    }

    /// The building (dataset, venue, building; no floor).
    public var place: Place
    /// `properties.name` of the building's feature, if it has one.
    public var name: String?
    /// Rings of `[x, y]`: each polygon's outer ring, in the geometry's coordinates.
    public var footprint: [[[Double]]]
    /// The floors the geometry places shapes on, in name order.
    public var floors: [Floor]

    /// Every building the features place, in place order.
    static func outlines(of features: [VenueGeometry.Feature]) -> [BuildingOutline] {
        struct Gathered {
            var own: VenueGeometry.Feature?
            var points: Set<SIMD2<Double>> = []
            var floors: [String: (elevation: Double?, fromOutline: Bool)] = [:]
        }
        var buildings: [Place: Gathered] = [:]
        for feature in features {
            guard let dataset = feature.dataset, let venue = feature.venue, let building = feature.building else { continue }
            let place = Place(dataset: dataset, venue: venue, building: building)
            var gathered = buildings[place, default: Gathered()]
            switch feature.kind {
            case .building:
                gathered.own = feature
            case .floor, .location:
                guard let floor = feature.floor else { break }
                // A floor's outline says its elevation first; else the first shape that gives one.
                var entry = gathered.floors[floor] ?? (nil, false)
                if let elevation = feature.elevation, !entry.fromOutline, entry.elevation == nil || feature.kind == .floor {
                    entry = (elevation, feature.kind == .floor)
                }
                gathered.floors[floor] = entry
                // Floors repeat one another's corners: a set keeps the hull's input small.
                for point in feature.shape.outerPoints { gathered.points.insert(SIMD2(point[0], point[1])) }
            }
            buildings[place] = gathered
        }
        return buildings.sorted { $0.key < $1.key }.compactMap { place, gathered in
            let footprint: [[[Double]]]
            if let own = gathered.own {
                footprint = own.shape.outerRings
            } else {
                let hull = convexHull(Array(gathered.points))
                guard hull.count >= 3 else { return nil }
                footprint = [(hull + [hull[0]]).map { [$0.x, $0.y] }]
            }
            let floors = gathered.floors.keys.sorted().map { Floor(floor: $0, elevation: gathered.floors[$0]?.elevation) }
            return BuildingOutline(place: place, name: gathered.own?.name, footprint: footprint, floors: floors)
        }
    }

    /// The convex hull, counter-clockwise, without repeating its first point (Andrew's
    /// monotone chain).
    static func convexHull(_ points: [SIMD2<Double>]) -> [SIMD2<Double>] {
        let sorted = points.sorted { ($0.x, $0.y) < ($1.x, $1.y) }
        guard sorted.count >= 3 else { return sorted }
        func cross(_ o: SIMD2<Double>, _ a: SIMD2<Double>, _ b: SIMD2<Double>) -> Double {
            (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x)
        }
        var lower: [SIMD2<Double>] = []
        for point in sorted {
            while lower.count >= 2, cross(lower[lower.count - 2], lower[lower.count - 1], point) <= 0 { lower.removeLast() }
            lower.append(point)
        }
        var upper: [SIMD2<Double>] = []
        for point in sorted.reversed() {
            while upper.count >= 2, cross(upper[upper.count - 2], upper[upper.count - 1], point) <= 0 { upper.removeLast() }
            upper.append(point)
        }
        return Array(lower.dropLast() + upper.dropLast())
    }
}

extension VenueGeometry.Shape {
    /// Each polygon's outer ring (a point: none).
    var outerRings: [[[Double]]] {
        switch self {
        case .polygon(let rings): rings.prefix(1).map { $0 }
        case .multiPolygon(let polygons): polygons.compactMap(\.first)
        case .point: []
        }
    }

    /// The points of the outer rings, or the point.
    var outerPoints: [[Double]] {
        if case .point(let point) = self { return [point] }
        return outerRings.flatMap { $0 }
    }
}
