import CMosquitto
import Logging

#if canImport(Glibc)
import Glibc  // strlen
#endif

/// The C callbacks. Each recovers the core from the user data without retaining it: the
/// network thread, the only thread they run on, already holds a strong reference.
extension ClientCore {
    static func from(_ userData: UnsafeMutableRawPointer?) -> ClientCore {
        Unmanaged<ClientCore>.fromOpaque(userData!).takeUnretainedValue()
    }

    func installCallbacks() {
        mosquitto_connect_v5_callback_set(mosq) { _, userData, code, flags, properties in
            ClientCore.from(userData).didConnect(code: code, flags: flags, properties: properties)
        }
        mosquitto_disconnect_v5_callback_set(mosq) { _, userData, code, _ in
            ClientCore.from(userData).logger.debug("disconnected", metadata: ["mqtt.reason": "\(code)"])
        }
        mosquitto_subscribe_v5_callback_set(mosq) { _, userData, mid, count, granted, _ in
            let codes = (0..<Int(count)).map { granted![$0] }
            let core = ClientCore.from(userData)
            core.report(core.state.withLock { $0.subscriptions.acknowledged(mid: mid, granted: codes) })
        }
        mosquitto_unsubscribe_v5_callback_set(mosq) { _, userData, mid, _ in
            let core = ClientCore.from(userData)
            if let waiter = core.state.withLock({ $0.unsubscribes.acknowledged(mid: mid, ack: true) }) {
                core.eventContinuation.yield(.unsubscribed(filter: waiter.filter))
                waiter.continuation.resume()
            }
        }
        mosquitto_publish_v5_callback_set(mosq) { _, userData, mid, reason, _ in
            let core = ClientCore.from(userData)
            if let waiter = core.state.withLock({ $0.publishes.acknowledged(mid: mid, ack: reason) }) {
                core.complete(waiter, reason: reason)
            }
        }
        mosquitto_message_v5_callback_set(mosq) { _, userData, message, _ in
            guard let message = message?.pointee else { return }
            let core = ClientCore.from(userData)
            core.readInPass.add(1, ordering: .relaxed)
            if let handler = core.handler {
                // Read after a refusal cut the connection: it comes again, after the refused one.
                if core.connectionCut.load(ordering: .relaxed) { return }
                let incoming = MQTTIncomingMessage(
                    topic: UnsafeRawBufferPointer(start: message.topic, count: strlen(message.topic)),
                    payload: UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen)),
                    qos: MQTTQoS(rawValue: message.qos) ?? .atMostOnce, retain: message.retain)
                // The PUBACK is queued, not written: cutting the connection under it makes
                // the broker send the message again.
                if case .refused = handler(incoming) { core.cutConnection() }
                return
            }
            let payload =
                message.payloadlen > 0
                ? [UInt8](UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen))) : []
            core.messageContinuation.yield(
                MQTTMessage(
                    topic: String(cString: message.topic), payload: payload,
                    qos: MQTTQoS(rawValue: message.qos) ?? .atMostOnce, retain: message.retain))
        }
        setLibraryLog(on: true)
    }

    /// libmosquitto formats a log line for every packet it sends or receives whenever a log
    /// callback is set, which costs more than the rest of a packet's handling. So the
    /// callback is on while connecting (its error lines say why TLS or a connection
    /// failed) and, once connected, only when this client logs at debug level or below.
    func setLibraryLog(on: Bool) {
        guard on || logger.logLevel <= .debug else {
            mosquitto_log_callback_set(mosq, nil)
            return
        }
        mosquitto_log_callback_set(mosq) { _, userData, level, text in
            guard let text else { return }
            let core = ClientCore.from(userData)
            let line = String(cString: text)
            if level == MOSQ_LOG_ERR {
                core.state.withLock { $0.libraryError = line }
                core.logger.debug("libmosquitto: \(line)")
            } else {
                core.logger.trace("libmosquitto: \(line)")
            }
        }
    }

    private func didConnect(code: Int32, flags: Int32, properties: OpaquePointer?) {
        guard code == 0 else {
            let reason = reasonText(code)
            state.withLock { $0.refusal = "the broker refused the connection: \(reason)" }
            return
        }
        // Ahead of every acknowledgement this connection brings (see ``MQTTClient/acceptedConnections``).
        acceptedCount.add(1, ordering: .releasing)
        setGate(true)
        setLibraryLog(on: false)
        // The broker's Receive Maximum caps ours (libmosquitto applies it the same way);
        // MQTT 3.1.1 has none.
        var receiveMaximum: UInt16 = 65_535
        if configuration.protocolVersion == .v5, let properties {
            _ = mosquitto_property_read_int16(properties, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), &receiveMaximum, false)
        }
        let session = MQTTSession(
            present: flags & 1 == 1,
            sendWindow: max(1, min(Self.windowLimit(configuration.sendMaximum), Int(receiveMaximum))))
        let (resubscribe, firstConnect) = state.withLock { state in
            state.attemptConnected = true
            state.hasConnected = true
            state.session = session
            setConnection(&state, .connected)
            // One of several connections: the first connection's waiter waits for all.
            let firstConnect = group == nil ? state.firstConnect : nil
            defer { if group == nil { state.firstConnect = nil } }
            return (state.subscriptions.connected(), firstConnect)
        }
        logger.info(
            "connected to the MQTT broker",
            metadata: ["mqtt.sessionPresent": "\(session.present)", "mqtt.sendWindow": "\(session.sendWindow)"])
        firstConnect?.resume()
        if let group, group.state == .connected { group.allConnected() }
        // On the network thread, at once: queued ahead of the acknowledgements of what the
        // broker sends after its CONNACK (a resumed session's backlog), the SUBACK comes
        // back ahead of the backlog's next part, not behind it.
        for subscription in resubscribe { sendNow(subscription) }
    }
}
