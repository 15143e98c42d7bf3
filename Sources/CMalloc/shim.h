#ifndef LIVEDATA_CMALLOC_SHIM_H
#define LIVEDATA_CMALLOC_SHIM_H

// The heap allocator's controls. The daemon's executable links mimalloc, whose malloc then
// serves the whole process (libmosquitto, SQLite and the Swift runtime too); the libraries
// and test binaries do not, and use the C library's. mimalloc's functions are declared weak
// here, so that code in a library asks for them without linking them: without mimalloc they
// are null.
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>

extern int mi_version(void) __attribute__((weak));
extern void mi_collect(bool force) __attribute__((weak));
extern bool mi_is_in_heap_region(const void *pointer) __attribute__((weak));

/// mimalloc's version (209 for 2.0.9) when it serves this process's malloc; 0 when the C
/// library's malloc does (mimalloc not linked, or linked after the C library).
static inline int livedata_mimalloc_version(void) {
    if (!mi_version || !mi_is_in_heap_region) return 0;
    void *probe = malloc(16);
    bool served = probe != NULL && mi_is_in_heap_region(probe);
    free(probe);
    return served ? mi_version() : 0;
}

/// Hands the heap's free pages back to the system: mimalloc's collection when it is linked,
/// then the C library's trim (with nothing to do when its heap is unused).
static inline void livedata_release_free_heap(void) {
    if (mi_collect) mi_collect(true);
    malloc_trim(0);
}

#endif
