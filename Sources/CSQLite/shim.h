#ifndef LIVEDATA_CSQLITE_SHIM_H
#define LIVEDATA_CSQLITE_SHIM_H

#include <sqlite3.h>

/// Turns off SQLite's count of the memory it holds (sqlite3_config is variadic, which Swift
/// cannot call). With the count on, as Debian builds it, every allocation SQLite makes takes
/// a process-wide mutex; without lookaside memory (also Debian's build) a row's write makes
/// several. Only takes effect before the library is first used; returns SQLite's code.
static inline int livedata_sqlite_memory_count_off(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
