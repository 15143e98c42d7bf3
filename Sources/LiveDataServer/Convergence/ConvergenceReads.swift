import LiveState
import LiveTopics

/// A read that returned fewer retained styles than the marker the broker holds counted.
struct ShortConvergenceRead: Error, CustomStringConvertible {
    var styles: Int
    var marked: Int?
    var description: String {
        "the broker returned \(styles) retained styles where \(marked.map { "its marker says it held \($0)" } ?? "it holds more (some of the missing ones, asked for by their own topics)"): a short read (a broker limit on retained messages per subscription, such as ejabberd's match_retained_limit, or a cluster node that does not see every retained topic); nothing is republished or cleared on its evidence"
    }
}

extension OutputFormat {
    /// What a full convergence reads: the styles and summaries of what a daemon owns
    /// (everything under the prefix, or its partition's places), and the legends.
    func convergenceFilters(_ partition: Partition?) -> [String] {
        let legends = "\(prefix)/legend/#"
        guard let partition else { return ["\(prefix)/style/#", "\(prefix)/summary/#", legends] }
        return partition.filters(prefix: prefix, kind: "style") + partition.filters(prefix: prefix, kind: "summary") + [legends]
    }
}
