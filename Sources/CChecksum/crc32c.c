#include "CChecksum.h"

#include <string.h>

#if defined(__x86_64__)

int livedata_crc32c_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}

// Compiled for SSE 4.2 alone, whatever the rest of the build targets: it runs only where the
// processor has said it has the instruction.
__attribute__((target("sse4.2"))) uint32_t livedata_crc32c(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *at = bytes;
    uint64_t state = crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, at, 8);
        state = __builtin_ia32_crc32di(state, word);
        at += 8;
        count -= 8;
    }
    uint32_t narrow = (uint32_t)state;
    while (count > 0) {
        narrow = __builtin_ia32_crc32qi(narrow, *at);
        at += 1;
        count -= 1;
    }
    return narrow;
}

#else

int livedata_crc32c_available(void) { return 0; }

uint32_t livedata_crc32c(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}

#endif
