import CMosquitto
import CMosquittoIO

/// Owns the libmosquitto client and its CONNECT properties.
///
/// `@unchecked Sendable` is safe here, and only here: every call into libmosquitto for the
/// client (connect, the network loop, publish, subscribe, unsubscribe, disconnect) is made
/// on its network thread, or before that thread starts or after it ends, which the lock
/// check of ``MQTTSocketBuffering`` verifies where libmosquitto's locks are replaced; and
/// `mosquitto_destroy` runs in `deinit`, when no thread can reach the handle any more.
final class Handle: @unchecked Sendable {
    let mosq: OpaquePointer
    /// MQTT 5 CONNECT properties (session expiry, maximum packet size), sent with every
    /// connection attempt.
    let connectProperties: OpaquePointer?

    /// Whether the client's socket calls go through buffers (see ``MQTTSocketBuffering``).
    let buffered: Bool

    /// - Parameter buffered: ask for buffered socket calls; `buffered` says whether they
    ///   are in place.
    init(
        clientID: String?, cleanStart: Bool, sessionExpirySeconds: UInt32?, maximumPacketSize: UInt32?, buffered: Bool
    ) throws(MQTTError) {
        LibMosquitto.initialized
        self.buffered = buffered && MQTTSocketBuffering.unavailableReason == nil
        // The wake-up pair that mosquitto_new makes is this client's, unused: mark it (when
        // the library made exactly one pair; otherwise its writes go through, as without
        // buffering, and the read pass copes with the EAGAIN they leave).
        _ = livedata_io_claim_pairs(self.buffered ? 1 : 0)
        let made = mosquitto_new(clientID, cleanStart, nil)
        _ = livedata_io_claim_pairs(0)
        guard let mosq = made else {
            throw .library(function: "mosquitto_new", code: MOSQ_ERR_NOMEM.raw, reason: "out of memory or invalid client id")
        }
        self.mosq = mosq
        var properties: OpaquePointer?
        for (property, value) in [
            (MQTT_PROP_SESSION_EXPIRY_INTERVAL, sessionExpirySeconds), (MQTT_PROP_MAXIMUM_PACKET_SIZE, maximumPacketSize),
        ] {
            guard let value else { continue }
            let code = mosquitto_property_add_int32(&properties, Int32(property.rawValue), value)
            if code != MOSQ_ERR_SUCCESS.raw {
                if properties != nil { mosquitto_property_free_all(&properties) }
                mosquitto_destroy(mosq)
                throw .library(function: "mosquitto_property_add_int32", code: code, reason: describeResult(code, errno: 0))
            }
        }
        connectProperties = properties
    }

    deinit {
        var properties = connectProperties
        if properties != nil { mosquitto_property_free_all(&properties) }
        mosquitto_destroy(mosq)
    }
}
