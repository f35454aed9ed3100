/* test_xeng.c: correlator and reducer, CPU or (--gpu) CUDA, against a plain
 * int64 reference written from the definition in docs/formats.md.
 * Everything is integer arithmetic, so the tolerance is zero: bit-exact or fail.
 *
 * Inputs are fresh random samples each run (seed printed; CBF_TEST_SEED
 * repeats one), 8-bit in [-127, 127] (never -128, see correlator.h), 4-bit
 * in [-8, 7]. Accumulators start at random values rather than zero, so an
 * element the kernel never adds to keeps a wrong value; visibility outputs
 * are poisoned before each run. Without a GPU, --gpu exits 77 (skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xeng_ref.h"
#include "xeng_run.h"

static int use_gpu;
static uint64_t rng_state;
static int ci4_extremes; /* 4-bit samples from {-8, 7} alone */

static uint64_t rnd(void)
{
    uint64_t x = rng_state; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static int rnd_range(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- input and reference ---------------------------------------------- */

static uint8_t *random_input(const cbf_corr_shape *s, size_t batches)
{
    size_t n = batches * cbf_corr_batch_bytes(s);
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        if (s->bits == 8)
            p[i] = (uint8_t)(int8_t)rnd_range(-127, 127);
        else if (ci4_extremes)
            p[i] = (uint8_t)((rnd() & 1 ? 0x80 : 0x70) | (rnd() & 1 ? 0x08 : 0x07));
        else
            p[i] = (uint8_t)(((rnd_range(-8, 7) & 15) << 4) | (rnd_range(-8, 7) & 15));
    }
    return p;
}

static int64_t *random_accum(size_t n)
{
    int64_t *p = malloc(n * sizeof(int64_t));
    for (size_t i = 0; i < n; i++)
        p[i] = (int64_t)(rnd() >> 20) - ((int64_t)1 << 43);
    return p;
}

/* Correlates [b0, b1) into randomly initialised accumulators and checks
 * that the slices together gained exactly the reference. */
static void check_correlate(const cbf_corr_shape *s, size_t batches, size_t b0, size_t b1,
                            int slices, int block_ants)
{
    uint8_t *in = random_input(s, batches);
    int64_t *ref = xeng_ref_correlate(s, in, b0, b1);
    size_t len = cbf_corr_accum_len(s);
    int64_t *acc = random_accum(len * (size_t)slices);
    int64_t *init = malloc(len * (size_t)slices * sizeof(int64_t));
    memcpy(init, acc, len * (size_t)slices * sizeof(int64_t));
    char msg[512] = "";
    int rc = xeng_correlate(use_gpu, s, in, batches, b0, b1, slices, block_ants, acc, msg,
                            sizeof msg);
    if (rc)
        fail_msg("correlate N=%d: %s", s->n_ants, msg);
    size_t bad = 0;
    for (size_t i = 0; i < len; i++) {
        int64_t got = 0;
        for (int z = 0; z < slices; z++)
            got += acc[z * len + i] - init[z * len + i];
        if (got != ref[i] && bad++ < 5)
            print_message("N=%d C=%d bits=%d block=%d: value %zu: got %" PRId64 " want %" PRId64
                          "\n", s->n_ants, s->channels, s->bits, block_ants, i, got, ref[i]);
    }
    if (bad)
        fail_msg("N=%d C=%d bits=%d block=%d: %zu of %zu values differ", s->n_ants, s->channels,
                 s->bits, block_ants, bad, len);
    free(in);
    free(ref);
    free(acc);
    free(init);
}

/* ---- tests ------------------------------------------------------------ */

/* On the GPU: block 0 (the automatic choice: the wgmma kernel on an
 * H100/H200 when the shape suits it) and each mma.sync tile size, with
 * several slice counts. */
static void each_block(const cbf_corr_shape *s, size_t batches, size_t b0, size_t b1)
{
    static const int blocks[] = {0, 32, 48, 64}, slices[] = {3, 1, 2, 3};
    if (!use_gpu) {
        check_correlate(s, batches, b0, b1, 1, 0);
        return;
    }
    for (int k = 0; k < 4; k++)
        check_correlate(s, batches, b0, b1, slices[k], blocks[k]);
}

static void test_antenna_counts(void **state)
{
    (void)state;
    static const int ns[] = {1, 2, 3, 4, 31, 32, 33, 64, 65, 80, 130};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cbf_corr_shape s = {ns[i], 2, 64, 8};
        /* a batch range inside the buffer: the kernel must not stray out */
        each_block(&s, 4, 1, 3 + (i & 1));
    }
}

/* Tiles of the wgmma kernel (64 x 64) and of mma.sync in numbers: several
 * tile rows and columns, a last partial tile, and 192 spectra per heap (3
 * of the wgmma kernel's 64-spectrum stages, so stages run across batches). */
static void test_large_n(void **state)
{
    (void)state;
    static const int ns[] = {256, 300, 512};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cbf_corr_shape s = {ns[i], 2, i == 1 ? 64 : 192, 8};
        each_block(&s, 3, 1, 3);
    }
}

/* A long time range over few tiles: the wgmma kernel cuts it into pieces
 * (here 148 stages into nine of at most 17, boundaries inside batches) that
 * run at once and add into the same accumulators; diagonal, off-diagonal
 * and edge tiles. */
static void test_long_range(void **state)
{
    (void)state;
    cbf_corr_shape s = {130, 1, 256, 8};
    each_block(&s, 40, 3, 40);
}

/* The wgmma kernel's small-array path (64 < N <= 80: one block per
 * channel; blocks take equal shares of the (channel, stage) range, which
 * cross channels and batches): 5 channels of 192 spectra (3 stages per
 * batch) over batches 1..29, 87 stages per channel in shares of 4 on an
 * H100; then one channel of 256 spectra over 58 batches. */
static void test_small_arrays(void **state)
{
    (void)state;
    static const int ns[] = {65, 72, 79, 80};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cbf_corr_shape s = {ns[i], 5, 192, 8};
        each_block(&s, 30, 1, 30);
    }
    cbf_corr_shape s = {80, 1, 256, 8};
    each_block(&s, 60, 2, 60);
}

/* 4-bit input with 96 spectra per heap: not whole 64-spectrum stages, so
 * the mma.sync kernel alone. */
static void test_4bit(void **state)
{
    (void)state;
    static const int ns[] = {1, 3, 33, 65, 130};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cbf_corr_shape s = {ns[i], 3, 96, 4};
        each_block(&s, 3, 0, 3);
    }
}

/* 4-bit input in the shapes the wgmma kernels take on an H100/H200 (block
 * 0): one tile, partial and diagonal tiles, the small-array kernel
 * (65..80, shares crossing channels and batches), several tile rows
 * (300: a partial last one), 192 spectra (stages across batches), and a
 * long range over few tiles, cut into pieces that add into the same
 * accumulators. */
static void test_4bit_hopper(void **state)
{
    (void)state;
    static const int ns[] = {1, 3, 33, 64, 65, 72, 79, 80, 130, 300};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        cbf_corr_shape s = {ns[i], 3, 192, 4};
        each_block(&s, 4, 1, 3 + (i & 1));
    }
    cbf_corr_shape s = {72, 5, 192, 4};
    each_block(&s, 30, 1, 30);
    cbf_corr_shape s1 = {80, 1, 256, 4};
    each_block(&s1, 60, 2, 60);
    cbf_corr_shape s2 = {130, 1, 256, 4};
    each_block(&s2, 40, 3, 40);
    /* the extremes alone (-8: its negation and its 16-fold copy in the
     * 64 x 64 kernel's A), over a few hundred stages per block */
    ci4_extremes = 1;
    cbf_corr_shape s3 = {130, 1, 512, 4};
    each_block(&s3, 30, 0, 30);
    cbf_corr_shape s4 = {80, 2, 512, 4};
    each_block(&s4, 20, 0, 20);
    ci4_extremes = 0;
}

static void test_many_channels(void **state)
{
    (void)state;
    cbf_corr_shape s = {4, 1024, 32, 8};
    each_block(&s, 2, 0, 2);
    cbf_corr_shape s1 = {70, 300, 64, 8}; /* the wgmma kernel's stage size */
    each_block(&s1, 2, 0, 2);
    cbf_corr_shape s2 = {33, 96, 32, 8};
    each_block(&s2, 3, 1, 3);
}

static void test_reducer(void **state)
{
    (void)state;
    const int n = 37, channels = 5, slices = 3;
    size_t nbl = cbf_corr_baselines(n), len = (size_t)channels * nbl * 8;
    int64_t *acc = malloc((size_t)slices * len * sizeof(int64_t));
    int64_t *sum = calloc(len, sizeof(int64_t));
    /* about a quarter of the values beyond int32 (either sign), the rest inside */
    for (size_t i = 0; i < (size_t)slices * len; i++) {
        int64_t span = (rnd() & 3) ? ((int64_t)1 << 29) : ((int64_t)1 << 32);
        acc[i] = (int64_t)(rnd() % (uint64_t)(2 * span + 1)) - span;
        sum[i % len] += acc[i];
    }
    uint8_t bad[37] = {0};
    bad[0] = bad[17] = bad[36] = 1;
    int32_t *want = malloc(len * sizeof(int32_t)), *got = malloc(len * sizeof(int32_t));
    uint64_t want_sat = xeng_ref_reduce(n, channels, sum, bad, want);
    memset(got, 0x5a, len * sizeof(int32_t));
    cbf_reduce_job job = {n, channels, acc, slices, len, bad, got, 1};
    uint64_t got_sat = 0;
    char msg[512] = "";
    if (xeng_reduce(use_gpu, &job, &got_sat, msg, sizeof msg))
        fail_msg("reduce: %s", msg);
    size_t diff = 0, magic = 0;
    for (size_t i = 0; i < len; i++) {
        diff += got[i] != want[i];
        magic += (i % 2 == 0) && got[i] == INT32_MIN;
    }
    assert_int_equal(diff, 0);
    assert_true(want_sat > 0);
    assert_int_equal(got_sat, want_sat);
    /* three bad antennas out of 37 touch 3 x 37 - 3 baselines */
    assert_int_equal(magic, (size_t)channels * (3 * 37 - 3) * 4);
    for (size_t i = 0; i < (size_t)slices * len; i++)
        if (acc[i])
            fail_msg("accumulator %zu not cleared", i);
    free(acc);
    free(sum);
    free(want);
    free(got);
}

/* Overflows int32 on purpose: antenna 0 sees s (127 + 127j), antenna 1
 * s (127 - 127j) with random signs s, so autocorrelations and the cross
 * term's imaginary part grow by 2 x 127^2 per spectrum; antenna 2 is
 * random and small. */
static void test_saturation(void **state)
{
    (void)state;
    cbf_corr_shape s = {3, 1, 256, 8};
    const size_t batches = 300;
    uint8_t *in = random_input(&s, batches);
    for (size_t b = 0; b < batches; b++)
        for (int t = 0; t < s.spectra_per_heap; t++) {
            int sign = (rnd() & 1) ? 1 : -1;
            for (int a = 0; a < 2; a++)
                for (int p = 0; p < 2; p++) {
                    size_t idx = (((b * 3 + a) * s.spectra_per_heap + t) * 2 + p) * 2;
                    in[idx] = (uint8_t)(int8_t)(127 * sign);
                    in[idx + 1] = (uint8_t)(int8_t)((a ? -127 : 127) * sign);
                }
            for (int p = 0; p < 2; p++) {
                size_t idx = (((b * 3 + 2) * s.spectra_per_heap + t) * 2 + p) * 2;
                in[idx] = (uint8_t)(int8_t)rnd_range(-3, 3);
                in[idx + 1] = (uint8_t)(int8_t)rnd_range(-3, 3);
            }
        }
    int64_t *ref = xeng_ref_correlate(&s, in, 0, batches);
    size_t len = cbf_corr_accum_len(&s);
    /* One slice, 76800 spectra (1200 stages of the wgmma kernel, more
     * than its int32 registers can hold: it cuts the range into pieces of
     * at most 1023 stages; the mma.sync kernel flushes every 2047 of its
     * 32-spectrum stages). */
    const int slices = 1;
    int64_t *acc = calloc(len * slices, sizeof(int64_t));
    char msg[512] = "";
    if (xeng_correlate(use_gpu, &s, in, batches, 0, batches, slices, 0, acc, msg, sizeof msg))
        fail_msg("correlate: %s", msg);
    uint8_t bad[3] = {0};
    int32_t *want = malloc(len * sizeof(int32_t)), *got = malloc(len * sizeof(int32_t));
    uint64_t want_sat = xeng_ref_reduce(3, 1, ref, bad, want), got_sat = 0;
    memset(got, 0x5a, len * sizeof(int32_t));
    cbf_reduce_job job = {3, 1, acc, slices, len, bad, got, 0};
    if (xeng_reduce(use_gpu, &job, &got_sat, msg, sizeof msg))
        fail_msg("reduce: %s", msg);
    for (size_t i = 0; i < len; i++)
        if (got[i] != want[i])
            fail_msg("value %zu: got %d want %d", i, got[i], want[i]);
    /* baselines (0,0), (0,1), (1,1): every product clips */
    assert_true(want_sat >= 12);
    assert_int_equal(got_sat, want_sat);
    assert_int_equal(want[0], INT32_MAX);
    free(in);
    free(ref);
    free(acc);
    free(want);
    free(got);
}

/* A stream of chunks whose first timestamp is not on a dump boundary (nor,
 * in the second case, on a batch boundary), dumps of 5 batches in chunks of
 * 7, and random missing heaps: each dump must equal the reference over its
 * own batches, with the magic value on exactly the baselines of antennas
 * that missed a heap in it. The first, partial dump has every antenna bad
 * (its earlier batches never arrived). */
static void run_stream(int64_t ts0)
{
    cbf_corr_shape s = {6, 3, 32, 8};
    const size_t chunk = 7, chunks = 5, total = chunk * chunks;
    const int64_t step = 2 * 4096 * s.spectra_per_heap, dump_batches = 5;
    uint8_t *in = random_input(&s, total);
    uint8_t *present = malloc(total * (size_t)s.n_ants);
    for (size_t i = 0; i < total * (size_t)s.n_ants; i++)
        present[i] = (rnd() % 40) != 0;
    const size_t len = cbf_corr_accum_len(&s), bb = cbf_corr_batch_bytes(&s);
    const int slices = use_gpu ? 2 : 1;
    int64_t *acc = calloc(len * slices, sizeof(int64_t));
    int32_t *got = malloc(len * sizeof(int32_t)), *want = malloc(len * sizeof(int32_t));
    uint8_t bad[6];
    int64_t open_dump = -1;
    size_t open_first = 0, dumps = 0;
    unsigned got_present[6] = {0};
    char msg[512] = "";
    for (size_t k = 0; k < chunks; k++) {
        cbf_dump_span sp[8];
        size_t nsp;
        if (cbf_dump_split(ts0 + (int64_t)(k * chunk) * step, chunk, step, dump_batches, sp, 8,
                           &nsp, msg, sizeof msg))
            fail_msg("split: %s", msg);
        for (size_t j = 0; j < nsp; j++) {
            if (sp[j].dump != open_dump) {
                open_dump = sp[j].dump;
                open_first = k * chunk + sp[j].batch_begin;
                memset(got_present, 0, sizeof got_present);
            }
            if (xeng_correlate(use_gpu, &s, in + k * chunk * bb, chunk, sp[j].batch_begin,
                               sp[j].batch_end, slices, 0, acc, msg, sizeof msg))
                fail_msg("correlate: %s", msg);
            for (size_t b = sp[j].batch_begin; b < sp[j].batch_end; b++)
                for (int a = 0; a < s.n_ants; a++)
                    got_present[a] += present[(k * chunk + b) * s.n_ants + a];
            if (!sp[j].closes)
                continue;
            size_t last = k * chunk + sp[j].batch_end;
            /* the dump's timestamp is a multiple of the interval, and its
             * batches are those whose timestamps fall inside it */
            assert_true(ts0 + (int64_t)last * step > open_dump * dump_batches * step);
            assert_true(ts0 + (int64_t)(last - 1) * step < (open_dump + 1) * dump_batches * step);
            for (int a = 0; a < s.n_ants; a++)
                bad[a] = got_present[a] != (unsigned)dump_batches;
            int64_t *ref = xeng_ref_correlate(&s, in, open_first, last);
            xeng_ref_reduce(s.n_ants, s.channels, ref, bad, want);
            memset(got, 0x5a, len * sizeof(int32_t));
            cbf_reduce_job job = {s.n_ants, s.channels, acc, slices, len, bad, got, 1};
            uint64_t sat = 0;
            if (xeng_reduce(use_gpu, &job, &sat, msg, sizeof msg))
                fail_msg("reduce: %s", msg);
            for (size_t i = 0; i < len; i++)
                if (got[i] != want[i])
                    fail_msg("dump %lld value %zu: got %d want %d", (long long)open_dump, i,
                             got[i], want[i]);
            if (dumps == 0 && (ts0 / step) % dump_batches)
                for (int a = 0; a < s.n_ants; a++)
                    assert_true(bad[a]);
            dumps++;
            free(ref);
        }
    }
    assert_true(dumps >= 5);
    free(in);
    free(present);
    free(acc);
    free(got);
    free(want);
}

static void test_dumps(void **state)
{
    (void)state;
    const int64_t step = 2 * 4096 * 32;
    run_stream(1000 * 5 * step + 3 * step);        /* on a batch, 3 into a dump */
    run_stream(77 * 5 * step + 2 * step + 12345);  /* not even on a batch */
}

static void test_dump_split(void **state)
{
    (void)state;
    cbf_dump_span sp[16];
    size_t n;
    char msg[256];
    /* dumps of 4 batches of 10 samples; chunk of 9 batches from ts 30 */
    assert_int_equal(cbf_dump_split(30, 9, 10, 4, sp, 16, &n, msg, sizeof msg), 0);
    assert_int_equal(n, 3);
    assert_int_equal(sp[0].batch_begin, 0);
    assert_int_equal(sp[0].batch_end, 1);
    assert_int_equal(sp[0].dump, 0);
    assert_true(sp[0].closes);
    assert_int_equal(sp[1].batch_end, 5);
    assert_int_equal(sp[1].dump, 1);
    assert_true(sp[1].closes);
    assert_int_equal(sp[2].batch_begin, 5);
    assert_int_equal(sp[2].batch_end, 9);
    assert_int_equal(sp[2].dump, 2);
    assert_true(sp[2].closes);
    assert_int_equal(cbf_dump_split(30, 8, 10, 4, sp, 16, &n, msg, sizeof msg), 0);
    assert_int_equal(n, 3);
    assert_false(sp[2].closes);
    assert_int_equal(cbf_dump_split(30, 8, 10, 4, sp, 2, &n, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_int_equal(cbf_dump_split(30, 8, 0, 4, sp, 16, &n, msg, sizeof msg), CBF_KERN_EINVAL);
}

static void test_bad_args(void **state)
{
    (void)state;
    char msg[256] = "";
    cbf_corr_shape s = {4, 2, 48, 8};
    assert_int_equal(cbf_corr_shape_check(&s, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "spectra_per_heap"));
    s.spectra_per_heap = 64;
    s.bits = 6;
    assert_int_equal(cbf_corr_shape_check(&s, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "bits"));
    s.bits = 8;
    cbf_corr_job job = {s, NULL, 2, 1, NULL, 1};
    assert_int_equal(cbf_corr_cpu(&job, msg, sizeof msg), CBF_KERN_EINVAL);
}

int main(int argc, char **argv)
{
    if ((use_gpu = cbf_test_gpu_arg("test_xeng", argc, argv)) < 0)
        return 77;
    rng_state = cbf_test_seed("CBF_TEST_SEED", use_gpu ? "test_xeng --gpu" : "test_xeng");
    /* CBF_TEST_FILTER: run only the tests whose names match (cmocka's
     * pattern: * and ?), e.g. a quicker compute-sanitizer pass */
    const char *filter = getenv("CBF_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_args),      cmocka_unit_test(test_dump_split),
        cmocka_unit_test(test_antenna_counts), cmocka_unit_test(test_large_n),
        cmocka_unit_test(test_long_range),    cmocka_unit_test(test_small_arrays),
        cmocka_unit_test(test_4bit),          cmocka_unit_test(test_4bit_hopper),
        cmocka_unit_test(test_many_channels), cmocka_unit_test(test_reducer),
        cmocka_unit_test(test_saturation),    cmocka_unit_test(test_dumps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
