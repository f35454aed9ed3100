/* Bit packing against a bit-by-bit reference written from the layout
 * (pack.h): every width 2..16, hand-computed bytes, bad widths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pack.h"

/* Reference: sample i's bit b (MSB first) is stream bit i x bits + b, and
 * stream bit k is bit (7 - k % 8) of byte k / 8. */
static void ref_pack(const int16_t *in, size_t n, int bits, uint8_t *out)
{
    memset(out, 0, cbf_pack_bytes(n, bits));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(int32_t)in[i];
        for (int b = 0; b < bits; b++) {
            size_t k = i * (size_t)bits + (size_t)b;
            if ((u >> (bits - 1 - b)) & 1)
                out[k / 8] |= (uint8_t)(0x80u >> (k % 8));
        }
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    /* splitmix64: fresh, well-mixed values without a library. */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void round_trip_all_widths(void **state)
{
    (void)state;
    enum { N = 4099 };  /* odd, so every width ends on a partial byte somewhere */
    int16_t in[N], back[N + 8];
    uint8_t packed[N * 2 + 8], ref[N * 2 + 8];
    char msg[256];
    for (int bits = 2; bits <= 16; bits++) {
        const int32_t lo = cbf_pack_min(bits), hi = cbf_pack_max(bits);
        assert_int_equal(lo, -(1 << (bits - 1)));
        assert_int_equal(hi, (1 << (bits - 1)) - 1);
        for (size_t i = 0; i < N; i++)
            in[i] = (int16_t)(lo + (int32_t)(rng() % (uint64_t)(hi - lo + 1)));
        in[0] = (int16_t)lo;          /* both extremes, wherever the stream is */
        in[1] = (int16_t)hi;
        in[N - 2] = (int16_t)hi;
        in[N - 1] = (int16_t)lo;
        const size_t nbytes = cbf_pack_bytes(N, bits);
        assert_int_equal(nbytes, ((size_t)N * bits + 7) / 8);
        memset(packed, 0xa5, sizeof packed);   /* poison: unwritten bytes show */
        assert_int_equal(cbf_pack(in, N, bits, packed, msg, sizeof msg), 0);
        ref_pack(in, N, bits, ref);
        assert_memory_equal(packed, ref, nbytes);
        assert_int_equal(packed[nbytes], 0xa5);   /* and nothing beyond */
        for (size_t i = 0; i < N + 8; i++)
            back[i] = 0x5a5a;
        assert_int_equal(cbf_unpack(packed, N, bits, back, msg, sizeof msg), 0);
        assert_memory_equal(back, in, sizeof in);
        assert_int_equal(back[N], 0x5a5a);
        /* A window starting at every phase of the byte grid. */
        for (size_t first = 1; first < 17; first++) {
            int16_t win[64];
            assert_int_equal(cbf_unpack_range(packed, first, 64, bits, win, msg, sizeof msg), 0);
            assert_memory_equal(win, in + first, sizeof win);
        }
    }
}

static void hand_computed_10bit(void **state)
{
    (void)state;
    /* 1 = 0000000001, -1 = 1111111111, 511 = 0111111111, -512 = 1000000000:
     * 00000000 01111111 11110111 11111110 00000000 */
    const int16_t in[4] = {1, -1, 511, -512};
    const uint8_t want[5] = {0x00, 0x7f, 0xf7, 0xfe, 0x00};
    uint8_t out[6];
    int16_t back[4];
    memset(out, 0xee, sizeof out);
    assert_int_equal(cbf_pack_bytes(4, 10), 5);
    assert_int_equal(cbf_pack(in, 4, 10, out, NULL, 0), 0);
    assert_memory_equal(out, want, 5);
    assert_int_equal(out[5], 0xee);
    assert_int_equal(cbf_unpack(want, 4, 10, back, NULL, 0), 0);
    assert_memory_equal(back, in, sizeof in);
}

static void hand_computed_3bit(void **state)
{
    (void)state;
    /* 3 = 011, -4 = 100, -1 = 111, 2 = 010, 1 = 001 then 1 padding bit:
     * 01110011 10100010 -> 0x73 0xa2 */
    const int16_t in[5] = {3, -4, -1, 2, 1};
    const uint8_t want[2] = {0x73, 0xa2};
    uint8_t out[2];
    int16_t back[5];
    assert_int_equal(cbf_pack_bytes(5, 3), 2);
    assert_int_equal(cbf_pack(in, 5, 3, out, NULL, 0), 0);
    assert_memory_equal(out, want, 2);
    assert_int_equal(cbf_unpack(want, 5, 3, back, NULL, 0), 0);
    assert_memory_equal(back, in, sizeof in);
}

static void bad_width_and_range(void **state)
{
    (void)state;
    const int16_t in[2] = {0, 1};
    uint8_t out[8];
    int16_t back[2];
    char msg[256];
    const int bad[] = {-1, 0, 1, 17, 32};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_false(cbf_pack_bits_ok(bad[k]));
        assert_int_equal(cbf_pack_bytes(2, bad[k]), 0);
        msg[0] = 0;
        assert_int_equal(cbf_pack(in, 2, bad[k], out, msg, sizeof msg), CBF_KERN_EINVAL);
        assert_non_null(strstr(msg, "bits"));
        assert_int_equal(cbf_unpack(out, 2, bad[k], back, msg, sizeof msg), CBF_KERN_EINVAL);
    }
    /* 2 does not fit in 2 bits ([-2, 1]): refused, naming the index. */
    assert_int_equal(cbf_pack((const int16_t[]){1, 2}, 2, 2, out, msg, sizeof msg),
                     CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "sample 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_all_widths),
        cmocka_unit_test(hand_computed_10bit),
        cmocka_unit_test(hand_computed_3bit),
        cmocka_unit_test(bad_width_and_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
