/* wire.h: big-endian helpers shared by the codec's files (private). */
#ifndef CBF_SPEAD_WIRE_H
#define CBF_SPEAD_WIRE_H
#include <stdint.h>

static inline uint64_t spead_load_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline void spead_store_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}
#endif
