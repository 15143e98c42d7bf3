import ArgumentParser

/// Text for people, JSON lines for scripts.
enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    case text
    case json
}
