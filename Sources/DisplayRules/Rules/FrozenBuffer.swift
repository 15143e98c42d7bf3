/// An immutable copy of an array, freed by hand by its owner (in its `deinit`).
///
/// What a rule program reads on every update lives in these: reading one is a pointer
/// load, where an array stored in a class costs a retain and a release per access.
struct FrozenBuffer<Element> {
    let base: UnsafeMutablePointer<Element>
    let count: Int

    init(_ elements: [Element]) {
        count = elements.count
        base = .allocate(capacity: max(count, 1))
        _ = UnsafeMutableBufferPointer(start: base, count: count).initialize(from: elements)
    }

    subscript(index: Int) -> Element {
        @inline(__always) unsafeAddress { UnsafePointer(base + index) }
    }

    func free() {
        base.deinitialize(count: count)
        base.deallocate()
    }
}
