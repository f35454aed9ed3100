/* The packed-sample decoder and padding rule of kernels/common/include/cbf/kernels/packed.h
 * against a bit-by-bit reference written from the format, on fresh random
 * data at every width 2..16. Buffers end at an unmapped page, so a read
 * past what the rule (or, unpadded, the stream) allows faults instead of
 * passing by luck. The seed is printed; CBF_TEST_SEED replays one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "pack.h"
#include "cbf/kernels/packed.h"

static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int seed_setup(void **state)
{
    (void)state;
    const char *env = getenv("CBF_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0)
                        : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    rng_state = seed ? seed : 1;
    print_message("seed 0x%llx (CBF_TEST_SEED replays it)\n", (unsigned long long)seed);
    return 0;
}

/* Reference: stream bit k is bit (7 - k % 8) of byte k / 8; sample i is
 * stream bits [i x bits, (i + 1) x bits), most significant first, two's
 * complement. */
static int32_t ref_sample(const uint8_t *in, size_t i, int bits)
{
    int32_t v = 0;
    for (int b = 0; b < bits; b++) {
        size_t k = i * (size_t)bits + (size_t)b;
        v = v * 2 + ((in[k / 8] >> (7 - k % 8)) & 1);
    }
    return v >= (1 << (bits - 1)) ? v - (1 << bits) : v;
}

/* `bytes` readable bytes that end where an inaccessible page begins. */
typedef struct guarded {
    uint8_t *map, *data;
    size_t map_len;
} guarded;

static uint8_t *guarded_alloc(guarded *g, size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t body = (bytes + page - 1) / page * page;
    g->map_len = body + page;
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g->map != MAP_FAILED);
    assert_int_equal(mprotect(g->map + body, page, PROT_NONE), 0);
    g->data = g->map + body - bytes;
    for (size_t k = 0; k < bytes; k++)
        g->data[k] = (uint8_t)rng();
    return g->data;
}

static void guarded_free(guarded *g)
{
    munmap(g->map, g->map_len);
}

/* The padded decoder reads no further than cbf_packed_bytes, whatever the
 * padding holds (it is random here), and agrees with the reference. */
static void padded_decode_all_widths(void **state)
{
    (void)state;
    for (int bits = 2; bits <= 16; bits++)
        for (int round = 0; round < 4; round++) {
            const size_t n = 1 + (size_t)(rng() % 3000);
            guarded g;
            const uint8_t *in = guarded_alloc(&g, cbf_packed_bytes(n, bits));
            /* 4-byte aligned too, as the word readers need. */
            assert_int_equal((uintptr_t)in % 4, 0);
            for (size_t i = 0; i < n; i++)
                if (cbf_packed_sample(in, i, bits) != ref_sample(in, i, bits))
                    fail_msg("bits %d, n %zu: sample %zu decodes to %d, reference %d", bits, n,
                             i, (int)cbf_packed_sample(in, i, bits), (int)ref_sample(in, i, bits));
            guarded_free(&g);
        }
}

/* Unpadded streams (a heap as it arrives, the example plugin's input, the
 * pack kernel's output): the bounded decoder and cbf_unpack_range read no
 * byte past the stream's last, and still agree with the reference. */
static void unpadded_decode_all_widths(void **state)
{
    (void)state;
    for (int bits = 2; bits <= 16; bits++)
        for (int round = 0; round < 4; round++) {
            const size_t n = 1 + (size_t)(rng() % 3000), bytes = cbf_pack_bytes(n, bits);
            guarded g;
            const uint8_t *in = guarded_alloc(&g, bytes);
            for (size_t i = 0; i < n; i++)
                if (cbf_packed_sample_in(in, bytes, i, bits) != ref_sample(in, i, bits))
                    fail_msg("bits %d, n %zu: bounded sample %zu differs", bits, n, i);
            const size_t first = (size_t)(rng() % n), count = n - first;
            int16_t *out = malloc(count * sizeof *out);
            assert_non_null(out);
            assert_int_equal(cbf_unpack_range(in, first, count, bits, out, NULL, 0), 0);
            for (size_t i = 0; i < count; i++)
                if (out[i] != ref_sample(in, first + i, bits))
                    fail_msg("bits %d, n %zu: unpack_range from %zu, sample %zu differs", bits, n,
                             first, i);
            free(out);
            guarded_free(&g);
        }
}

/* The rule against each reader's reach, from their code, at every width
 * and every length up to a few thousand samples (all residues of n x bits
 * modulo 32 and beyond). Sample i starts at stream bit s = i x bits, in
 * byte s / 8 and 32-bit word s / 32.
 *  - cbf_packed_sample: bytes [s / 8, s / 8 + 3).
 *  - kernels/pfb/pfb.cu: decode_at reads bytes s / 8 and s / 8 + 1; the
 *    turns load the aligned 32-bit words holding them (fir_load), aligned
 *    in memory, not to the buffer: with the buffer starting o = 0..3 bytes
 *    past a word boundary, up to byte ((o + s / 8 + 1) / 4 + 1) x 4 - o.
 *  - kernels/ddc/ddc.cu: words s / 32 and s / 32 + 1 (hi and lo of the pair
 *    a sample is shifted out of), every index clamped to last_word =
 *    cbf_packed_bytes / 4 - 1; a real sample's loads must never need that
 *    clamp, or it would decode the wrong word. */
static void padding_covers_every_reader(void **state)
{
    (void)state;
    for (int bits = 2; bits <= 16; bits++)
        for (size_t n = 1; n <= 4096; n++) {
            const size_t bytes = cbf_packed_bytes(n, bits);
            const size_t s_last = (n - 1) * (size_t)bits, end_bit = n * (size_t)bits;
            const size_t data_bytes = (end_bit + 7) / 8;
            if (bytes % 4 || bytes < data_bytes)
                fail_msg("bits %d, n %zu: %zu bytes is not whole words holding the samples",
                         bits, n, bytes);
            if (s_last / 8 + 3 > bytes)
                fail_msg("bits %d, n %zu: cbf_packed_sample reads past %zu bytes", bits, n, bytes);
            for (size_t o = 0; o < 4; o++)
                if (((o + s_last / 8 + 1) / 4 + 1) * 4 - o > bytes)
                    fail_msg("bits %d, n %zu, offset %zu: the pfb GPU decoder reads past %zu "
                             "bytes", bits, n, o, bytes);
            const size_t last_word = bytes / 4 - 1;
            if (s_last / 32 + 1 > last_word)
                fail_msg("bits %d, n %zu: the ddc GPU decoder's word %zu is clamped to %zu", bits,
                         n, s_last / 32 + 1, last_word);
            /* The two rules this one replaced: the pfb's (one byte past the
             * samples) is covered, the ddc's (whole words plus one) kept. */
            if (bytes < data_bytes + 1 || bytes != 4 * ((end_bit + 31) / 32 + 1))
                fail_msg("bits %d, n %zu: %zu bytes differs from the words-plus-one rule", bits,
                         n, bytes);
        }
    /* samples x bits overflows size_t here, the byte count does not: at 16
     * bits, n samples fill ceil(n / 2) words. */
    const size_t big = SIZE_MAX / 8;
    assert_int_equal(cbf_packed_bytes(big, 16), 4 * (big / 2 + big % 2 + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(padded_decode_all_widths),
        cmocka_unit_test(unpadded_decode_all_widths),
        cmocka_unit_test(padding_covers_every_reader),
    };
    return cmocka_run_group_tests(tests, seed_setup, NULL);
}
