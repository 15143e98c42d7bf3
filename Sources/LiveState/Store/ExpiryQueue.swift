import LiveTopics

/// When values go stale, earliest first (a binary min-heap).
struct ExpiryQueue {
    struct Entry {
        var deadline: LiveTimestamp
        var location: LocationState
        /// The store's number for the domain (see `LiveStore.staleDomains`).
        var domain: Int32
    }

    private var heap: [Entry] = []

    var count: Int { heap.count }
    var next: LiveTimestamp? { heap.first?.deadline }

    mutating func removeAll() {
        heap.removeAll()
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
