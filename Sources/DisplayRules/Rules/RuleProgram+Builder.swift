import LiveTopics

extension RuleProgram {
    /// Flattens condition trees into plain nodes, giving each property read a slot.
    struct Builder {
        private(set) var nodes: [Node] = []
        private(set) var literals: [String] = []
        private(set) var slots: [PropertyReference] = []
        private var slotIndex: [PropertyReference: Int32] = [:]

        /// Adds a condition's nodes.
        /// - Returns: the index of its root.
        mutating func flatten(_ node: CompiledExpression.Node) -> Int32 {
            switch node {
            case .number(let value): return add(Node(kind: .number, value: value))
            case .string(let text):
                literals.append(text)
                return add(Node(kind: .string, a: Int32(literals.count - 1)))
            case .boolean(let value): return add(Node(kind: .boolean, value: value ? 1 : 0))
            case .property(let reference): return add(Node(kind: .property, a: slot(reference)))
            case .exists(let reference): return add(Node(kind: .exists, a: slot(reference)))
            case .negate(let inner): return add(Node(kind: .negate, a: flatten(inner)))
            case .arithmetic(let op, let x, let y):
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .arithmetic, arithmetic: op, a: a, b: b))
            case .compare(let op, let kind, let x, let y):
                if case .numeric = kind {
                    // `property op number`, or `number op property` turned around.
                    if case .property(let reference) = x, case .number(let value) = y {
                        return add(Node(kind: .compareSlotWithNumber, comparison: op, a: slot(reference), value: value))
                    }
                    if case .number(let value) = x, case .property(let reference) = y {
                        return add(Node(kind: .compareSlotWithNumber, comparison: op.mirrored, a: slot(reference), value: value))
                    }
                }
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .compare, comparison: op, comparisonKind: kind, a: a, b: b))
            case .and(let x, let y):
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .and, a: a, b: b))
            case .or(let x, let y):
                let (a, b) = (flatten(x), flatten(y))
                return add(Node(kind: .or, a: a, b: b))
            case .not(let inner): return add(Node(kind: .not, a: flatten(inner)))
            case .truth(let inner): return add(Node(kind: .truth, a: flatten(inner)))
            }
        }

        private mutating func slot(_ reference: PropertyReference) -> Int32 {
            if let index = slotIndex[reference] { return index }
            slots.append(reference)
            slotIndex[reference] = Int32(slots.count - 1)
            return Int32(slots.count - 1)
        }

        private mutating func add(_ node: Node) -> Int32 {
            nodes.append(node)
            return Int32(nodes.count - 1)
        }

        /// Evaluates the condition rooted at `root` against `values`.
        func evaluate(_ root: Int32, _ values: LiveValues) -> Bool {
            withUnsafeTemporaryAllocation(of: SlotValue.self, capacity: max(slots.count, 1)) { slotValues in
                slotValues.initialize(repeating: SlotValue())
                return nodes.withUnsafeBufferPointer { nodes in
                    literals.withUnsafeBufferPointer { literals in
                        slots.withUnsafeBufferPointer { references in
                            values.domains.withUnsafeBufferPointer { domains in
                                Evaluator(
                                    nodes: nodes.baseAddress!, literals: literals.baseAddress, references: references.baseAddress,
                                    slots: slotValues.baseAddress!, values: domains, catalogCapacity: values.catalogCapacity
                                ).truth(root)
                            }
                        }
                    }
                }
            }
        }
    }
}
