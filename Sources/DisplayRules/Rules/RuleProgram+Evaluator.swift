import LiveTopics

extension RuleProgram {
    /// Finds where each rule domain's fresh value is among a location's values, once per
    /// domain and only for the domains a derivation needs, using the values' domain tags
    /// when they are known.
    struct DomainFinder {
        static let unknown: Int32 = -2

        let values: UnsafeBufferPointer<DomainValue>
        let tags: IdentifierTags?
        /// The rule domains and their tags.
        let names: UnsafePointer<String>
        let nameTags: UnsafePointer<UInt8>
        /// Per rule domain: the index of its fresh value, -1 for none, or `unknown`.
        let found: UnsafeMutablePointer<Int32>

        /// The index among the values of rule domain `domain`'s fresh value, or -1.
        @inline(__always)
        func value(ofDomain domain: Int) -> Int32 {
            if found[domain] == Self.unknown { found[domain] = look(for: domain) }
            return found[domain]
        }

        private func look(for domain: Int) -> Int32 {
            guard let found = LiveValues.index(ofDomain: names[domain], tag: nameTags[domain], in: values, tags: tags),
                !values[found].stale
            else { return -1 }
            return Int32(found)
        }
    }

    /// Evaluates conditions, reading each slot's property on first use.
    struct Evaluator {
        let nodes: UnsafePointer<Node>
        let literals: UnsafePointer<String>?
        let references: UnsafePointer<PropertyReference>?
        let slots: UnsafeMutablePointer<SlotValue>
        /// The location's values, and the catalog's capacity as `occupancy.capacity`'s default.
        let values: UnsafeBufferPointer<DomainValue>
        let catalogCapacity: String?
        /// Where the rules' domains are among the values, when the caller can tell: per
        /// slot its domain's index in `domains` (or -1), and where each domain's fresh value
        /// is, so that a slot is found without comparing names.
        var domainsOfSlots: UnsafePointer<Int32>?
        var finder: DomainFinder?

        init(
            nodes: UnsafePointer<Node>, literals: UnsafePointer<String>?, references: UnsafePointer<PropertyReference>?,
            slots: UnsafeMutablePointer<SlotValue>, values: UnsafeBufferPointer<DomainValue>, catalogCapacity: String?,
            domainsOfSlots: UnsafePointer<Int32>? = nil, finder: DomainFinder? = nil
        ) {
            self.nodes = nodes
            self.literals = literals
            self.references = references
            self.slots = slots
            self.values = values
            self.catalogCapacity = catalogCapacity
            self.domainsOfSlots = domainsOfSlots
            self.finder = finder
        }

        @inline(__always)
        func slot(_ index: Int32) -> SlotValue {
            let index = Int(index)
            if slots[index].state == 0 { fill(index) }
            return slots[index]
        }

        private func fill(_ index: Int) {
            let reference = references.unsafelyUnwrapped + index
            let position: LiveValues.PropertySlot?
            if let domainsOfSlots, let finder, domainsOfSlots[index] >= 0 {
                let value = finder.value(ofDomain: Int(domainsOfSlots[index]))
                position = LiveValues.position(
                    of: reference.pointee, inValueAt: value >= 0 ? Int(value) : nil, in: values, catalogCapacity: catalogCapacity)
            } else {
                position = LiveValues.position(of: reference.pointee, in: values, catalogCapacity: catalogCapacity)
            }
            guard let position else {
                slots[index].state = 1
                return
            }
            let number = parseNumber(LiveValues.text(at: position, in: values, catalogCapacity: catalogCapacity))
            slots[index] = SlotValue(state: 2, hasNumber: number != nil, number: number ?? 0, position: position)
        }

        /// A slot's text, if its property has a value.
        func text(_ index: Int32) -> String? {
            let slot = slot(index)
            return slot.state == 2 ? LiveValues.text(at: slot.position, in: values, catalogCapacity: catalogCapacity) : nil
        }

        func truth(_ index: Int32) -> Bool {
            let node = nodes[Int(index)]
            switch node.kind {
            case .boolean: return node.value != 0
            case .and: return truth(node.a) && truth(node.b)
            case .or: return truth(node.a) || truth(node.b)
            case .not: return !truth(node.a)
            case .exists: return slot(node.a).state == 2
            case .truth: return boolean(node.a) ?? false
            case .compareSlotWithNumber:
                let slot = slot(node.a)
                return slot.hasNumber && Self.compare(slot.number, node.comparison, node.value)
            case .compare:
                // Text and booleans are compared with == and != only (the parser refuses the rest).
                switch node.comparisonKind {
                case .numeric:
                    guard let x = number(node.a), let y = number(node.b) else { return false }
                    return Self.compare(x, node.comparison, y)
                case .text:
                    guard let equal = textEqual(node.a, node.b) else { return false }
                    return node.comparison == .equal ? equal : !equal
                case .boolean:
                    guard let x = boolean(node.a), let y = boolean(node.b) else { return false }
                    return node.comparison == .equal ? x == y : x != y
                }
            default:
                return false
            }
        }

        /// `x op y`.
        @inline(__always)
        static func compare(_ x: Double, _ op: CompiledExpression.Comparison, _ y: Double) -> Bool {
            switch op {
            case .equal: x == y
            case .notEqual: x != y
            case .less: x < y
            case .lessOrEqual: x <= y
            case .greater: x > y
            case .greaterOrEqual: x >= y
            }
        }

        func number(_ index: Int32) -> Double? {
            let node = nodes[Int(index)]
            switch node.kind {
            case .number: return node.value
            case .property:
                let slot = slot(node.a)
                return slot.hasNumber ? slot.number : nil
            case .negate: return number(node.a).map { -$0 }
            case .arithmetic:
                guard let x = number(node.a), let y = number(node.b) else { return nil }
                switch node.arithmetic {
                case .add: return x + y
                case .subtract: return x - y
                case .multiply: return x * y
                case .divide: return y == 0 ? nil : x / y
                }
            default: return nil
            }
        }

        private func textEqual(_ a: Int32, _ b: Int32) -> Bool? {
            func text(_ index: Int32) -> String? {
                let node = nodes[Int(index)]
                switch node.kind {
                case .string: return literals.unsafelyUnwrapped[Int(node.a)]
                case .property: return self.text(node.a)
                default: return nil
                }
            }
            guard let x = text(a), let y = text(b) else { return nil }
            return x == y
        }

        private func boolean(_ index: Int32) -> Bool? {
            let node = nodes[Int(index)]
            switch node.kind {
            case .boolean: return node.value != 0
            case .property:
                switch text(node.a) {
                case "true", "True", "TRUE", "1": return true
                case "false", "False", "FALSE", "0": return false
                default: return nil
                }
            default: return nil
            }
        }
    }
}
