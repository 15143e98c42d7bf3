#define _GNU_SOURCE
#include "CMosquittoIO.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

/* Descriptors at or above this are left to the C library (never buffered). */
enum { DESCRIPTOR_LIMIT = 65536, INPUT_CAPACITY = 64 * 1024, OUTPUT_KEPT = 256 * 1024 };

/* The buffers of one attached socket. Input is read and output collected by the thread
 * that runs the client's network loop, the only thread that makes libmosquitto read or
 * write its socket; `close` runs there too, or after that thread has ended. */
struct connection {
    unsigned char *input;
    size_t inputStart, inputEnd;
    unsigned char *output;
    size_t outputStart, outputEnd, outputCapacity;
    int collecting;
    uint64_t serial; /* which attachment: tests tell a dropped one from a new one */
};

static _Atomic(struct connection *) connections[DESCRIPTOR_LIMIT];
static _Atomic unsigned char unusedWakeWriters[DESCRIPTOR_LIMIT];
static _Thread_local int claimingPairs;
static atomic_int installResult = -1;
static _Atomic uint64_t attachments;

enum { SOCKET_READS, BUFFERED_READS, SOCKET_WRITES, COLLECTED_WRITES, SKIPPED_WAKE_WRITES, COUNTER_COUNT };
static _Atomic uint64_t counters[COUNTER_COUNT];

static inline void count(int counter) {
    atomic_fetch_add_explicit(&counters[counter], 1, memory_order_relaxed);
}

static inline struct connection *attached(int fd) {
    if (fd < 0 || fd >= DESCRIPTOR_LIMIT) return NULL;
    return atomic_load_explicit(&connections[fd], memory_order_acquire);
}

/* Writes `connection`'s collected bytes; see livedata_io_flush. */
static int flush_connection(int fd, struct connection *connection) {
    connection->collecting = 0;
    while (connection->outputStart < connection->outputEnd) {
        ssize_t written = send(fd, connection->output + connection->outputStart,
                               connection->outputEnd - connection->outputStart, MSG_NOSIGNAL);
        count(SOCKET_WRITES);
        if (written > 0) {
            connection->outputStart += (size_t)written;
        } else if (written < 0 && errno == EINTR) {
            continue;
        } else if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 1;
        } else {
            return -1;
        }
    }
    connection->outputStart = connection->outputEnd = 0;
    if (connection->outputCapacity > OUTPUT_KEPT) {
        free(connection->output);
        connection->output = NULL;
        connection->outputCapacity = 0;
    }
    return 0;
}

static void release(struct connection *connection) {
    free(connection->input);
    free(connection->output);
    free(connection);
}

/* MARK: libmosquitto's imports */

static ssize_t buffered_read(int fd, void *buffer, size_t length) {
    struct connection *connection = attached(fd);
    if (!connection || length == 0) return read(fd, buffer, length);
    if (connection->inputStart == connection->inputEnd) {
        count(SOCKET_READS);
        if (length >= INPUT_CAPACITY) return read(fd, buffer, length);
        ssize_t got = read(fd, connection->input, INPUT_CAPACITY);
        if (got <= 0) return got;
        connection->inputStart = 0;
        connection->inputEnd = (size_t)got;
    }
    size_t available = connection->inputEnd - connection->inputStart;
    size_t taken = length < available ? length : available;
    memcpy(buffer, connection->input + connection->inputStart, taken);
    connection->inputStart += taken;
    count(BUFFERED_READS);
    return (ssize_t)taken;
}

static ssize_t buffered_write(int fd, const void *buffer, size_t length) {
    if (fd >= 0 && fd < DESCRIPTOR_LIMIT && atomic_load_explicit(&unusedWakeWriters[fd], memory_order_relaxed)) {
        count(SKIPPED_WAKE_WRITES);
        return (ssize_t)length;
    }
    struct connection *connection = attached(fd);
    if (!connection || (!connection->collecting && connection->outputStart == connection->outputEnd)) {
        if (connection) count(SOCKET_WRITES);
        return write(fd, buffer, length);
    }
    /* Collecting, or earlier bytes still wait: behind them, in order. */
    size_t needed = connection->outputEnd + length;
    if (needed > connection->outputCapacity) {
        if (connection->outputStart > 0) {
            memmove(connection->output, connection->output + connection->outputStart,
                    connection->outputEnd - connection->outputStart);
            connection->outputEnd -= connection->outputStart;
            connection->outputStart = 0;
            needed = connection->outputEnd + length;
        }
        if (needed > connection->outputCapacity) {
            size_t capacity = connection->outputCapacity ? connection->outputCapacity : 16 * 1024;
            while (capacity < needed) capacity *= 2;
            unsigned char *grown = realloc(connection->output, capacity);
            if (!grown) {
                errno = ENOMEM;
                return -1;
            }
            connection->output = grown;
            connection->outputCapacity = capacity;
        }
    }
    memcpy(connection->output + connection->outputEnd, buffer, length);
    connection->outputEnd += length;
    count(COLLECTED_WRITES);
    return (ssize_t)length;
}

/* The wake-up pairs made while claiming, on this thread: marked when claiming ends. */
enum { CLAIMS_KEPT = 4 };
static _Thread_local int claimedWriters[CLAIMS_KEPT];
static _Thread_local int claimedPairs;
static _Thread_local int unexpectedPairs;

static int buffered_close(int fd) {
    if (fd >= 0 && fd < DESCRIPTOR_LIMIT) {
        atomic_store_explicit(&unusedWakeWriters[fd], 0, memory_order_relaxed);
        /* A pair closed while claiming (mosquitto_new failing) is not marked afterwards:
         * the mark would fall on the next descriptor with its number. */
        for (int index = 0; index < claimedPairs && index < CLAIMS_KEPT; index++) {
            if (claimedWriters[index] == fd) claimedWriters[index] = -1;
        }
        struct connection *connection = atomic_exchange_explicit(&connections[fd], NULL, memory_order_acq_rel);
        if (connection) {
            /* What was collected before the close (a DISCONNECT) goes out if the socket takes
             * it at once, and is dropped if it does not: the close never waits. It runs
             * inside libmosquitto, on the network thread or on whichever thread destroys the
             * client, and waiting there for a full socket would hold up a shutdown or a
             * reconnection. A peer that takes nothing is not reading; to the broker, a
             * connection closed without its DISCONNECT is a lost one (it sends the will), as
             * after any wait that gave up. The network loop lets earlier output drain before
             * libmosquitto writes more, so little is left here. */
            while (connection->outputStart < connection->outputEnd) {
                ssize_t written = send(fd, connection->output + connection->outputStart,
                                       connection->outputEnd - connection->outputStart, MSG_NOSIGNAL | MSG_DONTWAIT);
                count(SOCKET_WRITES);
                if (written > 0) {
                    connection->outputStart += (size_t)written;
                } else if (!(written < 0 && errno == EINTR)) {
                    break;
                }
            }
            release(connection);
        }
    }
    return close(fd);
}

static int claiming_socketpair(int domain, int type, int protocol, int descriptors[2]) {
    int result = socketpair(domain, type, protocol, descriptors);
    if (result == 0 && claimingPairs) {
        int kind = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (domain == AF_UNIX && kind == SOCK_STREAM && claimedPairs < CLAIMS_KEPT) {
            /* libmosquitto keeps descriptors[1] as the write end of its wake-up pair. */
            claimedWriters[claimedPairs++] = descriptors[1];
        } else {
            unexpectedPairs++;
        }
    }
    return result;
}

/* libmosquitto reads the monotonic clock for its keepalive bookkeeping (mosquitto_time,
 * which keeps whole seconds) several times for every packet it reads or writes. The coarse
 * clock (the time of the kernel's last tick, a few milliseconds behind) gives the same
 * seconds from a load instead of a read of the processor's counter. Every other clock (the
 * real-time one) is read as asked. */
static int coarse_clock_gettime(clockid_t clock, struct timespec *time) {
    return clock_gettime(clock == CLOCK_MONOTONIC ? CLOCK_MONOTONIC_COARSE : clock, time);
}

/* libmosquitto's locks, checked instead of taken.
 *
 * Each of libmosquitto's mutexes is a field of one client's `struct mosquitto` (its
 * callbacks, state, packets in and out, message lists, ids, clock), and every call into the
 * library for a client is made on that client's network thread, or before that thread starts
 * or after it has ended (the Swift side's ClientCore: publications through its outbox,
 * subscriptions and unsubscriptions through its commands). So no two threads ever hold one
 * at once, and the lock's wait is never needed; what remains is to check that claim.
 *
 * The mutex's first word holds the thread that holds it (0: nobody). The lock reads it and,
 * when nobody holds the mutex, writes this thread into it; the unlock reads it and, when this
 * thread holds the mutex, writes 0. Anything else, another thread holding it, this thread
 * holding it already, or nobody holding it at an unlock, means two calls into the library
 * for one client overlap: the process stops with a message that names both threads and the
 * call (violation()), in every build.
 *
 * Plain loads and stores, no locked instruction (the lock pair's cost is what the check
 * replaces), and still every overlap is caught: if two threads both read 0 and both write,
 * the one whose write was overwritten finds another value at its unlock, since nothing
 * writes its thread back. So two calls that overlap on a mutex stop the process at the
 * latest when one of them lets go of it. The read at the lock is an acquire and the write
 * at the unlock a release, so that, as with a lock, a client passed from thread to thread in
 * turn (made on one, run on its network thread, destroyed on another) sees what the thread
 * before wrote.
 *
 * The word is the C library's own state of an unlocked mutex: libmosquitto makes its mutexes
 * with pthread_mutex_init(&mutex, NULL), whose first word is 0 (install checks that), and
 * apart from lock and unlock hands them only to pthread_mutex_init and _destroy, which see
 * them unlocked. A mutex the C library locked (the lock taken before the redirection, let go
 * after) holds a small lock state rather than a thread: its unlock goes to the C library. */

struct lockHolder {
    pid_t thread; /* its kernel thread id, for the message */
};

/* Initial-exec: this code is linked into the executable, and the lock reads it at every
 * call, where the general model would call __tls_get_addr. */
static _Thread_local struct lockHolder thisThread __attribute__((tls_model("initial-exec")));

static inline uintptr_t holder_token(void) {
    if (__builtin_expect(thisThread.thread == 0, 0)) thisThread.thread = (pid_t)syscall(SYS_gettid);
    return (uintptr_t)&thisThread;
}

static inline uintptr_t *holder_word(pthread_mutex_t *mutex) {
    return (uintptr_t *)(void *)mutex;
}

_Static_assert(sizeof(pthread_mutex_t) >= sizeof(uintptr_t), "a mutex holds a word");
_Static_assert(_Alignof(pthread_mutex_t) >= _Alignof(uintptr_t), "a mutex's first word is aligned");

/* A held word that is no thread of ours: the C library's lock state (1 or 2, in the low half
 * of a little-endian word whose high half, the recursion count, is 0). */
enum { LIBRARY_LOCK_STATES = 4096 };

static _Atomic(livedata_io_lock_violation_handler) violationHandler;

static void thread_name(pid_t thread, char *name, size_t length) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)thread);
    name[0] = 0;
    FILE *file = fopen(path, "re");
    if (file) {
        if (fgets(name, (int)length, file)) name[strcspn(name, "\n")] = 0;
        fclose(file);
    }
    if (!name[0]) snprintf(name, length, "?");
}

/* Two calls into libmosquitto for one client overlap: says which, and stops the process
 * (or, in a test, hands the message to its handler and returns EDEADLK). */
static int violation(const char *call, pthread_mutex_t *mutex, uintptr_t holder, const void *caller) {
    char text[512], ours[32], theirs[32];
    pid_t self = thisThread.thread;
    thread_name(self, ours, sizeof(ours));
    Dl_info where;
    const char *function = "?";
    uintptr_t offset = 0;
    if (dladdr(caller, &where) && where.dli_sname) {
        function = where.dli_sname;
        offset = (uintptr_t)caller - (uintptr_t)where.dli_saddr;
    }
    if (holder == (uintptr_t)&thisThread) {
        snprintf(text, sizeof(text),
                 "livedata: libmosquitto's %s of mutex %p (from %s+0x%lx) on thread %d (%s), which holds it already: "
                 "two calls into libmosquitto for one client overlap on one thread",
                 call, (void *)mutex, function, (unsigned long)offset, (int)self, ours);
    } else if (holder < LIBRARY_LOCK_STATES && holder != 0) {
        snprintf(text, sizeof(text),
                 "livedata: libmosquitto's %s of mutex %p (from %s+0x%lx) on thread %d (%s) while another thread holds "
                 "it through the C library's lock: every call into libmosquitto for a client must be made on its "
                 "network thread",
                 call, (void *)mutex, function, (unsigned long)offset, (int)self, ours);
    } else if (holder == 0) {
        snprintf(text, sizeof(text),
                 "livedata: libmosquitto's %s of mutex %p (from %s+0x%lx) on thread %d (%s), while no thread holds it: "
                 "let go twice, or by another thread than the one that took it",
                 call, (void *)mutex, function, (unsigned long)offset, (int)self, ours);
    } else {
        pid_t other = ((const struct lockHolder *)holder)->thread;
        thread_name(other, theirs, sizeof(theirs));
        snprintf(text, sizeof(text),
                 "livedata: libmosquitto's %s of mutex %p (from %s+0x%lx) on thread %d (%s) while thread %d (%s) holds "
                 "it: every call into libmosquitto for a client must be made on its network thread",
                 call, (void *)mutex, function, (unsigned long)offset, (int)self, ours, (int)other, theirs);
    }
    livedata_io_lock_violation_handler handler = atomic_load(&violationHandler);
    if (handler) {
        handler(text);
        return EDEADLK;
    }
    /* write(2), not stdio: it takes no lock, so a stop never waits for one. */
    size_t length = strlen(text);
    text[length < sizeof(text) - 1 ? length++ : length - 1] = '\n';
    ssize_t written = write(STDERR_FILENO, text, length);
    (void)written;
    abort();
}

static int checked_lock(pthread_mutex_t *mutex) {
    uintptr_t token = holder_token();
    uintptr_t holder = __atomic_load_n(holder_word(mutex), __ATOMIC_ACQUIRE);
    if (__builtin_expect(holder == 0, 1)) {
        __atomic_store_n(holder_word(mutex), token, __ATOMIC_RELAXED);
        return 0;
    }
    return violation("pthread_mutex_lock", mutex, holder, __builtin_return_address(0));
}

static int checked_unlock(pthread_mutex_t *mutex) {
    uintptr_t token = holder_token();
    uintptr_t holder = __atomic_load_n(holder_word(mutex), __ATOMIC_RELAXED);
    if (__builtin_expect(holder == token, 1)) {
        __atomic_store_n(holder_word(mutex), 0, __ATOMIC_RELEASE);
        return 0;
    }
    if (holder != 0 && holder < LIBRARY_LOCK_STATES) return pthread_mutex_unlock(mutex);
    return violation("pthread_mutex_unlock", mutex, holder, __builtin_return_address(0));
}

/* Whether a mutex made as libmosquitto makes its own starts with the word the check reads. */
static int mutex_starts_unheld(void) {
    pthread_mutex_t probe;
    if (pthread_mutex_init(&probe, NULL) != 0) return 0;
    int unheld = *holder_word(&probe) == 0;
    pthread_mutex_destroy(&probe);
    return unheld;
}

/* MARK: Redirecting the imports
 *
 * What this relies on in libmosquitto, checked before anything is changed (any doubt, and
 * nothing is: the caller gets an errno value and keeps the library's own calls):
 * - it is a shared library whose dynamic section has RELA relocation tables, a symbol table
 *   and a string table, all inside its loaded segments;
 * - it imports read, write, close and socketpair, and refers to them only through its
 *   import slots (JUMP_SLOT or GLOB_DAT relocations into a writable segment), each holding
 *   the C library's function or, bound lazily, a stub in its own code;
 * - it imports no other call that reads, writes or duplicates a descriptor (recv, send,
 *   readv, a fortified __read_chk, dup...): one would reach its socket around the buffers
 *   and reorder its bytes;
 * - one socket pair made in mosquitto_new, the wake-up pair (see livedata_io_claim_pairs).
 * Its clock_gettime import, where it has one, is redirected with the rest (coarse_clock_gettime),
 * and so are its pthread_mutex_lock and pthread_mutex_unlock (checked_lock, checked_unlock),
 * once a mutex made as libmosquitto makes its own is seen to start with a zero word.
 * Then every slot is rewritten, or none: a failed step puts back the slots already done. */

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOBAL_DATA R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOBAL_DATA R_AARCH64_GLOB_DAT
#endif

enum { FAILURE_TEXT = 160 };
/* Rewrite the slots, put back the C library's functions, or only check. */
enum mode { REDIRECT, PUT_BACK, CHECK };

#ifdef JUMP_SLOT
/* The first REQUIRED_COUNT must all be imported; the others are redirected where they are. */
enum { REDIRECTION_COUNT = 7, REQUIRED_COUNT = 4, MAXIMUM_SLOTS = 16, MAXIMUM_SEGMENTS = 16 };

static const char *const redirectedNames[REDIRECTION_COUNT] = {
    "read", "write", "close", "socketpair", "clock_gettime", "pthread_mutex_lock", "pthread_mutex_unlock",
};

static void *replacement(int which) {
    switch (which) {
    case 0: return (void *)buffered_read;
    case 1: return (void *)buffered_write;
    case 2: return (void *)buffered_close;
    case 3: return (void *)claiming_socketpair;
    case 4: return (void *)coarse_clock_gettime;
    case 5: return (void *)checked_lock;
    default: return (void *)checked_unlock;
    }
}

/* The C library's function, as the dynamic linker binds it for this code and (an
 * interposer included) for libmosquitto. */
static void *original(int which) {
    switch (which) {
    case 0: return (void *)read;
    case 1: return (void *)write;
    case 2: return (void *)close;
    case 3: return (void *)socketpair;
    case 4: return (void *)clock_gettime;
    case 5: return (void *)pthread_mutex_lock;
    default: return (void *)pthread_mutex_unlock;
    }
}

static const char *const bypassingNames[] = {
    "recv", "recvfrom", "recvmsg", "recvmmsg", "readv", "preadv", "preadv2", "__read_chk", "__recv_chk",
    "__recvfrom_chk", "send", "sendto", "sendmsg", "sendmmsg", "writev", "pwritev", "pwritev2", "sendfile",
    "splice", "dup", "dup2", "dup3",
};

struct segment {
    uintptr_t start, end;
    ElfW(Word) flags;
};

/* A loaded object, as dl_iterate_phdr describes it. */
struct object {
    const char *fragment; /* what its path must contain */
    const char *name;
    uintptr_t base;
    const ElfW(Dyn) *dynamic;
    struct segment segments[MAXIMUM_SEGMENTS];
    int segmentCount;
    int found;
};

struct slot {
    void **address;
    int which;
    void *value; /* what it held before */
};

struct plan {
    struct slot slots[MAXIMUM_SLOTS];
    int count;
    char *why; /* FAILURE_TEXT bytes */
};

static int fail(struct plan *plan, int code, const char *format, const char *detail) {
    snprintf(plan->why, FAILURE_TEXT, format, detail);
    return code;
}

static int describe_object(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    struct object *object = context;
    if (!info->dlpi_name || !strstr(info->dlpi_name, object->fragment)) return 0;
    object->found = 1;
    object->name = info->dlpi_name;
    object->base = info->dlpi_addr;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type == PT_DYNAMIC) object->dynamic = (const ElfW(Dyn) *)(object->base + header->p_vaddr);
        if (header->p_type == PT_LOAD && object->segmentCount < MAXIMUM_SEGMENTS) {
            struct segment *segment = &object->segments[object->segmentCount++];
            segment->start = object->base + header->p_vaddr;
            segment->end = segment->start + header->p_memsz;
            segment->flags = header->p_flags;
        }
    }
    return 1;
}

/* Whether [address, address + length) lies in one loaded segment with at least `flags`. */
static int inside(const struct object *object, const void *address, size_t length, ElfW(Word) flags) {
    uintptr_t start = (uintptr_t)address;
    for (int index = 0; index < object->segmentCount; index++) {
        const struct segment *segment = &object->segments[index];
        if ((segment->flags & flags) == flags && start >= segment->start && start <= segment->end &&
            length <= segment->end - start) {
            return 1;
        }
    }
    return 0;
}

/* An address in the dynamic section: glibc has already added the load address to it,
 * other loaders may not have. Either way `inside` checks the result before it is read. */
static uintptr_t dynamic_address(uintptr_t base, ElfW(Addr) value) {
    return value < base ? base + value : value;
}

struct tables {
    const ElfW(Sym) *symbols;
    const char *names;
    size_t namesSize;
};

static int is_one_of(const char *name, const char *const *list, size_t count) {
    for (size_t index = 0; index < count; index++) {
        if (strcmp(name, list[index]) == 0) return 1;
    }
    return 0;
}

static int scan_relocations(const struct object *object, const struct tables *tables, const ElfW(Rela) *table,
                            size_t size, struct plan *plan) {
    if (!table || size == 0) return 0;
    if (size % sizeof(ElfW(Rela)) != 0 || !inside(object, table, size, PF_R)) {
        return fail(plan, ENOEXEC, "%s's relocation table is not where its dynamic section says", "libmosquitto");
    }
    for (size_t index = 0; index < size / sizeof(ElfW(Rela)); index++) {
        const ElfW(Rela) *relocation = &table[index];
        size_t symbolIndex = ELF64_R_SYM(relocation->r_info);
        if (symbolIndex == 0) continue;
        const ElfW(Sym) *symbol = &tables->symbols[symbolIndex];
        if (!inside(object, symbol, sizeof(*symbol), PF_R) || symbol->st_name >= tables->namesSize ||
            strnlen(tables->names + symbol->st_name, tables->namesSize - symbol->st_name) ==
                tables->namesSize - symbol->st_name) {
            return fail(plan, ENOEXEC, "%s's symbol table is not where its dynamic section says", "libmosquitto");
        }
        const char *name = tables->names + symbol->st_name;
        int which = -1;
        for (int candidate = 0; candidate < REDIRECTION_COUNT; candidate++) {
            if (strcmp(name, redirectedNames[candidate]) == 0) which = candidate;
        }
        if (which < 0) {
            if (is_one_of(name, bypassingNames, sizeof(bypassingNames) / sizeof(bypassingNames[0]))) {
                return fail(plan, EXDEV, "libmosquitto imports %s, which would reach its socket around the buffers",
                            name);
            }
            continue;
        }
        unsigned long type = ELF64_R_TYPE(relocation->r_info);
        void **address = (void **)(object->base + relocation->r_offset);
        if ((type != JUMP_SLOT && type != GLOBAL_DATA) || symbol->st_shndx != SHN_UNDEF || relocation->r_addend != 0) {
            return fail(plan, ENOEXEC, "libmosquitto refers to %s other than through an import slot", name);
        }
        if ((uintptr_t)address % sizeof(void *) != 0 || !inside(object, address, sizeof(void *), PF_R | PF_W)) {
            return fail(plan, ENOEXEC, "libmosquitto's import slot for %s is outside its writable segments", name);
        }
        if (plan->count == MAXIMUM_SLOTS) {
            return fail(plan, ENOEXEC, "libmosquitto has more import slots for %s than expected", name);
        }
        void *value = __atomic_load_n(address, __ATOMIC_ACQUIRE);
        /* Bound: the C library's function; bound lazily: a stub in the library's own code. */
        if (value != original(which) && value != replacement(which) && !inside(object, value, 1, PF_X)) {
            return fail(plan, ENOEXEC, "libmosquitto's import slot for %s holds an unexpected address", name);
        }
        plan->slots[plan->count++] = (struct slot){address, which, value};
    }
    return 0;
}

/* Finds every import slot to rewrite in `object`, and checks it is as expected. */
static int find_slots(const struct object *object, struct plan *plan) {
    const ElfW(Dyn) *dynamic = object->dynamic;
    if (!dynamic || !inside(object, dynamic, sizeof(*dynamic), PF_R)) {
        return fail(plan, ENOEXEC, "%s has no dynamic section", "libmosquitto");
    }
    struct tables tables = {NULL, NULL, 0};
    const ElfW(Rela) *plt = NULL, *data = NULL;
    size_t pltSize = 0, dataSize = 0;
    int pltIsRela = 1, entrySizes = 1, plainRel = 0;
    for (const ElfW(Dyn) *entry = dynamic; entry->d_tag != DT_NULL; entry++) {
        if (!inside(object, entry + 1, sizeof(*entry), PF_R)) {
            return fail(plan, ENOEXEC, "%s's dynamic section has no end", "libmosquitto");
        }
        switch (entry->d_tag) {
        case DT_SYMTAB: tables.symbols = (const ElfW(Sym) *)dynamic_address(object->base, entry->d_un.d_ptr); break;
        case DT_STRTAB: tables.names = (const char *)dynamic_address(object->base, entry->d_un.d_ptr); break;
        case DT_STRSZ: tables.namesSize = entry->d_un.d_val; break;
        case DT_SYMENT: entrySizes &= entry->d_un.d_val == sizeof(ElfW(Sym)); break;
        case DT_JMPREL: plt = (const ElfW(Rela) *)dynamic_address(object->base, entry->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltSize = entry->d_un.d_val; break;
        case DT_PLTREL: pltIsRela = entry->d_un.d_val == DT_RELA; break;
        case DT_RELA: data = (const ElfW(Rela) *)dynamic_address(object->base, entry->d_un.d_ptr); break;
        case DT_RELASZ: dataSize = entry->d_un.d_val; break;
        case DT_RELAENT: entrySizes &= entry->d_un.d_val == sizeof(ElfW(Rela)); break;
        case DT_REL:
        case DT_RELSZ: plainRel = 1; break;
        }
    }
    if (!tables.symbols || !tables.names || tables.namesSize == 0 || !pltIsRela || !entrySizes || plainRel ||
        !inside(object, tables.names, tables.namesSize, PF_R)) {
        return fail(plan, ENOEXEC, "%s's symbol and relocation tables are not in the expected form", "libmosquitto");
    }
    int failure = scan_relocations(object, &tables, plt, pltSize, plan);
    if (!failure) failure = scan_relocations(object, &tables, data, dataSize, plan);
    if (failure) return failure;
    for (int which = 0; which < REQUIRED_COUNT; which++) {
        int imported = 0;
        for (int index = 0; index < plan->count; index++) imported |= plan->slots[index].which == which;
        /* Buffering needs all four: a buffer not dropped on close would serve a reused descriptor. */
        if (!imported) return fail(plan, ESRCH, "libmosquitto does not import %s", redirectedNames[which]);
    }
    return 0;
}

/* The protection of the page at `page` now, from the kernel's list of this process's
 * mappings: the loader may have left it writable (a page that RELRO shares with data,
 * pages larger than the linker assumed) or made it read-only, and either must stay so. */
static int page_protection(uintptr_t page, int *protection) {
    FILE *maps = fopen("/proc/self/maps", "re");
    if (!maps) return errno ? errno : EACCES;
    char *line = NULL;
    size_t capacity = 0;
    int failure = ENOENT;
    while (getline(&line, &capacity, maps) > 0) {
        unsigned long start, end;
        char permissions[5];
        if (sscanf(line, "%lx-%lx %4s", &start, &end, permissions) != 3) continue;
        if (page < start || page >= end) continue;
        *protection = (permissions[0] == 'r' ? PROT_READ : 0) | (permissions[1] == 'w' ? PROT_WRITE : 0) |
                      (permissions[2] == 'x' ? PROT_EXEC : 0);
        failure = 0;
        break;
    }
    free(line);
    fclose(maps);
    return failure;
}

/* Stores `value` in `slot`, its page made writable for the store if it was not, then given
 * back its own protection; on failure the slot keeps what it held. */
static int store_slot(void **slot, void *value) {
    long pageSize = sysconf(_SC_PAGESIZE);
    if (pageSize <= 0) return EINVAL;
    uintptr_t page = (uintptr_t)slot & ~((uintptr_t)pageSize - 1);
    int protection;
    int failure = page_protection(page, &protection);
    if (failure) return failure;
    if (protection & PROT_WRITE) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return 0;
    }
    /* Only ever adds write access for a moment: another thread using the page meanwhile
     * loses nothing it had. */
    if (mprotect((void *)page, (size_t)pageSize, protection | PROT_WRITE) != 0) return errno;
    void *before = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (mprotect((void *)page, (size_t)pageSize, protection) != 0) {
        failure = errno;
        __atomic_store_n(slot, before, __ATOMIC_RELEASE);
        return failure;
    }
    return 0;
}

/* Rewrites every slot of `plan` (to the replacements, or back to the C library's
 * functions), or none. `failAtStep` (tests) makes that step fail as a store would. */
static int apply(struct plan *plan, int redirecting, int failAtStep) {
    for (int step = 0; step < plan->count; step++) {
        struct slot *slot = &plan->slots[step];
        void *value = redirecting ? replacement(slot->which) : original(slot->which);
        int failure = step == failAtStep ? EIO : store_slot(slot->address, value);
        if (failure) {
            for (int done = step - 1; done >= 0; done--) store_slot(plan->slots[done].address, plan->slots[done].value);
            snprintf(plan->why, FAILURE_TEXT, "cannot rewrite libmosquitto's import slot for %s: %s",
                     redirectedNames[slot->which], strerror(failure));
            return failure;
        }
    }
    return 0;
}

static int redirect(const char *fragment, enum mode mode, int failAtStep, char *why) {
    why[0] = 0;
    struct object object;
    memset(&object, 0, sizeof(object));
    object.fragment = fragment;
    dl_iterate_phdr(describe_object, &object);
    if (!object.found) {
        snprintf(why, FAILURE_TEXT, "libmosquitto is not loaded as a shared library");
        return ENOENT;
    }
    struct plan plan;
    memset(&plan, 0, sizeof(plan));
    plan.why = why;
    int failure = find_slots(&object, &plan);
    return failure || mode == CHECK ? failure : apply(&plan, mode == REDIRECT, failAtStep);
}
#else
static int redirect(const char *fragment, enum mode mode, int failAtStep, char *why) {
    (void)fragment, (void)mode, (void)failAtStep;
    snprintf(why, FAILURE_TEXT, "no support for this processor architecture");
    return ENOTSUP;
}
#endif

static pthread_once_t installOnce = PTHREAD_ONCE_INIT;
static char installFailure[FAILURE_TEXT];

static void install_once(void) {
    if (!mutex_starts_unheld()) {
        snprintf(installFailure, FAILURE_TEXT, "this C library's mutexes do not start with a zero word");
        atomic_store(&installResult, ENOTSUP);
        return;
    }
    atomic_store(&installResult, redirect("/libmosquitto.so", REDIRECT, -1, installFailure));
}

/* MARK: The interface */

int livedata_io_install(void) {
    pthread_once(&installOnce, install_once);
    return atomic_load(&installResult);
}

const char *livedata_io_install_failure(void) {
    return atomic_load(&installResult) > 0 ? installFailure : "";
}

int livedata_io_claim_pairs(int on) {
    if (on) {
        claimingPairs = 1;
        claimedPairs = unexpectedPairs = 0;
        return 0;
    }
    claimingPairs = 0;
    /* Marked only when it is the one pair libmosquitto is known to make: in a library that
     * made more, or other kinds, a pair left out might be one it needs. */
    int pairs = claimedPairs, others = unexpectedPairs, writer = claimedWriters[0];
    claimedPairs = unexpectedPairs = 0;
    if (pairs != 1 || others != 0 || writer < 0 || writer >= DESCRIPTOR_LIMIT) return 0;
    atomic_store_explicit(&unusedWakeWriters[writer], 1, memory_order_relaxed);
    return 1;
}

static int attach_connection(int fd) {
    if (fd < 0 || fd >= DESCRIPTOR_LIMIT) return EBADF;
    struct connection *connection = calloc(1, sizeof(struct connection));
    if (!connection) return ENOMEM;
    connection->input = malloc(INPUT_CAPACITY);
    if (!connection->input) {
        free(connection);
        return ENOMEM;
    }
    connection->serial = atomic_fetch_add_explicit(&attachments, 1, memory_order_relaxed) + 1;
    struct connection *earlier = atomic_exchange_explicit(&connections[fd], connection, memory_order_acq_rel);
    if (earlier) release(earlier);
    return 0;
}

int livedata_io_attach(int fd) {
    /* Without the redirected close, nothing would drop the buffers with the descriptor. */
    if (atomic_load(&installResult) != 0) return ENOTSUP;
    return attach_connection(fd);
}

size_t livedata_io_buffered_input(int fd) {
    struct connection *connection = attached(fd);
    return connection ? connection->inputEnd - connection->inputStart : 0;
}

void livedata_io_collect(int fd) {
    struct connection *connection = attached(fd);
    if (connection) connection->collecting = 1;
}

int livedata_io_flush(int fd) {
    struct connection *connection = attached(fd);
    return connection ? flush_connection(fd, connection) : 0;
}

size_t livedata_io_pending_output(int fd) {
    struct connection *connection = attached(fd);
    return connection ? connection->outputEnd - connection->outputStart : 0;
}

livedata_io_counters livedata_io_counters_read(void) {
    livedata_io_counters result = {
        atomic_load_explicit(&counters[SOCKET_READS], memory_order_relaxed),
        atomic_load_explicit(&counters[BUFFERED_READS], memory_order_relaxed),
        atomic_load_explicit(&counters[SOCKET_WRITES], memory_order_relaxed),
        atomic_load_explicit(&counters[COLLECTED_WRITES], memory_order_relaxed),
        atomic_load_explicit(&counters[SKIPPED_WAKE_WRITES], memory_order_relaxed),
    };
    return result;
}

/* MARK: For tests */

int livedata_io_test_attach(int fd) {
    return attach_connection(fd);
}

uint64_t livedata_io_test_attachment(int fd) {
    struct connection *connection = attached(fd);
    return connection ? connection->serial : 0;
}

ssize_t livedata_io_test_read(int fd, void *buffer, size_t length) {
    return buffered_read(fd, buffer, length);
}

ssize_t livedata_io_test_write(int fd, const void *buffer, size_t length) {
    return buffered_write(fd, buffer, length);
}

int livedata_io_test_close(int fd) {
    return buffered_close(fd);
}

int livedata_io_test_socketpair(int domain, int type, int protocol, int descriptors[2]) {
    return claiming_socketpair(domain, type, protocol, descriptors);
}

int livedata_io_test_unused_wake_writer(int fd) {
    return fd >= 0 && fd < DESCRIPTOR_LIMIT && atomic_load_explicit(&unusedWakeWriters[fd], memory_order_relaxed);
}

static int test_redirect(const char *fragment, enum mode mode, int failAtStep, char *why, size_t length) {
    char text[FAILURE_TEXT];
    int result = redirect(fragment, mode, failAtStep, text);
    if (why && length > 0) snprintf(why, length, "%s", text);
    return result;
}

void *livedata_io_test_replacement(const char *name) {
#ifdef JUMP_SLOT
    for (int which = 0; which < REDIRECTION_COUNT; which++) {
        if (strcmp(name, redirectedNames[which]) == 0) return replacement(which);
    }
#else
    (void)name;
#endif
    return NULL;
}

void livedata_io_test_on_lock_violation(livedata_io_lock_violation_handler handler) {
    atomic_store(&violationHandler, handler);
}

int livedata_io_test_lock(pthread_mutex_t *mutex) {
    return checked_lock(mutex);
}

int livedata_io_test_unlock(pthread_mutex_t *mutex) {
    return checked_unlock(mutex);
}

int livedata_io_test_thread_id(void) {
    holder_token();
    return (int)thisThread.thread;
}

void livedata_io_test_name_thread(const char *name) {
    pthread_setname_np(pthread_self(), name);
}

int livedata_io_test_check(const char *fragment, char *why, size_t length) {
    return test_redirect(fragment, CHECK, -1, why, length);
}

int livedata_io_test_redirect(const char *fragment, int on, int failAtStep, char *why, size_t length) {
    return test_redirect(fragment, on ? REDIRECT : PUT_BACK, failAtStep, why, length);
}
