import LiveDataConfiguration
import LiveState
import Logging
import Mosquitto

/// The pipeline's stages that share the state or the output, built from the configuration
/// before anything starts; each is given the stages it talks to.
struct PipelineStages {
    let processing: ProcessingStage
    let publishing: OutputStage
    let convergence: ConvergenceStage
    let checkpoints: CheckpointStage
    let replica: ReplicaStage?
    let partition: PartitionStage?

    init(config: LiveDataConfig, client: MQTTClient, output: MQTTClient, intake: Intake, window: OutputWindow, logger: Logger) {
        let topics = config.outputFormat
        let core = LiveCore(
            ruleSet: config.ruleSet, subscriptions: config.subscriptions, summaryInterval: config.output.summaryInterval,
            limits: LiveLimits(
                payload: config.limits.payload, locations: config.limits.locations, domains: config.limits.domains,
                futureSkew: config.limits.futureSkew),
            partition: config.partition)
        processing = ProcessingStage(core: core, logger: logger)
        publishing = OutputStage(
            client: output, qos: MQTTQoS(rawValue: Int32(config.output.qos)) ?? .atLeastOnce, topics: topics,
            minInterval: config.output.minInterval, ruleSet: config.ruleSet, window: window, store: core.store, logger: logger)
        checkpoints = CheckpointStage(
            core: core, output: publishing, client: output, journal: intake.journal, path: config.store.path,
            interval: config.store.snapshotInterval,
            topic: "\(topics.prefix)/checkpoint/\(client.configuration.clientID ?? "livedata")",
            scope: config.partition.map { $0.shares.map(\.description).joined(separator: ",") } ?? "*", logger: logger)
        convergence = ConvergenceStage(core: core, output: publishing, checkpoint: checkpoints, partition: config.partition, logger: logger)
        if let settings = config.partition {
            if config.bridge != nil { publishing.recordClears(horizon: config.bridgeHorizon) }
            partition = PartitionStage(
                partition: settings, prefix: config.output.prefix, bridge: config.bridge, instance: config.instanceName, core: core,
                output: publishing, logger: logger)
            replica =
                config.failover
                ? ReplicaStage(
                    partition: settings, config: config, connection: client.configuration, ownerTopic: topics.owner(settings.name),
                    syncTopic: "\(topics.prefix)/sync/\(settings.name)", core: core, window: window, logger: logger) : nil
        } else {
            partition = nil
            replica = nil
        }
    }
}
