#ifndef LIVEDATA_CMOSQUITTOIO_H
#define LIVEDATA_CMOSQUITTOIO_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * libmosquitto's imports, redirected.
 *
 * libmosquitto reads a packet in three system calls (its first byte, its length byte by
 * byte, its body) and writes every packet with a call of its own; with each packet it
 * queues, it also writes a byte to a socket pair that only its own `mosquitto_loop` reads;
 * it reads the monotonic clock several times a packet, and takes and lets go of its
 * client's mutexes about a dozen times for each publication and its acknowledgement.
 *
 * `livedata_io_install` points libmosquitto's own import slots (its GOT entries: nothing
 * else in the process, no other library, no call of this program's own) for these seven
 * functions at replacements here. All of them, for every libmosquitto client in the
 * process once installed, whether or not its socket is attached:
 * - `read`: on an attached socket (`livedata_io_attach`), served from a 64 KiB buffer
 *   filled by one system call; any other descriptor goes straight to the C library.
 * - `write`: on an attached socket, collected while the caller collects
 *   (`livedata_io_collect`), to go out in one call on `livedata_io_flush`; on the write end
 *   of a wake-up pair marked while claiming (`livedata_io_claim_pairs`), left out: the owner
 *   of that client never waits in `mosquitto_loop`; anything else, the C library's.
 * - `close`: drops an attached socket's buffers (a buffer kept would serve the next
 *   descriptor with the number) and a wake-up pair's mark, then closes.
 * - `socketpair`: notes the pairs made while claiming, so that the wake-up pair's write end
 *   can be marked.
 * - `clock_gettime` (where imported): CLOCK_MONOTONIC becomes CLOCK_MONOTONIC_COARSE, the
 *   time of the kernel's last tick, a load instead of a read of the processor's counter.
 *   libmosquitto keeps whole seconds of it for its keepalive. Other clocks as asked.
 * - `pthread_mutex_lock`, `pthread_mutex_unlock`: checked instead of taken. Every mutex of
 *   libmosquitto belongs to one client, and this program makes every call into the library
 *   for a client on that client's network thread (or before it starts, or after it ends),
 *   so no lock ever has to wait. The lock writes its thread into the mutex's first word (0
 *   in an unlocked mutex made without attributes, as libmosquitto makes them) when it
 *   finds 0 there, and the unlock writes 0 when it finds its own thread: plain loads and
 *   stores, an acquire and a release, with no locked instruction. When the lock finds
 *   another thread there (two calls into the library for one client at once), or its own,
 *   or the unlock finds anything but its own, the process stops with a message naming the
 *   call, the mutex, the caller in libmosquitto and both threads. Two calls that overlap on
 *   a mutex are caught at the latest when one lets go of it (the one whose write the other
 *   overwrote finds the other's thread). This check runs in every build: a call off the
 *   network thread is a stop with its reason, never a silent data race.
 *
 * The redirection is all or nothing, checked in full before any slot changes (see
 * `livedata_io_install`); off unless the program asks for it, since import slots are no
 * interface of the library.
 */

/// Redirects libmosquitto's imports (above); 0 on success (also when already done), else an
/// errno value, and libmosquitto keeps its own calls: ENOENT when libmosquitto is not loaded
/// as a shared library, ENOTSUP on an architecture without support or with a C library whose
/// fresh mutex does not start with a zero word (the lock check's state), ESRCH when it does
/// not import all of read, write, close and socketpair, EXDEV when it imports another call
/// that would reach its socket around the buffers (recv, send, readv...), ENOEXEC when its
/// tables or import slots are not as expected, or the error of making a slot's page
/// writable. All slots are rewritten, or none. Each page keeps the protection it had.
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

/// Receives the message of a lock check that failed (see `pthread_mutex_lock` above).
typedef void (*livedata_io_lock_violation_handler)(const char *message);
/// With a handler, a failed lock check calls it and returns EDEADLK instead of stopping the
/// process; NULL puts back the stop.
void livedata_io_test_on_lock_violation(livedata_io_lock_violation_handler handler);
/// The replacements of `pthread_mutex_lock` and `pthread_mutex_unlock`.
int livedata_io_test_lock(pthread_mutex_t *mutex);
int livedata_io_test_unlock(pthread_mutex_t *mutex);
/// The calling thread's kernel id, as the lock check's messages give it.
int livedata_io_test_thread_id(void);
/// Names the calling thread (at most 15 bytes), as the lock check's messages show it.
void livedata_io_test_name_thread(const char *name);

/// Runs the checks of `livedata_io_install` on the first loaded object whose path contains
/// `fragment`, changing nothing; 0 or the errno value install would return, and the reason
/// in `why` (`length` bytes).
int livedata_io_test_check(const char *fragment, char *why, size_t length);
/// Redirects (`on` 1) that object's imports as install does libmosquitto's, or points them
/// back at the C library's functions (`on` 0); `failAtStep` >= 0 makes that slot's rewrite
/// fail with EIO (-1: none).
int livedata_io_test_redirect(const char *fragment, int on, int failAtStep, char *why, size_t length);

#endif
