/// The version of the payloads' layout that map clients read, written as `"format": N` in
/// every JSON payload the daemon publishes (derived changes, summaries, legends, the
/// failover lease, arrivals). It rises when a payload's shape changes in a way a client must
/// know of; a client that reads a higher number than it knows should tell its user. The
/// contract of each number is in `docs/asyncapi.yaml`, and what each release changed is in
/// `CHANGELOG.md`.
public enum WireFormat {
    public static let version = 1
}
