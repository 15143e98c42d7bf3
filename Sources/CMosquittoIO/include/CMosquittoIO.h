#ifndef LIVEDATA_CMOSQUITTOIO_H
#define LIVEDATA_CMOSQUITTOIO_H

#include <stddef.h>
#include <stdint.h>

/*
 * Buffered socket I/O under libmosquitto.
 *
 * libmosquitto reads a packet in three system calls (its first byte, its length byte by
 * byte, its body) and writes every packet with a call of its own; with each packet it
 * queues, it also writes a byte to a socket pair that only its own `mosquitto_loop` reads.
 * At tens of thousands of packets a second those calls are most of a client's CPU.
 *
 * `livedata_io_install` points libmosquitto's imports of `read`, `write`, `close` and
 * `socketpair` (its GOT entries, nothing else in the process) at functions here:
 * - on an attached socket, `read` is served from a 64 KiB buffer filled by one system call,
 *   and `write` is collected while the caller collects, to go out in one call on flush;
 * - the write end of a socket pair made while claiming (see `livedata_io_claim_pairs`) is
 *   never written: the owner of that client never waits in `mosquitto_loop`;
 * - every other descriptor, and every other library, goes straight to the C library.
 */

/// Redirects libmosquitto's socket calls; 0 on success (also when already done), else an
/// errno value: ENOENT when libmosquitto is not loaded as a shared library, ENOTSUP on an
/// architecture without support, ESRCH when its imports are not found.
int livedata_io_install(void);

/// While on (this thread only), the socket pairs that libmosquitto makes are marked as
/// unused wake-up pairs: set around `mosquitto_new` by a client that never calls
/// `mosquitto_loop`, `mosquitto_loop_forever` or `mosquitto_loop_start`.
void livedata_io_claim_pairs(int on);

/// Gives the connected socket `fd` an input buffer and output collection; 0 or an errno value.
/// Undone when libmosquitto closes the descriptor.
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

#endif
