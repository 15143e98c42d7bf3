// The layer is Linux's (ELF import slots, /proc/self/maps), and so are these tests.
#if canImport(Glibc)
import CMosquittoIO
import Foundation
import Glibc
import Synchronization
import Testing

/// The buffered socket layer (`CMosquittoIO`) driven directly: its replacements of `read`,
/// `write`, `close` and `socketpair` on socket pairs, without libmosquitto, and its
/// redirection run on shared objects built here, with the imports it expects and without.
/// One test at a time: some block a thread for a moment (a socket call, a signal's wait),
/// and the rest of the suite runs on few threads.
@Suite("The buffered socket layer", .serialized)
struct SocketLayerTests {
    // MARK: Reads

    @Test("a packet split across reads: each read takes what has arrived, the buffer keeps the rest, EAGAIN when none is left")
    func splitPacket() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        // A PUBLISH: fixed header, remaining length 300 (two bytes), then the body.
        let body = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let packet: [UInt8] = [0x30, 0xAC, 0x02] + body
        pair.peerSend(Array(packet[..<100]))

        // libmosquitto's way: the first byte, the length byte by byte, the body.
        #expect(pair.read(1) == .bytes([0x30]))
        #expect(livedata_io_buffered_input(pair.ours) == 99, "one read(2) took all that had arrived")
        #expect(pair.read(1) == .bytes([0xAC]))
        #expect(pair.read(1) == .bytes([0x02]))
        #expect(pair.read(300) == .bytes(Array(body[..<97])), "as much as there is, no more")
        #expect(pair.read(203) == .failed(EAGAIN))
        #expect(livedata_io_buffered_input(pair.ours) == 0)

        pair.peerSend(Array(body[97...]) + [0xE0, 0x00])
        #expect(pair.read(203) == .bytes(Array(body[97...])))
        #expect(pair.read(1) == .bytes([0xE0]))
        #expect(pair.read(1) == .bytes([0x00]))
        #expect(pair.read(1) == .failed(EAGAIN))
    }

    @Test("a stream in pieces of every size, read in pieces of every size (at 64 KiB and over straight into the caller's memory), arrives whole and in order")
    func piecesOfEverySize() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        let stream = (0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        var random = LinearCongruential(seed: 0x5EED)
        var sent = 0
        var received: [UInt8] = []
        received.reserveCapacity(stream.count)
        while received.count < stream.count {
            if sent < stream.count {
                let piece = min(stream.count - sent, 1 + random.next(below: 40_000))
                let written = stream[sent..<(sent + piece)].withUnsafeBytes {
                    send(pair.peer, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                if written > 0 { sent += written }
            }
            // Mostly the small reads libmosquitto makes, now and then one of 64 KiB or more.
            let sizes = [1, 1, 2, 3, 17, 1000, 65_536, 100_000]
            let size = sizes[random.next(below: sizes.count)]
            switch pair.read(size) {
            case .bytes(let bytes): received += bytes
            case .failed(EAGAIN): continue
            case let other: Issue.record("read: \(other)"); return
            }
        }
        #expect(firstDifference(received, stream) == nil)
        #expect(pair.read(1) == .failed(EAGAIN))
    }

    @Test("the peer's end: a read returns what is buffered first, then 0")
    func endOfStream() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        pair.peerSend([1, 2, 3])
        Glibc.shutdown(pair.peer, Int32(SHUT_WR))
        #expect(pair.read(1) == .bytes([1]))
        #expect(pair.read(10) == .bytes([2, 3]))
        #expect(pair.read(10) == .bytes([]))
    }

    @Test("a signal while a read waits: EINTR, the buffer untouched, and the next read gets the bytes")
    func readInterrupted() async throws {
        let pair = try SocketPair(nonblocking: false)
        defer { pair.close() }
        try pair.attach()
        let outcome = Outcome()
        let call = BlockingCall {
            var byte: UInt8 = 0
            outcome.result = livedata_io_test_read(pair.ours, &byte, 1)
            outcome.error = errno
        }
        let interrupted = await call.interruptUntilFinished()
        #expect(interrupted, "the read came back")
        // Else the socket's end lets it come back, rather than the test hang.
        if !interrupted { Glibc.shutdown(pair.ours, Int32(SHUT_RDWR)) }
        call.join()
        #expect(outcome.result == -1 && outcome.error == EINTR, "\(outcome.result), errno \(outcome.error)")
        #expect(livedata_io_buffered_input(pair.ours) == 0)
        pair.peerSend([7, 8, 9])
        #expect(pair.read(2) == .bytes([7, 8]))
        #expect(pair.read(2) == .bytes([9]))
    }

    // MARK: Writes

    @Test("collected writes to a full socket: the flush says so, what waits keeps its place before later writes, and all arrives in order")
    func fullSocket() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        var expected: [UInt8] = []
        livedata_io_collect(pair.ours)
        for index in 0..<1000 {
            let packet = [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 4096)
            #expect(pair.write(packet) == 4096, "collected, whatever the socket's room")
            expected += packet
        }
        #expect(livedata_io_flush(pair.ours) == 1, "more than the socket takes: wait for POLLOUT")
        let waiting = livedata_io_pending_output(pair.ours)
        #expect(waiting > 0 && waiting < expected.count)
        // Not collecting now, but earlier bytes wait: this one goes behind them.
        #expect(pair.write([0xAA, 0xBB]) == 2)
        expected += [0xAA, 0xBB]
        #expect(livedata_io_pending_output(pair.ours) == waiting + 2)

        var received: [UInt8] = []
        var flushed: Int32 = 1
        while flushed == 1 || received.count < expected.count {
            received += pair.peerReceiveAvailable()
            if flushed == 1 { flushed = livedata_io_flush(pair.ours) }
        }
        #expect(flushed == 0)
        #expect(firstDifference(received, expected) == nil)
        #expect(livedata_io_pending_output(pair.ours) == 0)
        // With nothing waiting and no collection, a write goes straight to the socket.
        #expect(pair.write([1, 2]) == 2)
        #expect(livedata_io_pending_output(pair.ours) == 0)
        #expect(pair.peerReceiveAvailable() == [1, 2])
    }

    @Test("signals while a flush waits for a blocking socket: it goes on where it was, and all arrives in order")
    func flushInterrupted() async throws {
        let pair = try SocketPair(nonblocking: false)
        defer { pair.close() }
        try pair.attach()
        try pair.makePeerNonblocking()
        let expected = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 12) }
        livedata_io_collect(pair.ours)
        #expect(pair.write(expected) == expected.count)
        let outcome = Outcome()
        let call = BlockingCall {
            outcome.result = Int(livedata_io_flush(pair.ours))
            outcome.error = errno
        }
        var received: [UInt8] = []
        var signals = 0
        let deadline = ContinuousClock.now + .seconds(20)
        while received.count < expected.count && ContinuousClock.now < deadline {
            call.interrupt()
            signals += 1
            try await Task.sleep(for: .microseconds(200))
            // A little at a time, so that the flush keeps waiting for room.
            received += pair.peerReceiveAvailable(atMost: 16 * 1024)
        }
        if !call.isFinished { Glibc.shutdown(pair.ours, Int32(SHUT_RDWR)) }
        call.join()
        #expect(outcome.result == 0, "flush: \(outcome.result), errno \(outcome.error), after \(signals) signals")
        #expect(firstDifference(received, expected) == nil)
    }

    @Test("a socket that failed: the flush says -1 with the error, and no SIGPIPE")
    func failedSocket() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        livedata_io_collect(pair.ours)
        #expect(pair.write([1, 2, 3]) == 3)
        Glibc.close(pair.peer)
        pair.peer = -1
        let flushed = livedata_io_flush(pair.ours)
        let error = errno
        #expect(flushed == -1)
        #expect(error == EPIPE || error == ECONNRESET, "errno \(error)")
    }

    // MARK: Close

    @Test("a close with bytes buffered both ways and a full socket returns at once, drops the buffers, and sends what the socket took")
    func closeWithBufferedData() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        pair.peerSend(Array(repeating: 5, count: 10))
        #expect(pair.read(1) == .bytes([5]))
        #expect(livedata_io_buffered_input(pair.ours) == 9)
        let output = (0..<4_000_000).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ $0 >> 10) }
        livedata_io_collect(pair.ours)
        #expect(pair.write(output) == output.count)
        #expect(livedata_io_flush(pair.ours) == 1)
        let serial = livedata_io_test_attachment(pair.ours)
        #expect(serial != 0)
        // Blocking now: a close that waited for room would wait for good.
        try pair.makeOursBlocking()

        let start = ContinuousClock.now
        let closed = livedata_io_test_close(pair.ours)
        let took = ContinuousClock.now - start
        #expect(closed == 0)
        #expect(took < .milliseconds(500), "the close took \(took)")
        // The descriptor's slot is free: no buffer serves the next socket with its number.
        #expect(livedata_io_test_attachment(pair.ours) != serial)
        let descriptor = pair.ours
        pair.ours = -1

        try pair.makePeerBlocking()
        var received: [UInt8] = []
        while true {
            let bytes = pair.peerReceiveAvailable()
            if bytes.isEmpty { break }
            received += bytes
        }
        #expect(received.count < output.count, "a full socket: the rest dropped")
        #expect(firstDifference(received, Array(output.prefix(received.count))) == nil, "what went out, in order")
        // The next socket with that number (if it gets it) has no buffers.
        let next = try SocketPair(nonblocking: true)
        defer { next.close() }
        if next.ours == descriptor || next.peer == descriptor {
            #expect(livedata_io_test_attachment(descriptor) == 0)
            #expect(livedata_io_buffered_input(descriptor) == 0 && livedata_io_pending_output(descriptor) == 0)
        }
    }

    @Test("a close with a DISCONNECT collected and room in the socket sends it, then the peer sees the end")
    func closeSendsWhatFits() throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        livedata_io_collect(pair.ours)
        #expect(pair.write([0xE0, 0x00]) == 2)
        #expect(livedata_io_test_close(pair.ours) == 0)
        pair.ours = -1
        try pair.makePeerBlocking()
        #expect(pair.peerReceiveAvailable() == [0xE0, 0x00])
        #expect(pair.peerReceiveAvailable() == [])
    }

    // MARK: Wake-up pairs

    @Test("the one socket pair made while claiming is an unused wake-up pair: its writes are left out, until it is closed")
    func wakeUpPair() throws {
        livedata_io_claim_pairs(1)
        var descriptors: [Int32] = [-1, -1]
        #expect(livedata_io_test_socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0)
        #expect(livedata_io_claim_pairs(0) == 1)
        let (reader, writer) = (descriptors[0], descriptors[1])
        #expect(livedata_io_test_unused_wake_writer(writer) == 1)
        #expect(livedata_io_test_unused_wake_writer(reader) == 0)
        var byte: UInt8 = 1
        #expect(livedata_io_test_write(writer, &byte, 1) == 1)
        _ = fcntl(reader, F_SETFL, fcntl(reader, F_GETFL) | O_NONBLOCK)
        #expect(Glibc.read(reader, &byte, 1) == -1 && errno == EAGAIN, "nothing was written")
        #expect(livedata_io_test_close(writer) == 0)
        #expect(livedata_io_test_unused_wake_writer(writer) == 0)
        #expect(livedata_io_test_close(reader) == 0)
    }

    @Test("a pair closed while claiming (mosquitto_new failing) is not marked: the next descriptor with its number is written")
    func pairClosedWhileClaiming() throws {
        livedata_io_claim_pairs(1)
        var descriptors: [Int32] = [-1, -1]
        #expect(livedata_io_test_socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0)
        for descriptor in descriptors { #expect(livedata_io_test_close(descriptor) == 0) }
        #expect(livedata_io_claim_pairs(0) == 0)
        #expect(livedata_io_test_unused_wake_writer(descriptors[1]) == 0)
    }

    @Test(
        "not exactly one stream pair while claiming: none is marked, their writes go through",
        arguments: [(2, Int32(SOCK_STREAM.rawValue)), (1, Int32(SOCK_DGRAM.rawValue)), (0, Int32(SOCK_STREAM.rawValue))])
    func unexpectedPairs(count: Int, type: Int32) throws {
        livedata_io_claim_pairs(1)
        var made: [[Int32]] = []
        for _ in 0..<count {
            var descriptors: [Int32] = [-1, -1]
            #expect(livedata_io_test_socketpair(AF_UNIX, type, 0, &descriptors) == 0)
            made.append(descriptors)
        }
        #expect(livedata_io_claim_pairs(0) == 0)
        for descriptors in made {
            #expect(livedata_io_test_unused_wake_writer(descriptors[1]) == 0)
            var byte: UInt8 = 1
            #expect(livedata_io_test_write(descriptors[1], &byte, 1) == 1)
            #expect(Glibc.read(descriptors[0], &byte, 1) == 1, "written")
            for descriptor in descriptors { _ = livedata_io_test_close(descriptor) }
        }
    }

    // MARK: The lock check

    @Test("a lock taken while another thread holds the mutex: reported with the call, the caller and both threads")
    func lockHeldElsewhere() throws {
        let mutex = CheckedMutex()
        defer { mutex.destroy() }
        let holder = LockHolder(mutex)
        defer { holder.finish() }
        let reports = LockViolations.collect {
            #expect(livedata_io_test_lock(mutex.pointer) == EDEADLK, "not taken")
            #expect(livedata_io_test_unlock(mutex.pointer) == EDEADLK, "not let go: this thread does not hold it")
        }
        #expect(reports.count == 2)
        let ours = livedata_io_test_thread_id()
        for (report, call) in zip(reports, ["pthread_mutex_lock", "pthread_mutex_unlock"]) {
            #expect(report.contains("libmosquitto's \(call) of mutex"), "\(report)")
            #expect(report.contains("on thread \(ours) ("), "\(report)")
            #expect(report.contains("while thread \(holder.thread) (lock-holder) holds it"), "\(report)")
            #expect(report.contains("must be made on its network thread"), "\(report)")
        }
        holder.finish()
        #expect(livedata_io_test_lock(mutex.pointer) == 0, "free again: taken")
        #expect(livedata_io_test_unlock(mutex.pointer) == 0)
    }

    @Test("a lock taken twice on one thread, and a mutex let go that nobody holds: reported")
    func lockMisuseOnOneThread() {
        let mutex = CheckedMutex()
        defer { mutex.destroy() }
        let reports = LockViolations.collect {
            #expect(livedata_io_test_lock(mutex.pointer) == 0)
            #expect(livedata_io_test_lock(mutex.pointer) == EDEADLK)
            #expect(livedata_io_test_unlock(mutex.pointer) == 0)
            #expect(livedata_io_test_unlock(mutex.pointer) == EDEADLK)
        }
        #expect(reports.count == 2)
        #expect(reports.first?.contains("which holds it already") == true, "\(reports)")
        #expect(reports.last?.contains("while no thread holds it") == true, "\(reports)")
    }

    @Test("a lock and unlock on one thread leave the mutex as the C library made it; one the C library took is let go by it")
    func lockLeavesMutexUnheld() {
        let mutex = CheckedMutex()
        defer { mutex.destroy() }
        let reports = LockViolations.collect {
            for _ in 0..<3 {
                #expect(livedata_io_test_lock(mutex.pointer) == 0)
                #expect(livedata_io_test_unlock(mutex.pointer) == 0)
            }
            #expect(pthread_mutex_trylock(mutex.pointer) == 0, "the C library finds it free")
            #expect(livedata_io_test_unlock(mutex.pointer) == 0, "taken before the redirection, let go after")
            #expect(pthread_mutex_trylock(mutex.pointer) == 0, "and free again")
            #expect(pthread_mutex_unlock(mutex.pointer) == 0)
        }
        #expect(reports.isEmpty, "\(reports)")
    }

    @Test("without a handler, a lock taken while another thread holds the mutex stops the process with its message")
    func lockViolationStops() throws {
        let mutex = CheckedMutex()
        defer { mutex.destroy() }
        let holder = LockHolder(mutex)
        defer { holder.finish() }
        var pipe: [Int32] = [0, 0]
        #expect(Glibc.pipe(&pipe) == 0)
        let child = fork()
        if child == 0 {
            // The child: only the C calls of the check, then a stop (or, if it returned, 0).
            dup2(pipe[1], STDERR_FILENO)
            _ = livedata_io_test_lock(mutex.pointer)
            _exit(0)
        }
        Glibc.close(pipe[1])
        defer { Glibc.close(pipe[0]) }
        #expect(child > 0, "fork: \(errno)")
        var status: Int32 = 0
        let deadline = ContinuousClock.now + .seconds(20)
        while waitpid(child, &status, WNOHANG) == 0 {
            if ContinuousClock.now > deadline {
                kill(child, SIGKILL)
                waitpid(child, &status, 0)
                Issue.record("the child did not stop")
                break
            }
            usleep(5_000)
        }
        var output = [UInt8](repeating: 0, count: 4096)
        let count = read(pipe[0], &output, output.count)
        let message = String(decoding: output.prefix(max(count, 0)), as: UTF8.self)
        #expect(status & 0x7f == SIGABRT, "stopped by SIGABRT (status \(status))")
        #expect(message.contains("libmosquitto's pthread_mutex_lock of mutex"), "\(message)")
        // The holder is a thread the child has not: its name cannot be read there.
        #expect(message.contains("while thread \(holder.thread) (?) holds it"), "\(message)")
    }

    // MARK: The redirection

    @Test("the libmosquitto this package runs with passes the checks")
    func libmosquittoAsExpected() {
        let (code, why) = checkObject("/libmosquitto.so")
        #expect(code == 0, "\(why)")
    }

    @Test("an object not loaded, or one without the imports (the C library): refused, nothing changed")
    func missingImports() {
        #expect(checkObject("/no-such-object.so").code == ENOENT)
        let (code, why) = checkObject("/libc.so.6")
        #expect(code == ESRCH, "\(why)")
        #expect(why.contains("does not import read"))
    }

    @Test("objects whose imports are as expected: all slots redirected and put back, each page keeps its protection", arguments: TestObject.Variant.expected)
    func redirection(variant: TestObject.Variant) async throws {
        let object = try await TestObject(variant)
        defer { object.remove() }
        let protections = object.pageProtections()
        #expect(!protections.isEmpty)
        #expect(object.redirect(on: true) == 0)
        #expect(object.pageProtections() == protections)
        #expect(object.touch() == 1, "its writable data still writable")

        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        pair.peerSend(Array(repeating: 1, count: 10))
        #expect(object.read(pair.ours, 1) == 1)
        #expect(livedata_io_buffered_input(pair.ours) == 9, "its read goes through the buffer")
        livedata_io_collect(pair.ours)
        #expect(object.write(pair.ours, [1, 2, 3]) == 3)
        #expect(livedata_io_pending_output(pair.ours) == 3, "its write is collected")
        #expect(livedata_io_flush(pair.ours) == 0)
        #expect(object.monotonicReadings().allSatisfy { $0 == .coarse }, "its monotonic clock is the coarse one")
        #expect(abs(object.clock(realtime: true) - nanoseconds(CLOCK_REALTIME)) < 1_000_000_000, "its real-time clock as asked")
        let originalLock = UnsafeRawPointer(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_mutex_lock"))
        let originalUnlock = UnsafeRawPointer(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_mutex_unlock"))
        let checkedLock = UnsafeRawPointer(livedata_io_test_replacement("pthread_mutex_lock"))
        let checkedUnlock = UnsafeRawPointer(livedata_io_test_replacement("pthread_mutex_unlock"))
        #expect(checkedLock != nil && checkedUnlock != nil)
        #expect(UnsafeRawPointer(object.lockFunction()) == checkedLock, "its lock is the checked one")
        #expect(UnsafeRawPointer(object.unlockFunction()) == checkedUnlock, "its unlock is the checked one")
        let reports = LockViolations.collect {
            #expect(object.lockAndUnlock() == 0)
            #expect(object.lockTwice() == EDEADLK, "a second lock on one thread is caught through its slots")
        }
        #expect(reports.count == 1 && reports[0].contains("which holds it already"), "\(reports)")

        #expect(object.redirect(on: false) == 0)
        #expect(UnsafeRawPointer(object.lockFunction()) == originalLock, "its lock is the C library's again")
        #expect(UnsafeRawPointer(object.unlockFunction()) == originalUnlock, "its unlock is the C library's again")
        #expect(object.lockAndUnlock() == 0)
        #expect(object.pageProtections() == protections)
        #expect(pair.read(9) == .bytes(Array(repeating: 1, count: 9)))
        pair.peerSend(Array(repeating: 2, count: 10))
        #expect(object.read(pair.ours, 1) == 1)
        #expect(livedata_io_buffered_input(pair.ours) == 0, "its read goes straight to the socket again")
        #expect(object.monotonicReadings().contains(.ahead), "its monotonic clock is the C library's own again")
        #expect(object.touch() == 2)
    }

    @Test("objects whose imports are not as expected: refused with the reason, nothing redirected", arguments: TestObject.Variant.unexpected)
    func refusal(variant: TestObject.Variant) async throws {
        let object = try await TestObject(variant)
        defer { object.remove() }
        let protections = object.pageProtections()
        let (code, why) = checkObject(object.path)
        #expect(code == variant.refusal, "\(why)")
        #expect(why.contains(variant.reason), "\(why)")
        #expect(object.redirect(on: true) == variant.refusal)
        #expect(object.pageProtections() == protections)
        try expectStraightCalls(object)
    }

    @Test("a step that fails puts back the slots already rewritten: all or nothing")
    func allOrNothing() async throws {
        let object = try await TestObject(.boundAtLoad)
        defer { object.remove() }
        let protections = object.pageProtections()
        for step in 0..<4 {
            #expect(object.redirect(on: true, failAtStep: Int32(step)) == EIO)
            #expect(object.pageProtections() == protections)
            try expectStraightCalls(object)
        }
        #expect(object.redirect(on: true) == 0)
        #expect(object.redirect(on: false) == 0)
        try expectStraightCalls(object)
    }

    /// The object's read and write reach the socket without the buffers.
    func expectStraightCalls(_ object: TestObject, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let pair = try SocketPair(nonblocking: true)
        defer { pair.close() }
        try pair.attach()
        pair.peerSend(Array(repeating: 1, count: 10))
        #expect(object.read(pair.ours, 1) == 1, sourceLocation: sourceLocation)
        #expect(livedata_io_buffered_input(pair.ours) == 0, "read not buffered", sourceLocation: sourceLocation)
        livedata_io_collect(pair.ours)
        #expect(object.write(pair.ours, [1, 2, 3]) == 3, sourceLocation: sourceLocation)
        #expect(livedata_io_pending_output(pair.ours) == 0, "write not collected", sourceLocation: sourceLocation)
        #expect(pair.peerReceiveAvailable() == [1, 2, 3], sourceLocation: sourceLocation)
    }

    func checkObject(_ fragment: String) -> (code: Int32, why: String) {
        var why = [CChar](repeating: 0, count: 256)
        let code = livedata_io_test_check(fragment, &why, why.count)
        return (code, String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}

// MARK: - Helpers

/// The clock's time in nanoseconds, read by this process's own `clock_gettime`.
func nanoseconds(_ clock: clockid_t) -> Int64 {
    var now = timespec()
    clock_gettime(clock, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// Where two byte streams first differ (a length counts), or nil: for streams of megabytes,
/// whose element-by-element difference would take the test library ages to show.
func firstDifference(_ received: [UInt8], _ expected: [UInt8]) -> Int? {
    let common = min(received.count, expected.count)
    if let index = (0..<common).first(where: { received[$0] != expected[$0] }) { return index }
    return received.count == expected.count ? nil : common
}

/// What a read through the layer gave.
enum ReadResult: Equatable, CustomStringConvertible {
    case bytes([UInt8])
    case failed(Int32)

    var description: String {
        switch self {
        case .bytes(let bytes): "\(bytes.count) bytes"
        case .failed(let error): "errno \(error)"
        }
    }
}

/// A connected pair of stream sockets: `ours`, driven through the layer as libmosquitto's
/// socket would be, and `peer`, the broker's end, used directly. Closed through the layer,
/// so that no buffer outlives its descriptor.
final class SocketPair: @unchecked Sendable {
    var ours: Int32
    var peer: Int32

    init(nonblocking: Bool) throws {
        var descriptors: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        (ours, peer) = (descriptors[0], descriptors[1])
        if nonblocking {
            for descriptor in descriptors { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        }
    }

    func attach() throws {
        let code = livedata_io_test_attach(ours)
        guard code == 0 else { throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO) }
    }

    func makeOursBlocking() throws { _ = fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) & ~O_NONBLOCK) }
    func makePeerBlocking() throws { _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) & ~O_NONBLOCK) }
    func makePeerNonblocking() throws { _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK) }

    /// `livedata_io_test_read` of up to `length` bytes.
    func read(_ length: Int) -> ReadResult {
        var buffer = [UInt8](repeating: 0, count: length)
        let got = livedata_io_test_read(ours, &buffer, length)
        return got < 0 ? .failed(errno) : .bytes(Array(buffer[..<got]))
    }

    /// `livedata_io_test_write`.
    func write(_ bytes: [UInt8]) -> Int {
        livedata_io_test_write(ours, bytes, bytes.count)
    }

    /// Sends all of `bytes` from the peer (they fit: small).
    func peerSend(_ bytes: [UInt8]) {
        let sent = send(peer, bytes, bytes.count, Int32(MSG_NOSIGNAL))
        precondition(sent == bytes.count, "the peer sent \(sent) of \(bytes.count) bytes")
    }

    /// What the peer has received (waits for it when the peer blocks).
    func peerReceiveAvailable(atMost limit: Int = 1 << 20) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: limit)
        let got = recv(peer, &buffer, limit, 0)
        return got > 0 ? Array(buffer[..<got]) : []
    }

    func close() {
        if ours >= 0 { _ = livedata_io_test_close(ours) }
        if peer >= 0 { _ = livedata_io_test_close(peer) }
        ours = -1
        peer = -1
    }
}

/// Filled in by a ``BlockingCall``, read after it is joined.
final class Outcome: @unchecked Sendable {
    var result = 0
    var error: Int32 = 0
}

/// A call that blocks, on a thread of its own, which `interrupt()` sends SIGUSR2: its
/// handler does nothing, and without SA_RESTART a blocking system call it hits returns
/// EINTR.
final class BlockingCall: @unchecked Sendable {
    static let signal: Int32 = {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        sigaction(SIGUSR2, &action, nil)
        return SIGUSR2
    }()

    private var thread = pthread_t()
    private let work: () -> Void
    private let finished = Atomic<Bool>(false)

    init(_ work: @escaping () -> Void) {
        _ = Self.signal
        self.work = work
        let context = Unmanaged.passRetained(self).toOpaque()
        let created = pthread_create(
            &thread, nil,
            { context in
                let call = Unmanaged<BlockingCall>.fromOpaque(context!).takeRetainedValue()
                // The thread inherits its creator's mask, and the runtime's worker threads
                // block signals.
                var signals = sigset_t()
                sigemptyset(&signals)
                sigaddset(&signals, BlockingCall.signal)
                pthread_sigmask(SIG_UNBLOCK, &signals, nil)
                call.work()
                call.finished.store(true, ordering: .releasing)
                return nil
            }, context)
        precondition(created == 0, "pthread_create: \(created)")
    }

    var isFinished: Bool { finished.load(ordering: .acquiring) }

    func interrupt() {
        if !isFinished { pthread_kill(thread, Self.signal) }
    }

    /// Signals the thread every few milliseconds until its call returns (a signal that comes
    /// before the call blocks only runs the handler); false after 10 s.
    func interruptUntilFinished() async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !isFinished && ContinuousClock.now < deadline {
            interrupt()
            try? await Task.sleep(for: .milliseconds(5))
        }
        return isFinished
    }

    func join() { pthread_join(thread, nil) }
}

/// A mutex made as libmosquitto makes its own (`pthread_mutex_init` with no attributes).
struct CheckedMutex: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        pointer = .allocate(capacity: 1)
        pthread_mutex_init(pointer, nil)
    }

    func destroy() {
        pthread_mutex_destroy(pointer)
        pointer.deallocate()
    }
}

/// A thread named "lock-holder" that takes `mutex` through the checked lock and holds it
/// until `finish()`.
final class LockHolder: @unchecked Sendable {
    private let held = DispatchSemaphore(value: 0)
    private let release = DispatchSemaphore(value: 0)
    private let tid = Atomic<Int32>(0)
    private var call: BlockingCall?

    init(_ mutex: CheckedMutex) {
        call = BlockingCall { [self] in
            livedata_io_test_name_thread("lock-holder")
            tid.store(livedata_io_test_thread_id(), ordering: .releasing)
            precondition(livedata_io_test_lock(mutex.pointer) == 0)
            held.signal()
            release.wait()
            precondition(livedata_io_test_unlock(mutex.pointer) == 0)
        }
        held.wait()
    }

    /// The holder's kernel thread id.
    var thread: Int32 { tid.load(ordering: .acquiring) }

    /// Lets go of the mutex and ends the thread (once).
    func finish() {
        guard let call else { return }
        self.call = nil
        release.signal()
        call.join()
    }
}

/// The lock check's reports, collected while `body` runs instead of stopping the process.
enum LockViolations {
    private static let reports = Mutex<[String]>([])

    static func collect(_ body: () -> Void) -> [String] {
        reports.withLock { $0 = [] }
        livedata_io_test_on_lock_violation { message in
            let text = message.map { String(cString: $0) } ?? ""
            LockViolations.reports.withLock { $0.append(text) }
        }
        body()
        livedata_io_test_on_lock_violation(nil)
        return reports.withLock { $0 }
    }
}

/// A small shared object built for a test, loaded, whose functions call `read`, `write`,
/// `close` and `socketpair` (or some of them, or more) through its own import slots.
final class TestObject: @unchecked Sendable {
    struct Variant: Sendable, CustomTestStringConvertible {
        var name: String
        var source: String
        var flags: [String]
        /// What the checks answer; 0 for an object they accept.
        var refusal: Int32 = 0
        /// A part of the reason given.
        var reason = ""

        var testDescription: String { name }

        static let functions = """
            #include <pthread.h>
            #include <sys/socket.h>
            #include <sys/uio.h>
            #include <time.h>
            #include <unistd.h>
            int counter;
            static pthread_mutex_t objectMutex = PTHREAD_MUTEX_INITIALIZER;
            void *object_lock_function(void) { return (void *)pthread_mutex_lock; }
            void *object_unlock_function(void) { return (void *)pthread_mutex_unlock; }
            int object_lock_twice(void) {
                int locked = pthread_mutex_lock(&objectMutex);
                if (locked != 0) return -1;
                int again = pthread_mutex_lock(&objectMutex);
                pthread_mutex_unlock(&objectMutex);
                return again;
            }
            int object_lock_and_unlock(void) {
                int locked = pthread_mutex_lock(&objectMutex);
                return locked != 0 ? locked : pthread_mutex_unlock(&objectMutex);
            }
            long long object_clock(int realtime) {
                struct timespec now;
                clock_gettime(realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC, &now);
                return now.tv_sec * 1000000000LL + now.tv_nsec;
            }
            ssize_t object_read(int fd, void *buffer, size_t length) { return read(fd, buffer, length); }
            ssize_t object_write(int fd, const void *buffer, size_t length) { return write(fd, buffer, length); }
            int object_touch(void) { return ++counter; }

            """
        static let closeAndPair = """
            int object_close(int fd) { return close(fd); }
            int object_pair(int descriptors[2]) { return socketpair(AF_UNIX, SOCK_STREAM, 0, descriptors); }

            """

        static let boundAtLoad = Variant(
            name: "bound at load, its import slots on a read-only RELRO page", source: functions + closeAndPair,
            flags: ["-Wl,-z,relro,-z,now"])
        static let expected = [
            boundAtLoad,
            Variant(name: "bound lazily", source: functions + closeAndPair, flags: ["-Wl,-z,lazy"]),
            // RELRO ends inside a page, which the loader leaves writable (as with 64 KiB
            // pages and an object linked for 4 KiB ones): it must stay writable.
            Variant(
                name: "its import slots in RELRO on a page the loader leaves writable", source: functions + closeAndPair,
                flags: ["-fuse-ld=lld", "-Wl,-z,relro,-z,now,-z,common-page-size=64"]),
        ]
        static let unexpected = [
            Variant(
                name: "without close and socketpair", source: functions, flags: [], refusal: ESRCH,
                reason: "does not import close"),
            Variant(
                name: "with recv too", source: functions + closeAndPair + """
                    ssize_t object_recv(int fd, void *buffer, size_t length) { return recv(fd, buffer, length, 0); }
                    """, flags: [], refusal: EXDEV, reason: "imports recv"),
            Variant(
                name: "with writev too", source: functions + closeAndPair + """
                    ssize_t object_writev(int fd, const struct iovec *parts, int count) { return writev(fd, parts, count); }
                    """, flags: [], refusal: EXDEV, reason: "imports writev"),
            Variant(
                name: "with dup too", source: functions + closeAndPair + """
                    int object_dup(int fd) { return dup(fd); }
                    """, flags: [], refusal: EXDEV, reason: "imports dup"),
            Variant(
                name: "with read's address in a table of its own", source: functions + closeAndPair + """
                    ssize_t (*const readers[])(int, void *, size_t) = {read};
                    ssize_t object_table_read(int fd, void *buffer, size_t length) { return readers[0](fd, buffer, length); }
                    """, flags: [], refusal: ENOEXEC, reason: "other than through an import slot"),
        ]
    }

    let directory: URL
    /// Where it is loaded from, as the loader and the kernel's map of the process name it.
    let path: String
    private let handle: UnsafeMutableRawPointer

    init(_ variant: Variant) async throws {
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).resolvingSymlinksInPath()
            .appendingPathComponent("socket-layer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let source = directory.appendingPathComponent("object.c")
        try variant.source.write(to: source, atomically: true, encoding: .utf8)
        path = directory.appendingPathComponent("libobject.so").path
        try await Self.compile(["-shared", "-fPIC", "-O1", "-o", path, source.path] + variant.flags)
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw CompileFailure(message: "dlopen: " + String(cString: dlerror()))
        }
        self.handle = handle
    }

    struct CompileFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// Runs the toolchain's C compiler (the one beside `swift`), or the system's, without
    /// holding a thread while it works.
    static func compile(_ arguments: [String]) async throws {
        var failures: [String] = []
        for compiler in ["clang", "cc"] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [compiler] + arguments
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/null"))
            let log = URL(fileURLWithPath: arguments[arguments.firstIndex(of: "-o")! + 1] + ".log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let errors = try FileHandle(forWritingTo: log)
            process.standardOutput = output
            process.standardError = errors
            let status: Int32 = try await withCheckedThrowingContinuation { continuation in
                process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
                do {
                    try process.run()
                } catch {
                    process.terminationHandler = nil
                    continuation.resume(throwing: error)
                }
            }
            try? errors.close()
            try? output.close()
            if status == 0 { return }
            failures.append("\(compiler): " + ((try? String(contentsOf: log, encoding: .utf8)) ?? "exit status \(status)"))
        }
        throw CompileFailure(message: failures.joined(separator: "\n"))
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// The object's `clock_gettime` of the real-time clock, or of the monotonic one, in nanoseconds.
    func clock(realtime: Bool) -> Int64 {
        let call = function("object_clock", as: (@convention(c) (Int32) -> Int64).self)
        return call(realtime ? 1 : 0)
    }

    enum Reading { case coarse, ahead }

    /// Twenty readings of the object's monotonic clock, each between two of the coarse clock
    /// (`.coarse`) or past the second (`.ahead`): the C library's own clock is ahead of the
    /// coarse one, which keeps the time of the kernel's last tick, nearly always.
    func monotonicReadings() -> [Reading] {
        (0..<20).map { _ in
            let before = nanoseconds(CLOCK_MONOTONIC_COARSE)
            let reading = clock(realtime: false)
            let after = nanoseconds(CLOCK_MONOTONIC_COARSE)
            return reading >= before && reading <= after ? .coarse : .ahead
        }
    }

    /// The address of `pthread_mutex_lock` as the object sees it (through its import slot).
    func lockFunction() -> UnsafeMutableRawPointer? {
        function("object_lock_function", as: (@convention(c) () -> UnsafeMutableRawPointer?).self)()
    }

    /// The address of `pthread_mutex_unlock` as the object sees it.
    func unlockFunction() -> UnsafeMutableRawPointer? {
        function("object_unlock_function", as: (@convention(c) () -> UnsafeMutableRawPointer?).self)()
    }

    /// Locks a mutex of the object's, then again, then unlocks it: what the second lock
    /// returned (only while redirected: with the C library's lock it would wait for good).
    func lockTwice() -> Int32 {
        function("object_lock_twice", as: (@convention(c) () -> Int32).self)()
    }

    /// Locks and unlocks a mutex of the object's: 0 when both succeed.
    func lockAndUnlock() -> Int32 {
        function("object_lock_and_unlock", as: (@convention(c) () -> Int32).self)()
    }

    func redirect(on: Bool, failAtStep: Int32 = -1) -> Int32 {
        var why = [CChar](repeating: 0, count: 256)
        return livedata_io_test_redirect(path, on ? 1 : 0, failAtStep, &why, why.count)
    }

    private func function<T>(_ name: String, as type: T.Type) -> T {
        guard let symbol = dlsym(handle, name) else { fatalError("\(name) is not in the test object") }
        return unsafeBitCast(symbol, to: type)
    }

    func read(_ fd: Int32, _ length: Int) -> Int {
        var buffer = [UInt8](repeating: 0, count: length)
        let call = function("object_read", as: (@convention(c) (Int32, UnsafeMutableRawPointer?, Int) -> Int).self)
        return call(fd, &buffer, length)
    }

    func write(_ fd: Int32, _ bytes: [UInt8]) -> Int {
        let call = function("object_write", as: (@convention(c) (Int32, UnsafeRawPointer?, Int) -> Int).self)
        return call(fd, bytes, bytes.count)
    }

    func touch() -> Int32 {
        function("object_touch", as: (@convention(c) () -> Int32).self)()
    }

    /// Each page the object is mapped on, with its protection ("r--p", "rw-p", ...).
    func pageProtections() -> [String] {
        // Read to its end: a file of /proc has no size to read by.
        let file = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return [] }
        defer { Glibc.close(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = Glibc.read(file, &chunk, chunk.count)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            bytes += chunk[..<got]
        }
        let maps = String(decoding: bytes, as: UTF8.self)
        let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))
        var pages: [String] = []
        for line in maps.split(separator: "\n") where line.hasSuffix(" " + path) {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let range = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            guard range.count == 2 else { continue }
            for page in stride(from: range[0], to: range[1], by: Int(pageSize)) {
                pages.append(String(page, radix: 16) + " " + fields[1])
            }
        }
        return pages
    }
}

/// A small deterministic generator for the sizes of pieces.
struct LinearCongruential {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(below bound: Int) -> Int {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((state >> 33) % UInt64(bound))
    }
}
#endif
