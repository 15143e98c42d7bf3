#ifndef LIVEDATA_CMIMALLOC_SHIM_H
#define LIVEDATA_CMIMALLOC_SHIM_H

// mimalloc (Debian's libmimalloc-dev): linked into the daemon's executable, its malloc and
// free serve the whole process.
#include <mimalloc.h>

#endif
