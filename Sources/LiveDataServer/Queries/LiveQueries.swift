import DisplayRules
import LiveState
import LiveTopics
import Mosquitto

/// What the HTTP routes and the floor view may ask of the daemon: its readiness, read-only
/// queries over the state, the floor view's event stream, and the one command they give
/// (hiding or showing a layer). Each query runs on the pipeline (``read(_:_:)``)
/// and sees one moment of the state; the routes hold this, never the pipeline or its store.
public struct LiveQueries: Sendable {
    /// A layer the rules and styles name, and whether it is hidden.
    public struct Layer: Sendable, Equatable, Codable {
        public var name: String
        public var hidden: Bool
    }

    let pipeline: LivePipeline

    public init(_ pipeline: LivePipeline) {
        self.pipeline = pipeline
    }

    // MARK: - Readiness

    /// How far the start has come (read without the pipeline, which a restore keeps busy).
    public var startPhase: StartProgress.Phase { pipeline.startProgress.phase }
    public var brokerState: MQTTConnectionState { pipeline.brokerState }
    public var isReady: Bool { get async { await pipeline.isReady } }
    public var convergenceFault: String? { get async { await pipeline.convergenceFault } }
    public var storageFault: String? { get async { await pipeline.storageFault } }
    public var refusedSubscriptions: [String] { get async { await pipeline.refusedSubscriptions } }
    public var statistics: LivePipeline.Statistics { get async { await pipeline.statistics } }
    /// A failover replica's role; nil without failover.
    public var replicaRole: ReplicaRole? { get async { await pipeline.replicaRole } }
    /// A part of a failover replica's state for another to copy (nil until it has joined).
    func stateCopyPart(from position: Int) async -> PeerState.Part? { await pipeline.stateCopyPart(from: position) }

    // MARK: - The state

    public func records(id: String) async -> [LocationRecord] { await Self.read(pipeline) { $0.records(id: id) } }
    public func record(_ address: LocationAddress) async -> LocationRecord? { await Self.read(pipeline) { $0.record(address) } }
    public func floor(_ key: Place) async -> [LocationRecord] { await Self.read(pipeline) { $0.floor(key) } }
    public func legend(dataset: String?) async -> Legend { await Self.read(pipeline) { $0.legend(dataset: dataset) } }
    public var layers: [Layer] { get async { await Self.read(pipeline) { $0.layers } } }
    public var summaries: [SummaryTracker.Summary] { get async { await Self.read(pipeline) { $0.summaries } } }
    public var geometryFloors: [Place] { get async { await Self.read(pipeline) { $0.geometryFloors } } }
    public func geometryJSON(_ key: Place) async -> String { await Self.read(pipeline) { $0.geometryJSON(key) } }

    // MARK: - The floor view's events

    public var events: EventHub { pipeline.events }

    /// Runs a query on the pipeline, over a read-only view of the state (``StateView``).
    static func read<T: Sendable>(_ pipeline: isolated LivePipeline, _ query: @Sendable (StateView) -> T) -> T {
        query(StateView(store: pipeline.processing.core.store, config: pipeline.config))
    }

    // MARK: - The one command

    /// Hides or shows a layer; returns how many locations changed.
    public func setLayer(_ layer: String, hidden: Bool) async -> Int { await pipeline.setLayer(layer, hidden: hidden) }
}
