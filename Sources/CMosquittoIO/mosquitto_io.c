#define _GNU_SOURCE
#include "CMosquittoIO.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
};

static _Atomic(struct connection *) connections[DESCRIPTOR_LIMIT];
static _Atomic unsigned char unusedWakeWriters[DESCRIPTOR_LIMIT];
static _Thread_local int claimingPairs;
static atomic_int installResult = -1;

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

static int buffered_close(int fd) {
    if (fd >= 0 && fd < DESCRIPTOR_LIMIT) {
        atomic_store_explicit(&unusedWakeWriters[fd], 0, memory_order_relaxed);
        struct connection *connection = atomic_exchange_explicit(&connections[fd], NULL, memory_order_acq_rel);
        if (connection) {
            /* What was collected before the close (a DISCONNECT) still goes out: wait for
             * the socket a little while if it is full, never when it has failed. */
            for (int waits = 0; flush_connection(fd, connection) == 1 && waits < 20; waits++) {
                struct pollfd ready = {.fd = fd, .events = POLLOUT};
                if (poll(&ready, 1, 100) < 0 && errno != EINTR) break;
            }
            release(connection);
        }
    }
    return close(fd);
}

static int claiming_socketpair(int domain, int type, int protocol, int descriptors[2]) {
    int result = socketpair(domain, type, protocol, descriptors);
    /* libmosquitto keeps descriptors[1] as the write end of its wake-up pair. */
    if (result == 0 && claimingPairs && descriptors[1] >= 0 && descriptors[1] < DESCRIPTOR_LIMIT) {
        atomic_store_explicit(&unusedWakeWriters[descriptors[1]], 1, memory_order_relaxed);
    }
    return result;
}

/* MARK: Redirecting the imports */

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOBAL_DATA R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOBAL_DATA R_AARCH64_GLOB_DAT
#endif

#ifdef JUMP_SLOT
static const struct {
    const char *name;
    void *replacement;
} redirections[] = {
    {"read", (void *)buffered_read},
    {"write", (void *)buffered_write},
    {"close", (void *)buffered_close},
    {"socketpair", (void *)claiming_socketpair},
};
enum { REDIRECTION_COUNT = sizeof(redirections) / sizeof(redirections[0]) };

struct search {
    int found;    /* libmosquitto was found */
    int patched;  /* bit per redirection, set when at least one slot was rewritten */
    int failure;  /* an errno value from mprotect */
};

/* An address in the dynamic section: glibc has already added the load address to it,
 * other loaders may not have. */
static uintptr_t dynamic_address(uintptr_t base, ElfW(Addr) value) {
    return value < base ? base + value : value;
}

static int rewrite_slot(void **slot, void *replacement, uintptr_t relroStart, uintptr_t relroEnd) {
    uintptr_t address = (uintptr_t)slot;
    int inRelro = address >= relroStart && address < relroEnd;
    if (inRelro) {
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        void *start = (void *)(address & ~(page - 1));
        if (mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return errno;
        __atomic_store_n(slot, replacement, __ATOMIC_RELEASE);
        mprotect(start, page, PROT_READ);
    } else {
        __atomic_store_n(slot, replacement, __ATOMIC_RELEASE);
    }
    return 0;
}

static void rewrite_table(struct search *search, uintptr_t base, const ElfW(Rela) *table, size_t size,
                          const ElfW(Sym) *symbols, const char *names, uintptr_t relroStart, uintptr_t relroEnd) {
    if (!table) return;
    for (size_t index = 0; index < size / sizeof(ElfW(Rela)); index++) {
        const ElfW(Rela) *relocation = &table[index];
        unsigned long type = ELF64_R_TYPE(relocation->r_info);
        if (type != JUMP_SLOT && type != GLOBAL_DATA) continue;
        const char *name = names + symbols[ELF64_R_SYM(relocation->r_info)].st_name;
        for (int which = 0; which < REDIRECTION_COUNT; which++) {
            if (strcmp(name, redirections[which].name) != 0) continue;
            int failure = rewrite_slot((void **)(base + relocation->r_offset), redirections[which].replacement,
                                       relroStart, relroEnd);
            if (failure) {
                search->failure = failure;
            } else {
                search->patched |= 1 << which;
            }
        }
    }
}

static int redirect_in(struct dl_phdr_info *info, size_t size, void *context) {
    (void)size;
    struct search *search = context;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "/libmosquitto.so")) return 0;
    search->found = 1;
    uintptr_t base = info->dlpi_addr;
    const ElfW(Dyn) *dynamic = NULL;
    uintptr_t relroStart = 0, relroEnd = 0;
    for (int index = 0; index < info->dlpi_phnum; index++) {
        const ElfW(Phdr) *header = &info->dlpi_phdr[index];
        if (header->p_type == PT_DYNAMIC) dynamic = (const ElfW(Dyn) *)(base + header->p_vaddr);
        if (header->p_type == PT_GNU_RELRO) {
            relroStart = base + header->p_vaddr;
            relroEnd = relroStart + header->p_memsz;
        }
    }
    if (!dynamic) return 1;
    const ElfW(Sym) *symbols = NULL;
    const char *names = NULL;
    const ElfW(Rela) *plt = NULL, *data = NULL;
    size_t pltSize = 0, dataSize = 0;
    int pltIsRela = 1;
    for (const ElfW(Dyn) *entry = dynamic; entry->d_tag != DT_NULL; entry++) {
        switch (entry->d_tag) {
        case DT_SYMTAB: symbols = (const ElfW(Sym) *)dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_STRTAB: names = (const char *)dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_JMPREL: plt = (const ElfW(Rela) *)dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_PLTRELSZ: pltSize = entry->d_un.d_val; break;
        case DT_PLTREL: pltIsRela = entry->d_un.d_val == DT_RELA; break;
        case DT_RELA: data = (const ElfW(Rela) *)dynamic_address(base, entry->d_un.d_ptr); break;
        case DT_RELASZ: dataSize = entry->d_un.d_val; break;
        }
    }
    if (!symbols || !names || !pltIsRela) return 1;
    rewrite_table(search, base, plt, pltSize, symbols, names, relroStart, relroEnd);
    rewrite_table(search, base, data, dataSize, symbols, names, relroStart, relroEnd);
    return 1;
}

static int redirect(void) {
    struct search search = {0, 0, 0};
    dl_iterate_phdr(redirect_in, &search);
    if (!search.found) return ENOENT;
    if (search.failure) return search.failure;
    /* Buffering needs all four: a buffer not dropped on close would serve a reused descriptor. */
    if (search.patched != (1 << REDIRECTION_COUNT) - 1) return ESRCH;
    return 0;
}
#else
static int redirect(void) { return ENOTSUP; }
#endif

static pthread_once_t installOnce = PTHREAD_ONCE_INIT;

static void install_once(void) {
    atomic_store(&installResult, redirect());
}

/* MARK: The interface */

int livedata_io_install(void) {
    pthread_once(&installOnce, install_once);
    return atomic_load(&installResult);
}

void livedata_io_claim_pairs(int on) {
    claimingPairs = on;
}

int livedata_io_attach(int fd) {
    if (atomic_load(&installResult) != 0) return ENOTSUP;
    if (fd < 0 || fd >= DESCRIPTOR_LIMIT) return EBADF;
    struct connection *connection = calloc(1, sizeof(struct connection));
    if (!connection) return ENOMEM;
    connection->input = malloc(INPUT_CAPACITY);
    if (!connection->input) {
        free(connection);
        return ENOMEM;
    }
    struct connection *earlier = atomic_exchange_explicit(&connections[fd], connection, memory_order_acq_rel);
    if (earlier) release(earlier);
    return 0;
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
