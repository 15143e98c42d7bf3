import LiveTopics

/// Everything that decides how locations look: the style layers, the live rules, the
/// per-domain settings and the location catalog.
public struct RuleSet: Sendable {
    /// Defaults for every location.
    public var main: StyleTemplate
    /// By location type (from the catalog).
    public var types: [String: StyleTemplate]
    /// By location id.
    public var locations: [String: StyleTemplate]
    /// In application order: priority ascending, then file order.
    public private(set) var rules: [Rule]
    public var domains: [String: DomainSettings]
    public var catalog: LocationCatalog

    public init(
        main: StyleTemplate = .empty, types: [String: StyleTemplate] = [:], locations: [String: StyleTemplate] = [:],
        rules: [Rule] = [], domains: [String: DomainSettings] = [:], catalog: LocationCatalog = LocationCatalog()
    ) {
        self.main = main
        self.types = types
        self.locations = locations
        self.rules = rules.sorted { ($0.priority, $0.order) < ($1.priority, $1.order) }
        self.domains = domains
        self.catalog = catalog
    }

    /// The legend: one entry per title, from the rules (highest priority first).
    public func legend(dataset: String? = nil) -> Legend {
        var entries: [Legend.Entry] = []
        for rule in rules.reversed() {
            if let dataset, let wanted = rule.scope?[.dataset], wanted != dataset { continue }
            let title = rule.legendTitle
            if let index = entries.firstIndex(where: { $0.title == title }) {
                entries[index].rules.append(rule.name)
                continue
            }
            let style = rule.style.style
            entries.append(
                Legend.Entry(
                    title: title,
                    swatch: style[color: .polygonFillColor] ?? style[badge: .badge]?.backgroundColor
                        ?? style[color: .polygonStrokeColor],
                    icon: style[text: .icon], layer: rule.layer, rules: [rule.name]))
        }
        return Legend(entries: entries)
    }

    /// The layers the rules and styles name, sorted.
    public var layers: [String] {
        var names = Set(rules.compactMap(\.layer))
        for template in [main] + Array(types.values) + Array(locations.values) {
            if let layer = template.style[text: .layer] { names.insert(layer) }
        }
        return names.sorted()
    }
}

/// Settings for one domain.
public struct DomainSettings: Hashable, Sendable {
    /// A value older than this counts as absent.
    public var staleAfter: Duration?
    /// Whether an update of this domain that names another placement (venue, building,
    /// floor, room) moves the location there; `nil`: the built-in default
    /// (``BuiltInDomain/movesLocations``: `position` moves, nothing else does).
    public var moves: Bool?

    public init(staleAfter: Duration? = nil, moves: Bool? = nil) {
        self.staleAfter = staleAfter
        self.moves = moves
    }
}

extension RuleSet {
    /// Whether updates of `domain` may move a location (`domains.X.moves`, else the default).
    public func moves(_ domain: String) -> Bool {
        domains[domain]?.moves ?? BuiltInDomain(rawValue: domain)?.movesLocations ?? false
    }
}

/// The legend map clients show: what each color means.
public struct Legend: Hashable, Sendable {
    public struct Entry: Hashable, Sendable {
        public var title: String
        public var swatch: Color?
        public var icon: String?
        public var layer: String?
        public var rules: [String]
    }

    public var entries: [Entry]

    /// `{"entries": [{"title": …, "swatch": "#D64545", "icon": …, "layer": …, "rules": […]}]}`
    public var json: String {
        let items = entries.map { entry -> String in
            var object = JSONObjectWriter()
            object.add("title", entry.title)
            if let swatch = entry.swatch { object.add("swatch", swatch.description) }
            if let icon = entry.icon { object.add("icon", icon) }
            if let layer = entry.layer { object.add("layer", layer) }
            object.add("rules", json: jsonArray(entry.rules))
            return object.json
        }
        var object = JSONObjectWriter()
        object.add("entries", json: "[" + items.joined(separator: ", ") + "]")
        object.add("format", WireFormat.version)
        return object.json
    }
}
