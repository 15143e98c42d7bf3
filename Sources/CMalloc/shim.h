#ifndef LIVEDATA_CMALLOC_SHIM_H
#define LIVEDATA_CMALLOC_SHIM_H

// The C library's allocator controls (malloc_trim), which Swift's Glibc module leaves out.
#include <malloc.h>

#endif
