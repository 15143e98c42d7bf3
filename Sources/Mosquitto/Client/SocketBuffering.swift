import CMosquittoIO

#if canImport(Glibc)
import Glibc
#endif

/// libmosquitto's socket calls through user-space buffers, its clock and its locks made
/// cheaper: everything the `bufferedSocket` setting turns on.
///
/// libmosquitto reads a packet in three system calls (its first byte, its length byte by
/// byte, its body), writes each packet with a call of its own, with every packet it
/// queues writes a byte to a wake-up socket pair that only `mosquitto_loop` reads, reads
/// the monotonic clock several times a packet and takes and lets go of its client's
/// mutexes about a dozen times for each publication and its acknowledgement. A client that
/// receives tens of thousands of packets a second spends most of its CPU there. CMosquittoIO
/// points libmosquitto's imports of seven functions (its own entries in its import table;
/// nothing else in the process) at replacements, for every libmosquitto client in the
/// process once it is in place:
/// - `read`: a client's socket is read through a 64 KiB buffer filled by one `read(2)`;
/// - `write`: the writes of a pass's write step are collected and sent in one call at its
///   end; the writes to the wake-up pair of a client made here are left out: this client's
///   network loop never waits in `mosquitto_loop`, and wakes through its own eventfd;
/// - `close` drops a socket's buffers with it, and `socketpair` notes the wake-up pair;
/// - `clock_gettime`, where imported: the coarse monotonic clock (the time of the kernel's
///   last tick), as libmosquitto keeps whole seconds of it for its keepalive;
/// - `pthread_mutex_lock` and `_unlock`: checked instead of taken. Each of libmosquitto's
///   mutexes guards one client's state, and every call into the library for a client is
///   made on that client's network thread (publications through its ``Outbox``,
///   subscriptions and unsubscriptions through its commands), or before that thread starts
///   or after it ends, so a lock never has to wait. The replacement writes its thread into
///   the mutex with plain loads and stores (no locked instruction), and stops the process,
///   naming the call and both threads, when two calls overlap on a mutex: in every build,
///   a call off the network thread is a stop with its reason, never a silent data race.
///   That rule binds every libmosquitto client in the process, buffered or not.
///
/// Every other descriptor goes straight to the C library, and so does everything when
/// the redirection cannot be made: libmosquitto linked statically, an unknown architecture,
/// or a libmosquitto whose imports are not as expected (one that imports `recv` or `send`,
/// say, which would reach the socket around the buffers). The redirection is checked in
/// full before anything is changed, and made for all its calls or none; the client then
/// works as before, with a call per step. Off unless asked for (`bufferedSocket`): it
/// reaches into libmosquitto's import table, which the library does not offer as an
/// interface.
public enum MQTTSocketBuffering {
    /// Made once per process, when the first client that asks for buffering is created:
    /// `nil` when it is in place, else why not.
    public static let unavailableReason: String? = {
        // Its own set-up first: it seeds its random numbers from the clock as asked.
        LibMosquitto.initialized
        let code = livedata_io_install()
        guard code != 0 else { return nil }
        let reason = String(cString: livedata_io_install_failure())
        return reason.isEmpty ? String(cString: strerror(code)) : reason
    }()

    /// What the buffers did since the process started.
    public struct Statistics: Sendable, Equatable {
        /// `read(2)` calls on buffered sockets.
        public var socketReads: UInt64
        /// libmosquitto's reads served from a buffer.
        public var bufferedReads: UInt64
        /// Calls that wrote to a buffered socket.
        public var socketWrites: UInt64
        /// libmosquitto's writes collected for a pass's single write.
        public var collectedWrites: UInt64
        /// Writes to an unused wake-up pair left out.
        public var skippedWakeWrites: UInt64
    }

    public static var statistics: Statistics {
        let counters = livedata_io_counters_read()
        return Statistics(
            socketReads: counters.socketReads, bufferedReads: counters.bufferedReads,
            socketWrites: counters.socketWrites, collectedWrites: counters.collectedWrites,
            skippedWakeWrites: counters.skippedWakeWrites)
    }
}
