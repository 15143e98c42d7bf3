extension TopicTrie {
    // MARK: - Matching

    /// Calls `body` with the entry of every filter that matches `topic`.
    /// - Throws: ``TopicError`` when the topic is not a valid MQTT topic name.
    @usableFromInline
    func match(_ topic: String, _ body: (Int32) -> Void) throws(TopicError) {
        var topic = topic
        let result = topic.withUTF8 { bytes in Result { () throws(TopicError) in try match(bytes: UnsafeRawBufferPointer(bytes), body) } }
        try result.get()
    }

    /// ``match(_:_:)`` of a topic's UTF-8 bytes, read in place.
    @usableFromInline
    func match(bytes topic: UnsafeRawBufferPointer, _ body: (Int32) -> Void) throws(TopicError) {
        let failure: TopicError? = topic.withMemoryRebound(to: UInt8.self) { bytes in
            let count = bytes.count
            if count == 0 { return .empty(kind: .topic) }
            if count > TopicName.maximumLength { return .tooLong(kind: .topic, bytes: count) }
            // Room for every level a topic of this length can have, so that the levels are
            // found in the same pass that checks the bytes.
            return withUnsafeTemporaryAllocation(of: Int.self, capacity: count + 2) { starts in
                // starts[i] is where level i begins; level i ends one byte before starts[i + 1].
                var levels = 1
                starts[0] = 0
                let valid = TopicBytes.scan(topic) { slash in
                    starts[levels] = slash + 1
                    levels += 1
                    return true
                }
                if valid == nil { return Self.invalidTopic(bytes) }
                starts[levels] = count + 1
                match(topic, starts: UnsafeBufferPointer(starts), levels: levels, body)
                return nil
            }
        }
        if let failure { throw failure }
    }

    /// ``match(bytes:_:)`` of a valid topic name whose `/` are at `slashes`, found by the
    /// caller: the bytes are neither checked nor scanned again.
    @usableFromInline
    func match(bytes topic: UnsafeRawBufferPointer, slashes: UnsafeBufferPointer<Int>, _ body: (Int32) -> Void) {
        let levels = slashes.count + 1
        withUnsafeTemporaryAllocation(of: Int.self, capacity: levels + 1) { starts in
            starts[0] = 0
            for index in slashes.indices { starts[index + 1] = slashes[index] + 1 }
            starts[levels] = topic.count + 1
            match(topic, starts: UnsafeBufferPointer(starts), levels: levels, body)
        }
    }

    /// Matches a non-empty topic whose level `i` begins at `starts[i]` and ends one byte
    /// before `starts[i + 1]`.
    private func match(
        _ topic: UnsafeRawBufferPointer, starts: UnsafeBufferPointer<Int>, levels: Int, _ body: (Int32) -> Void
    ) {
        let matcher = Matcher(
            seed: seed, topic: topic, starts: starts, levels: levels, nodes: nodes.base, edges: edges, mask: capacity - 1,
            longKeys: longKeys.base, entryNext: entryNext.base)
        matcher.matchRoot(dollar: topic[0] == UInt8(ascii: "$"), body)
    }

    private static func invalidTopic(_ bytes: UnsafeBufferPointer<UInt8>) -> TopicError {
        do {
            try TopicName.validate(String(decoding: bytes, as: UTF8.self))
            return .empty(kind: .topic)  // Not reached: the byte scan found a reason.
        } catch {
            return error
        }
    }

    private struct Matcher {
        let seed: UInt64
        let topic: UnsafeRawBufferPointer
        let starts: UnsafeBufferPointer<Int>
        let levels: Int
        let nodes: UnsafeMutablePointer<Node>
        let edges: UnsafeMutablePointer<Edge>
        let mask: Int
        let longKeys: UnsafeMutablePointer<UInt8>
        let entryNext: UnsafeMutablePointer<Int32>

        func matchRoot(dollar: Bool, _ body: (Int32) -> Void) {
            let root = nodes[0]
            // A wildcard at the first level never matches a topic that starts with `$`.
            if !dollar {
                emit(root.multi, body)
                if root.single >= 0 { visit(root.single, nodes[Int(root.single)], level: 1, body) }
            }
            descend(0, root, level: 0, body)
        }

        /// A node reached after consuming `level` levels.
        func visit(_ node: Int32, _ record: Node, level: Int, _ body: (Int32) -> Void) {
            var (node, record, level) = (node, record, level)
            // Levels that only a `+` leaves, with no `#` below (criteria that leave
            // components out make chains of them): followed in a loop, not a call each.
            while record.multi < 0, record.exactChildren == 0, level < levels {
                guard record.single >= 0 else { return }
                node = record.single
                record = nodes[Int(node)]
                level += 1
            }
            // `#` below this node matches here too, the parent level included.
            emit(record.multi, body)
            if level == levels {
                emit(record.terminal, body)
                return
            }
            // Start loading the exact child's slot before walking the `+` subtree, so that
            // the two memory accesses overlap instead of queueing.
            var pending = PendingLookup(slot: -1, firstHash: 0, hash: 0)
            if record.exactChildren > 0 { pending = startLookup(node, record, level: level) }
            if record.single >= 0 { visit(record.single, nodes[Int(record.single)], level: level + 1, body) }
            if pending.slot >= 0 { finishLookup(node, pending, level: level, body) }
        }

        struct PendingLookup {
            var slot: Int
            var firstHash: UInt64
            var hash: UInt64
        }

        @inline(__always)
        func startLookup(_ node: Int32, _ record: Node, level: Int) -> PendingLookup {
            let key = levelKey(level)
            let hash = TopicTrie.levelHash(seed: seed, parent: node, key)
            guard record.childBits & TopicTrie.childBit(hash) != 0 else { return PendingLookup(slot: -1, firstHash: 0, hash: 0) }
            let slot = Int(truncatingIfNeeded: hash) & mask
            return PendingLookup(slot: slot, firstHash: edges[slot].hash, hash: hash)
        }

        @inline(__always)
        func finishLookup(_ node: Int32, _ pending: PendingLookup, level: Int, _ body: (Int32) -> Void) {
            // An empty first slot means no such edge, whatever the rest of the probe would say.
            if pending.firstHash == 0 { return }
            let found = TopicTrie.find(
                edges: edges, mask: mask, longKeys: longKeys, parent: node, key: levelKey(level), hash: pending.hash)
            if found >= 0 {
                let edge = edges[found]
                visit(edge.child, edge.record, level: level + 1, body)
            }
        }

        @inline(__always)
        func levelKey(_ level: Int) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: topic[starts[level]..<(starts[level + 1] - 1)])
        }

        @inline(__always)
        func descend(_ node: Int32, _ record: Node, level: Int, _ body: (Int32) -> Void) {
            guard record.exactChildren > 0 else { return }
            let pending = startLookup(node, record, level: level)
            if pending.slot >= 0 { finishLookup(node, pending, level: level, body) }
        }

        @inline(__always)
        func emit(_ head: Int32, _ body: (Int32) -> Void) {
            var entry = head
            while entry >= 0 {
                body(entry)
                entry = entryNext[Int(entry)]
            }
        }
    }
}
