/// A growable buffer of plain values that the trie owns and frees by hand.
///
/// Reading it on the match path is a pointer load: no reference counting and no dynamic
/// exclusivity check, which an `Array` stored in a class costs on every access.
struct FlatBuffer<Element: BitwiseCopyable> {
    private(set) var base: UnsafeMutablePointer<Element>
    private(set) var count = 0
    private var capacity: Int

    init(capacity: Int = 16) {
        self.capacity = max(capacity, 1)
        base = .allocate(capacity: self.capacity)
    }

    /// A separate copy with the same contents; the caller frees both.
    func copy() -> FlatBuffer {
        var copy = FlatBuffer(capacity: capacity)
        copy.base.update(from: base, count: count)
        copy.count = count
        return copy
    }

    func free() {
        base.deallocate()
    }

    subscript(index: Int) -> Element {
        get { base[index] }
        nonmutating set { base[index] = newValue }
    }

    mutating func append(_ element: Element) {
        if count == capacity { grow(to: capacity * 2) }
        base[count] = element
        count += 1
    }

    mutating func append(contentsOf elements: UnsafeRawBufferPointer) where Element == UInt8 {
        if count + elements.count > capacity { grow(to: max(capacity * 2, count + elements.count)) }
        UnsafeMutableRawPointer(base + count).copyMemory(from: elements.baseAddress!, byteCount: elements.count)
        count += elements.count
    }

    mutating func removeAll() {
        count = 0
    }

    private mutating func grow(to newCapacity: Int) {
        let grown = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }
}
