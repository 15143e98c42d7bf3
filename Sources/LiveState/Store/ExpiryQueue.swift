import LiveTopics

/// When values go stale, earliest first (a binary min-heap).
struct ExpiryQueue {
    /// Kept to 16 bytes (``ExpiryEntryTests``): every location with a `staleAfter` has one.
    struct Entry {
        /// The deadline's milliseconds shifted left by ``domainBits``, the domain's number in
        /// the bits below: ordered as the deadlines are (ties by domain).
        private var packed: Int64
        var location: LocationState

        /// The domain numbers fit ``domainBits`` (a location's expiries are a 64-bit mask).
        static let domainBits: Int64 = 6

        init(deadline: LiveTimestamp, location: LocationState, domain: Int32) {
            packed = deadline.millisecondsSince1970 << Self.domainBits | Int64(domain)
            self.location = location
        }

        var deadline: LiveTimestamp { LiveTimestamp(millisecondsSince1970: packed >> Self.domainBits) }
        /// The store's number for the domain (see `LiveStore.staleDomains`).
        var domain: Int32 { Int32(packed & (1 << Self.domainBits - 1)) }
    }

    private var heap: [Entry] = []

    var count: Int { heap.count }
    var next: LiveTimestamp? { heap.first?.deadline }

    /// Forgets every entry; `keepingCapacity` when about as many are scheduled again at once
    /// (a clock step), so that the heap is not grown again from nothing while the old one
    /// is still held.
    mutating func removeAll(keepingCapacity: Bool = false) {
        heap.removeAll(keepingCapacity: keepingCapacity)
    }

    mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns every entry due at `now`. A few are popped one by one; when many
    /// are due (a start after a long stop, when most values went stale meanwhile), the rest
    /// are taken in one pass over the heap, which is then rebuilt: O(n) rather than a
    /// sift-down through the whole heap for each.
    mutating func popDue(_ now: LiveTimestamp) -> [Entry] {
        var due: [Entry] = []
        while let first = heap.first, first.deadline <= now {
            if due.count >= 64 && due.count >= heap.count / 64 {
                takeAllDue(now, into: &due)
                break
            }
            due.append(first)
            let last = heap.removeLast()
            if heap.isEmpty { break }
            heap[0] = last
            siftDown(0)
        }
        return due
    }

    private mutating func takeAllDue(_ now: LiveTimestamp, into due: inout [Entry]) {
        var kept: [Entry] = []
        kept.reserveCapacity(heap.count)
        for entry in heap {
            if entry.deadline <= now { due.append(entry) } else { kept.append(entry) }
        }
        heap = kept
        var parent = heap.count / 2
        while parent > 0 {
            parent -= 1
            siftDown(parent)
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = parent * 2 + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
            if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
