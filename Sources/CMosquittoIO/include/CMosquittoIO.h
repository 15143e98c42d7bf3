#ifndef LIVEDATA_CMOSQUITTOIO_H
#define LIVEDATA_CMOSQUITTOIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Buffered socket I/O under libmosquitto.
 *
 * libmosquitto reads a packet in three system calls (its first byte, its length byte by
 * byte, its body) and writes every packet with a call of its own; with each packet it
 * queues, it also writes a byte to a socket pair that only its own `mosquitto_loop` reads.
 * At tens of thousands of packets a second those calls are most of a client's CPU.
 *
 * `livedata_io_install` points libmosquitto's imports of `read`, `write`, `close`,
 * `socketpair` and, where it has one, `clock_gettime` (its GOT entries, nothing else in the
 * process) at functions here:
 * - on an attached socket, `read` is served from a 64 KiB buffer filled by one system call,
 *   and `write` is collected while the caller collects, to go out in one call on flush;
 * - the write end of a socket pair made while claiming (see `livedata_io_claim_pairs`) is
 *   never written: the owner of that client never waits in `mosquitto_loop`;
 * - its monotonic clock is the coarse one (the time of the kernel's last tick): libmosquitto
 *   keeps whole seconds of it for its keepalive, and reads it several times a packet;
 * - every other descriptor, and every other library, goes straight to the C library.
 */

/// Redirects libmosquitto's socket calls; 0 on success (also when already done), else an
/// errno value, and libmosquitto keeps its own calls: ENOENT when libmosquitto is not loaded
/// as a shared library, ENOTSUP on an architecture without support, ESRCH when it does not
/// import all four calls, EXDEV when it imports another call that would reach its socket
/// around the buffers (recv, send, readv...), ENOEXEC when its tables or import slots are
/// not as expected, or the error of making a slot's page writable. All slots are
/// rewritten, or none. Each page keeps the protection it had.
int livedata_io_install(void);

/// Why `livedata_io_install` failed, a sentence for the log; "" when it did not.
const char *livedata_io_install_failure(void);

/// While on (this thread only), the socket pairs that libmosquitto makes are noted; when
/// turned off, the write end of the one pair made meanwhile is marked as an unused wake-up
/// pair and 1 returned (0, and nothing marked, when there was not exactly one). Set around
/// `mosquitto_new` by a client that never calls `mosquitto_loop`, `mosquitto_loop_forever`
/// or `mosquitto_loop_start`.
int livedata_io_claim_pairs(int on);

/// Gives the connected socket `fd` an input buffer and output collection; 0 or an errno value
/// (ENOTSUP unless `livedata_io_install` succeeded). Undone when libmosquitto closes the
/// descriptor: what was collected goes out if the socket takes it at once, else is dropped.
int livedata_io_attach(int fd);

/// Bytes read from `fd` that libmosquitto has not taken yet (invisible to `poll`).
size_t livedata_io_buffered_input(int fd);

/// From now until `livedata_io_flush`, libmosquitto's writes to `fd` are collected.
void livedata_io_collect(int fd);

/// Writes what was collected for `fd`: 0 when all is out, 1 when some waits for the socket
/// to take more (poll for POLLOUT), -1 with errno set when the socket failed.
int livedata_io_flush(int fd);

/// Collected bytes not yet written to `fd`.
size_t livedata_io_pending_output(int fd);

/// Counts since the process started, for tests and diagnostics.
typedef struct {
    uint64_t socketReads;       /* read(2) calls on attached sockets */
    uint64_t bufferedReads;     /* libmosquitto reads served from a buffer */
    uint64_t socketWrites;      /* write calls on attached sockets (flushes and direct writes) */
    uint64_t collectedWrites;   /* libmosquitto writes collected for a flush */
    uint64_t skippedWakeWrites; /* writes to an unused wake-up pair left out */
} livedata_io_counters;

livedata_io_counters livedata_io_counters_read(void);

/*
 * For tests only: the daemon never calls these. They reach the replacement calls without
 * libmosquitto, and run the redirection on any loaded shared object.
 */

/// `livedata_io_attach` without its check that the redirection is in place.
int livedata_io_test_attach(int fd);
/// A number for `fd`'s attachment, new with each; 0 when not attached.
uint64_t livedata_io_test_attachment(int fd);
/// The replacements of `read`, `write`, `close` and `socketpair`.
ssize_t livedata_io_test_read(int fd, void *buffer, size_t length);
ssize_t livedata_io_test_write(int fd, const void *buffer, size_t length);
int livedata_io_test_close(int fd);
int livedata_io_test_socketpair(int domain, int type, int protocol, int descriptors[2]);
/// 1 when writes to `fd` are left out (an unused wake-up pair's write end).
int livedata_io_test_unused_wake_writer(int fd);
/// What an import named `name` is redirected to (NULL for one that is not redirected).
void *livedata_io_test_replacement(const char *name);

/// Runs the checks of `livedata_io_install` on the first loaded object whose path contains
/// `fragment`, changing nothing; 0 or the errno value install would return, and the reason
/// in `why` (`length` bytes).
int livedata_io_test_check(const char *fragment, char *why, size_t length);
/// Redirects (`on` 1) that object's imports as install does libmosquitto's, or points them
/// back at the C library's functions (`on` 0); `failAtStep` >= 0 makes that slot's rewrite
/// fail with EIO (-1: none).
int livedata_io_test_redirect(const char *fragment, int on, int failAtStep, char *why, size_t length);

#endif
