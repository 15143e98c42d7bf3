import CMalloc
import Foundation
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

    /// The file the dynamic linker bound `symbol` to in this process, from /proc/self/maps.
    static func library(serving symbol: String) throws -> String {
        let address = UInt(bitPattern: try #require(dlsym(nil, symbol), "\(symbol) is not bound"))
        // Read to the end: /proc reports no size, and the file is longer than a first read.
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/self/maps"))
        defer { try? handle.close() }
        let maps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        for line in maps.split(separator: "\n") {
            // start-end perms offset device inode path
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let range = fields.first?.split(separator: "-").compactMap { UInt($0, radix: 16) } ?? []
            guard range.count == 2, range[0] <= address, address < range[1], fields.count >= 6 else { continue }
            return fields[5...].joined(separator: " ")
        }
        Issue.record("\(symbol) at \(String(address, radix: 16)) is in no mapped file")
        return ""
    }

    @Test("the name says the allocator the dynamic linker bound malloc to in this process, and the heap can be given back")
    func thisProcess() throws {
        // Found without mimalloc's own functions: where `malloc` resolves, and that file's name.
        let file = try Self.library(serving: "malloc")
        let name = LiveDataDaemon.heapAllocator
        if let range = file.range(of: "libmimalloc.so.") {
            // The file is named for the major and minor version (libmimalloc.so.2.0).
            let version = file[range.upperBound...].split(separator: ".").prefix(2).joined(separator: ".")
            #expect(name.hasPrefix("mimalloc \(version)."), "malloc is mimalloc's (\(file)), the name \(name)")
        } else {
            #expect(file.contains("libc.so") || file.contains("libc-"), "malloc is served from \(file)")
            #expect(name == "glibc", "malloc is the C library's (\(file)), the name \(name)")
        }
        // mimalloc's collection when it is linked, the C library's trim in any case.
        livedata_release_free_heap()
    }
}
