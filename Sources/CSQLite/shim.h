#ifndef LIVEDATA_CSQLITE_SHIM_H
#define LIVEDATA_CSQLITE_SHIM_H

#include <sqlite3.h>

#endif
