import LiveTopics

extension LiveQueries {
    /// The venue page's plan of a venue (see ``VenueLayout``).
    public func venueLayout(dataset: String, venue: String) async -> VenueLayout {
        await Self.read(pipeline) { $0.venueLayout(dataset: dataset, venue: venue) }
    }

    /// Opens a viewer's event stream: resumed after `lastEventID` when the hub still has
    /// what followed it, else starting with a snapshot of the scope (on the pipeline, so
    /// that no change falls between the snapshot and the stream).
    public func openEvents(_ scope: EventScope, lastEventID: String?) async -> EventHub.Subscription {
        await Self.openEvents(pipeline, scope, lastEventID: lastEventID)
    }

    static func openEvents(_ pipeline: isolated LivePipeline, _ scope: EventScope, lastEventID: String?) -> EventHub.Subscription {
        pipeline.events.subscribe(scope, lastEventID: lastEventID) { read(pipeline) { $0.snapshotJSON(scope) } }
    }
}
