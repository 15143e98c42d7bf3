#ifndef LIVEDATA_CCHECKSUM_H
#define LIVEDATA_CCHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/// Whether this processor computes CRC-32C in hardware (SSE 4.2's `crc32`), so that
/// `livedata_crc32c` may be called.
int livedata_crc32c_available(void);

/// CRC-32C (Castagnoli) of `count` bytes at `bytes`, on the running state `crc` (already
/// inverted, as the table-driven form keeps it): only when `livedata_crc32c_available()`.
uint32_t livedata_crc32c(uint32_t crc, const void *bytes, size_t count);

#endif
