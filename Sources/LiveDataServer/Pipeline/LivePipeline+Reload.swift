import LiveDataConfiguration
import Mosquitto

/// Changes made while running: a layer hidden or shown, a reloaded config's rules and
/// criteria; each re-publishes what it changed.
extension LivePipeline {
    /// Hides or shows a layer and re-publishes what that changes.
    /// - Returns: how many locations changed.
    @discardableResult
    public func setLayer(_ layer: String, hidden: Bool) -> Int {
        let changes = core.setLayer(layer, hidden: hidden, now: .now)
        for change in changes { queue(change, arrived: nil) }
        return changes.count
    }

    /// Takes a reloaded config's rules, styles and criteria (not its broker settings, its
    /// instance or its partition: those take a restart) and re-publishes what changed.
    /// - Returns: how many locations changed.
    @discardableResult
    public func reload(_ newConfig: LiveDataConfig) async -> Int {
        if newConfig.partition != config.partition || newConfig.instance != config.instance {
            logger.warning("the reloaded config changes instance or partition: that takes a restart; the rest is taken now")
        }
        let oldFilters = Set(config.partitionSubscriptions.map(\.filter.string))
        config.ruleSet = newConfig.ruleSet
        config.subscriptions = newConfig.subscriptions
        let newFilters = Set(config.partitionSubscriptions.map(\.filter.string))
        let changes = core.reload(ruleSet: newConfig.ruleSet, subscriptions: newConfig.subscriptions, now: .now)
        for change in changes { queue(change, arrived: nil) }
        await flush()
        await snapshots.writer?.setRulesFingerprint(core.store.ruleEngine.fingerprint)
        publisher.forgetLegends()
        for dataset in knownDatasets() { publishLegend(dataset) }
        let qos = MQTTQoS(rawValue: Int32(config.broker.qos)) ?? .atLeastOnce
        for filter in newFilters.subtracting(oldFilters).sorted() {
            do {
                try await subscribe(filter, qos: qos)
            } catch {
                logger.error("\(error)")
            }
        }
        for filter in oldFilters.subtracting(newFilters).sorted() {
            refusedFilters.removeAll { $0 == filter }
            try? await client.unsubscribe(filter)
        }
        return changes.count
    }
}
