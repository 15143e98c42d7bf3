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

    /// Removes and returns every entry due at `now`.
    mutating func popDue(_ now: LiveTimestamp) -> [Entry] {
        var due: [Entry] = []
        while let first = heap.first, first.deadline <= now {
            due.append(first)
            let last = heap.removeLast()
            if heap.isEmpty { break }
            heap[0] = last
            var parent = 0
            while true {
                let left = parent * 2 + 1
                let right = left + 1
                var smallest = parent
                if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
                if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
                if smallest == parent { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return due
    }
}
