import LiveTopics

/// Whose legend is published: the datasets whose legend went out (or was found retained as
/// it is) since the last (re)connection or reload; none while held, from a (re)connection
/// until the convergence has read the retained legends (see ``hold()``).
struct LegendBook {
    private var published: Set<String>? {
        didSet { lastDataset = nil }
    }
    /// A dataset in `published`, the one the last change asked about: most changes are of
    /// the dataset the one before was of, and are told it needs no legend by comparing their
    /// address's bytes in place, without a string made of its dataset or a hash of it.
    private var lastDataset: String?

    /// Whether `dataset`'s legend still needs publishing; marks it published. Never while
    /// the legends are held.
    mutating func needsLegend(_ dataset: String) -> Bool {
        guard let inserted = published?.insert(dataset).inserted else { return false }
        lastDataset = dataset
        return inserted
    }

    /// ``needsLegend(_:)`` of a change's dataset: the dataset it returns when its legend
    /// still needs publishing, else `nil`.
    mutating func needsLegend(of address: LocationAddress) -> String? {
        if let lastDataset, address.has(.dataset, lastDataset) { return nil }
        let dataset = address.dataset
        return needsLegend(dataset) ? dataset : nil
    }

    /// Every legend is to be published again (once compared with the retained ones, or after
    /// a reload).
    mutating func forget() { published = [] }

    /// No legend goes out until ``forget()``: after a (re)connection, until the
    /// convergence has read what the broker retains, so that a legend is published only
    /// when it differs.
    mutating func hold() { published = nil }
}
