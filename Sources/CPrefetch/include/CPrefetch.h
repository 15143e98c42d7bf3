#ifndef LIVEDATA_CPREFETCH_H
#define LIVEDATA_CPREFETCH_H

/// Asks the processor to start loading the line of memory at `address` for reading,
/// without waiting for it: a hint, never a fault, whatever the address.
static inline __attribute__((always_inline)) void livedata_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

#endif
