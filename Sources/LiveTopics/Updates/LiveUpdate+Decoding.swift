#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a live-update payload says, before it is tied to a topic.
public struct LivePayload: Hashable, Sendable {
    public var id: String?
    public var timestamp: LiveTimestamp?
    public var originSourceId: String?
    public var properties: LiveProperties
    /// An empty payload: the domain's value is removed.
    public var isRemoval: Bool
    /// Decoded with `keepingSource: false`: where the `id` string's bytes are in the payload
    /// (when it has no escapes and is ASCII; otherwise it is kept in ``id``), so that a caller
    /// can compare it with the topic's location without a string being made.
    public var idBytes: Range<Int>?

    public static func == (a: LivePayload, b: LivePayload) -> Bool {
        a.id == b.id && a.timestamp == b.timestamp && a.originSourceId == b.originSourceId && a.properties == b.properties
            && a.isRemoval == b.isRemoval
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(timestamp)
        hasher.combine(properties)
    }

    /// Decodes a payload.
    ///
    /// Only `properties` is required; `id`, `timestamp` (ISO-8601 or epoch milliseconds) and
    /// `originSourceId` are optional. JSON numbers and booleans in `properties` become their
    /// text; a `null` property is left out; unknown fields are ignored. An empty payload is a
    /// removal.
    ///
    /// `keepingSource: false` checks `id` and `originSourceId` as usual but leaves them out
    /// (`nil`), for a reader that does not use them: the state store keys locations by topic.
    ///
    /// - Throws: ``LiveUpdateError`` saying why the payload was refused.
    public init(
        _ payload: UnsafeRawBufferPointer, limits: PayloadLimits = .standard,
        keepingSource: Bool = true
    ) throws(LiveUpdateError) {
        var storage = LiveProperties()
        try self.init(payload, limits: limits, keepingSource: keepingSource, storage: &storage)
    }

    /// Decodes a payload (see ``init(_:maximumPayloadSize:keepingSource:)-(UnsafeRawBufferPointer,_,_)``)
    /// into `storage`'s storage: the decoded properties take it (its contents are dropped)
    /// and `storage` is left empty, so that a caller decoding one payload after another and
    /// handing each one's properties back need not allocate for every one.
    /// - Throws: ``LiveUpdateError`` saying why the payload was refused.
    public init(
        _ payload: UnsafeRawBufferPointer, limits: PayloadLimits = .standard,
        keepingSource: Bool = true, storage: inout LiveProperties
    ) throws(LiveUpdateError) {
        // Each field set here rather than through `init(id:timestamp:…)`, whose result would
        // be copied into `self` (a retain and release of each reference, every update).
        if payload.isEmpty {
            id = nil
            timestamp = nil
            originSourceId = nil
            properties = LiveProperties()
            isRemoval = true
            return
        }
        if payload.count > limits.size {
            throw .payloadTooLarge(bytes: payload.count, limit: limits.size)
        }
        var scanner = JSONScanner(payload)
        var id: String?
        var idBytes: Range<Int>?
        var timestamp: LiveTimestamp?
        var origin: String?
        var decoded: LiveProperties?
        var fieldError: LiveUpdateError?
        // A bound passed: decoding stops at once (the scanner is told to stop with a
        // failure, and this is thrown instead).
        var limitError: LiveUpdateError?
        do {
            let kind = try scanner.peekKind()
            guard kind == .object else {
                // Still report malformed JSON as such, before complaining about the shape.
                try scanner.skipValue()
                try scanner.expectEnd()
                throw LiveUpdateError.notAnObject(found: kind.rawValue)
            }
            try scanner.readObject { (scanner: inout JSONScanner, key, escaped) throws(JSONScanner.Failure) in
                switch Field(key, escaped: escaped) {
                case .id:
                    if !keepingSource, try scanner.peekKind() == .string {
                        let (raw, escaped, ascii) = try scanner.readRawString()
                        if escaped || !ascii {
                            id = try LivePayload.string(raw, escaped: escaped, validated: ascii)
                        } else {
                            let start = raw.baseAddress.map { $0 - payload.baseAddress! } ?? 0
                            idBytes = start..<(start + raw.count)
                        }
                    } else {
                        id = try LivePayload.readStringField("id", &scanner, &fieldError, keeping: keepingSource)
                    }
                case .originSourceId:
                    origin = try LivePayload.readStringField("originSourceId", &scanner, &fieldError, keeping: keepingSource)
                case .timestamp:
                    switch try scanner.peekKind() {
                    case .string:
                        let (raw, escaped, _) = try scanner.readRawString()
                        if !escaped, let value = LiveTimestamp.parse(raw) {
                            timestamp = value
                        } else {
                            fieldError = fieldError ?? .badTimestamp(String(decoding: raw, as: UTF8.self))
                        }
                    case .number:
                        let raw = try scanner.readNumber()
                        if let value = LiveTimestamp.parse(raw) {
                            timestamp = value
                        } else {
                            fieldError = fieldError ?? .badTimestamp(String(decoding: raw, as: UTF8.self))
                        }
                    case .null:
                        try scanner.readNull()
                    case let kind:
                        try scanner.skipValue()
                        fieldError = fieldError ?? .badField(name: "timestamp", expected: "a string", found: kind.rawValue)
                    }
                case .properties:
                    let kind = try scanner.peekKind()
                    guard kind == .object else {
                        try scanner.skipValue()
                        fieldError = fieldError ?? .propertiesNotAnObject(found: kind.rawValue)
                        return
                    }
                    var values = LiveProperties()
                    swap(&values, &storage)
                    values.removeAll(keepingCapacity: true)
                    // One allocation for the few properties an update carries, not one per
                    // doubling of the array.
                    values.reserveCapacity(4)
                    var read = 0
                    try scanner.readObject { (scanner: inout JSONScanner, name, escaped) throws(JSONScanner.Failure) in
                        read += 1
                        if read > limits.properties {
                            limitError = .tooManyProperties(limit: limits.properties)
                            throw .stopped
                        }
                        // The reader has checked the name's UTF-8 already.
                        let nameString = try LivePayload.string(name, escaped: escaped, validated: true)
                        if nameString.utf8.count > limits.nameLength {
                            limitError = .propertyTooLong(
                                name: String(nameString.prefix(32)) + "…", part: "name", bytes: nameString.utf8.count, limit: limits.nameLength)
                            throw .stopped
                        }
                        func checked(_ value: String) throws(JSONScanner.Failure) -> String {
                            guard value.utf8.count <= limits.valueLength else {
                                limitError = .propertyTooLong(name: nameString, part: "value", bytes: value.utf8.count, limit: limits.valueLength)
                                throw .stopped
                            }
                            return value
                        }
                        switch try scanner.peekKind() {
                        case .string:
                            values[nameString] = try checked(try scanner.readString())
                        case .number:
                            values[nameString] = try checked(String(decoding: try scanner.readNumber(), as: UTF8.self))
                        case .boolean:
                            values[nameString] = try scanner.readBoolean() ? "true" : "false"
                        case .null:
                            try scanner.readNull()
                        case let kind:
                            try scanner.skipValue()
                            fieldError = fieldError ?? .badPropertyValue(name: nameString, found: kind.rawValue)
                        }
                    }
                    decoded = values
                case .unknown:
                    try scanner.skipValue()
                }
            }
            try scanner.expectEnd()
        } catch let failure as JSONScanner.Failure {
            if let limitError { throw limitError }
            throw .notJSON(reason: failure.description)
        } catch let error as LiveUpdateError {
            throw error
        } catch {
            throw .notJSON(reason: "\(error)")
        }
        if let fieldError { throw fieldError }
        guard let decoded else { throw .missingProperties }
        self.id = id
        self.timestamp = timestamp
        originSourceId = origin
        properties = decoded
        isRemoval = false
        self.idBytes = idBytes
    }

    public init(
        id: String?, timestamp: LiveTimestamp?, originSourceId: String?, properties: LiveProperties, isRemoval: Bool
    ) {
        self.id = id
        self.timestamp = timestamp
        self.originSourceId = originSourceId
        self.properties = properties
        self.isRemoval = isRemoval
    }

    /// Decodes a payload held in an array.
    /// - Throws: ``LiveUpdateError``.
    public init(
        _ payload: [UInt8], limits: PayloadLimits = .standard, keepingSource: Bool = true
    ) throws(LiveUpdateError) {
        var storage = LiveProperties()
        try self.init(payload, limits: limits, keepingSource: keepingSource, storage: &storage)
    }

    /// Decodes a payload held in an array into `storage`'s storage (see
    /// ``init(_:maximumPayloadSize:keepingSource:storage:)-(UnsafeRawBufferPointer,_,_,_)``).
    /// - Throws: ``LiveUpdateError``.
    public init(
        _ payload: [UInt8], limits: PayloadLimits = .standard, keepingSource: Bool = true,
        storage: inout LiveProperties
    ) throws(LiveUpdateError) {
        // `withUnsafeBytes` throws untyped errors: the error is carried out by hand.
        var failure: LiveUpdateError?
        let decoded: LivePayload? = payload.withUnsafeBytes { bytes in
            do throws(LiveUpdateError) {
                return try LivePayload(
                    bytes, limits: limits, keepingSource: keepingSource, storage: &storage)
            } catch {
                failure = error
                return nil
            }
        }
        guard let decoded else { throw failure! }
        self = decoded
    }
}

/// The bounds a payload is decoded within (docs/protocol.md, "Limits and refusal reasons").
public struct PayloadLimits: Sendable, Equatable {
    /// Bytes in the payload (`limits.payloadSize`).
    public var size = 65_536
    /// Properties in one update (`limits.properties`).
    public var properties = 64
    /// Bytes in a property's name (`limits.nameLength`).
    public var nameLength = 128
    /// Bytes in a property's value as text (`limits.valueLength`).
    public var valueLength = 1_024

    public init(size: Int = 65_536, properties: Int = 64, nameLength: Int = 128, valueLength: Int = 1_024) {
        self.size = size
        self.properties = properties
        self.nameLength = nameLength
        self.valueLength = valueLength
    }

    public static let standard = PayloadLimits()
}

extension LiveUpdate {
    /// The largest payload accepted by default, in bytes.
    public static let defaultMaximumPayloadSize = PayloadLimits.standard.size

    /// An update from a topic and its decoded payload; `receivedAt` stands in for a missing timestamp.
    public init(topic: LiveTopic, payload: LivePayload, receivedAt: LiveTimestamp) {
        self.init(
            topic: topic, id: payload.id, timestamp: payload.timestamp ?? receivedAt,
            originSourceId: payload.originSourceId, properties: payload.properties, isRemoval: payload.isRemoval)
    }

    /// Decodes a payload received on a live-data topic (see ``LivePayload``).
    /// - Throws: ``LiveUpdateError`` saying why the payload was refused.
    public init(
        topic: LiveTopic, payload: UnsafeRawBufferPointer, receivedAt: LiveTimestamp,
        limits: PayloadLimits = .standard
    ) throws(LiveUpdateError) {
        self.init(topic: topic, payload: try LivePayload(payload, limits: limits), receivedAt: receivedAt)
    }

    /// Decodes a payload held in an array.
    /// - Throws: ``LiveUpdateError``.
    public init(
        topic: LiveTopic, payload: [UInt8], receivedAt: LiveTimestamp,
        limits: PayloadLimits = .standard
    ) throws(LiveUpdateError) {
        self.init(
            topic: topic, payload: try LivePayload(payload, limits: limits), receivedAt: receivedAt)
    }

    /// Decodes a payload given as text.
    /// - Throws: ``LiveUpdateError``.
    public init(topic: LiveTopic, payload: String, receivedAt: LiveTimestamp) throws(LiveUpdateError) {
        try self.init(topic: topic, payload: Array(payload.utf8), receivedAt: receivedAt)
    }
}

extension LivePayload {
    fileprivate enum Field {
        case id, timestamp, originSourceId, properties, unknown

        init(_ key: UnsafeRawBufferPointer, escaped: Bool) {
            guard !escaped else {
                self = .unknown
                return
            }
            func equal(_ name: StaticString) -> Bool {
                key.count == name.utf8CodeUnitCount && memcmp(key.baseAddress!, name.utf8Start, key.count) == 0
            }
            switch key.count {
            case 2 where equal("id"): self = .id
            case 9 where equal("timestamp"): self = .timestamp
            case 10 where equal("properties"): self = .properties
            case 14 where equal("originSourceId"): self = .originSourceId
            default: self = .unknown
            }
        }
    }

    /// `validated`: the bytes, when not `escaped`, are known to be valid UTF-8 (see `makeString`).
    @inline(__always)
    fileprivate static func string(
        _ raw: UnsafeRawBufferPointer, escaped: Bool, validated: Bool
    ) throws(JSONScanner.Failure) -> String {
        if escaped { return try JSONScanner.unescape(raw, at: 0) }
        guard let string = makeString(raw, validated: validated) else { throw .invalidUTF8(at: 0) }
        return string
    }

    /// Reads a field that must be a string or `null`; without `keeping`, checks it the same
    /// way without making a string of it.
    fileprivate static func readStringField(
        _ name: String, _ scanner: inout JSONScanner, _ fieldError: inout LiveUpdateError?, keeping: Bool
    ) throws(JSONScanner.Failure) -> String? {
        switch try scanner.peekKind() {
        case .string:
            if keeping { return try scanner.readString() }
            let (raw, escaped, ascii) = try scanner.readRawString()
            // Escapes and UTF-8 are checked where a string is made: plain ASCII needs neither.
            if escaped || !ascii { _ = try string(raw, escaped: escaped, validated: ascii) }
            return nil
        case .null:
            try scanner.readNull()
            return nil
        case let kind:
            try scanner.skipValue()
            fieldError = fieldError ?? .badField(name: name, expected: "a string", found: kind.rawValue)
            return nil
        }
    }
}
