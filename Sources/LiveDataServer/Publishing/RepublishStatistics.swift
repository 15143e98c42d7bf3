/// What the output's republications did: the styles a convergence found missing at the
/// broker, published again as the window makes room (see ``OutputStage``).
public struct RepublishStatistics: Sendable, Equatable {
    /// Locations the republication under way has still to look at (0 when none runs).
    public var remaining = 0
    /// Styles published again so far, by every republication.
    public var republished = 0
    /// Publications waiting or awaiting the broker's acknowledgement as the republication
    /// last added to them, and the most of them since the last republication began (live
    /// changes that fill the line between two additions are not the republication's: it
    /// waits behind them).
    public var outstanding = 0
    public var outstandingPeak = 0
    /// What `outstanding` stays within while only republications go out: the republications
    /// let wait in line plus every connection's window.
    public var bound = 0
}
