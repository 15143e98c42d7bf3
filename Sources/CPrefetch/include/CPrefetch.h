#ifndef LIVEDATA_CPREFETCH_H
#define LIVEDATA_CPREFETCH_H

/// Asks the processor to start loading the line of memory at `address` for reading,
/// without waiting for it: a hint, never a fault, whatever the address.
static inline __attribute__((always_inline)) void livedata_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

/// Asks the processor to start loading the line of memory at `address` to write it (a count
/// of references there is about to change), without waiting for it: a hint, never a fault,
/// whatever the address.
#if defined(__x86_64__)
/// PREFETCHW, whatever the compiler is told the processor has: one without it (older than
/// Broadwell) takes it as a no-op.
static inline __attribute__((always_inline)) void livedata_prefetch_for_writing(const void *address) {
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)address));
}
#else
static inline __attribute__((always_inline)) void livedata_prefetch_for_writing(const void *address) {
    __builtin_prefetch(address, 1, 3);
}
#endif

#endif
