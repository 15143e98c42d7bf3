import CMalloc
import Testing

@testable import LiveDataServer

/// The daemon's executable links mimalloc (a test binary that links the executable's module
/// does too); a library used without it sees mimalloc's functions as absent and keeps the C
/// library's allocator.
@Suite("Heap allocator")
struct HeapAllocatorTests {
    @Test("the allocator is named by mimalloc's version, or as the C library's")
    func names() {
        #expect(LiveDataDaemon.heapAllocator(mimallocVersion: 209) == "mimalloc 2.0.9")
        #expect(LiveDataDaemon.heapAllocator(mimallocVersion: 212) == "mimalloc 2.1.2")
        #expect(LiveDataDaemon.heapAllocator(mimallocVersion: 0) == "glibc")
    }

    @Test("the name follows whichever allocator serves this process, and the heap can be given back")
    func thisProcess() {
        let version = Int(livedata_mimalloc_version())
        #expect(LiveDataDaemon.heapAllocator == LiveDataDaemon.heapAllocator(mimallocVersion: version))
        // mimalloc's collection when it is linked, the C library's trim in any case.
        livedata_release_free_heap()
    }
}
