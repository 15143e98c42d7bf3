// The module is its header (CPrefetch.h); a C target needs one source file.
#include "CPrefetch.h"
