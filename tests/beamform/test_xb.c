/* test_xb.c: correlation and beams of the same batches in one call
 * (cbf_xb_cuda_run), against the CPU correlator (int64, exact) and the CPU
 * beamformer (bit for bit, dither on, and off in one case: the one kernel
 * compiles its stage loop for each), on fresh random input with outputs
 * poisoned first. On a Hopper GPU the shapes here (8-bit, N <= 64, up to 8
 * beams, whole heaps) must take the one-kernel path, whose third warpgroup
 * forms the beams from the correlator's staged samples: the test fails if
 * they do not, and it covers absent antennas (applied to the beams' samples
 * only), saturation counts, N below a whole tile and blocks that start and
 * end inside a batch, and the coefficient digits the plan keeps between
 * calls of one coefficient version (made in the kernel without a version,
 * made once, reused, made again for new coefficients in the same array).
 * Elsewhere cbf_xb_cuda_run runs the two kernels one after the other, which
 * the same checks hold. Exit 77 without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../gpu_available.h"
#include "beam_rng.h"
#include "beam_run.h"
#include "beamform.h"
#include "correlator.h"

#define CK(call) assert_int_equal((int)(call), (int)cudaSuccess)

static int hopper; /* compute capability 9.0: the fused kernel must run */
static int dither = 1; /* the beams' dither (run_case) */

/* A device copy of n host bytes (zeros when h is NULL). */
static void *up(const void *h, size_t n)
{
    void *d = NULL;
    char msg[256];
    if (beam_dev_up(&d, h, n, msg, sizeof msg))
        fail_msg("%s", msg);
    return d;
}

/* One XB problem: N antennas, B beams, C channels, T spectra per heap, n
 * batches; `gone` antennas absent from batch 1 (their bytes left as
 * garbage, which the correlator takes as it is and the beams must not);
 * `gain` scales the quantisation gains (large: saturation); `pols` gives
 * beam b's pol as its character b ('0' or '1'), NULL for random ones. The
 * one kernel puts beams of one pol in an n-tile where it can and runs that
 * pol's products only, so the patterns matter: alternate pols (MeerKAT's
 * beams), one pol only (more than 4: beams moved to the other n-tile) and
 * a tile with both. */
static void run_case(int N, int B, int C, int T, size_t n, int gone, double gain, const char *pols)
{
    const cbf_beam_shape bs = {N, B, C, T};
    const cbf_corr_shape cs = {N, C, T, 8};
    const size_t in_n = n * cbf_beam_in_batch_bytes(&bs), out_n = n * cbf_beam_out_batch_bytes(&bs);
    const size_t acc_n = cbf_corr_accum_len(&cs);
    int8_t *in = malloc(in_n), *out = malloc(out_n), *gout = malloc(out_n);
    uint8_t *present = malloc(n * (size_t)N), *pol = malloc((size_t)B);
    cbf_beam_coef *coef = malloc((size_t)N * B * sizeof *coef);
    int64_t *acc = calloc(acc_n, sizeof *acc), *gacc = malloc(acc_n * sizeof *gacc);
    uint64_t sat[8] = {0}, gsat[8];
    assert_non_null(in && out && gout && present && pol && coef && acc && gacc);
    for (size_t i = 0; i < in_n; i++)
        in[i] = (int8_t)((int)(rnd() % 255) - 127);
    memset(present, 1, n * (size_t)N);
    for (int i = 0; i < gone; i++)
        present[(size_t)N + rnd() % (unsigned)N] = 0;
    for (int b = 0; b < B; b++) {
        pol[b] = (uint8_t)(pols ? pols[b] == '1' : rnd() & 1);
        for (int a = 0; a < N; a++)
            assert_int_equal(cbf_beam_coef_set(&coef[b * N + a], 2 * unif() - 1, gain * (0.5 + unif()),
                                               (2 * unif() - 1) * 3e-9, (2 * unif() - 1) * 3.14159,
                                               856e6 / 4096, 100, 2048),
                             0);
    }
    cbf_beam_job bj = {bs, n, (const uint8_t *)in, present, coef, pol, out, NULL, sat, dither,
                       rnd(), rnd() >> 24, 100, 4096, 0, 0};
    cbf_corr_job cj = {cs, (const uint8_t *)in, 0, n, acc, 1};
    char msg[256] = "";
    if (cbf_beam_cpu(&bj, msg, sizeof msg) || cbf_corr_cpu(&cj, msg, sizeof msg))
        fail_msg("CPU: %s", msg);

    /* the same on the GPU, outputs poisoned (accumulators start at zero:
     * the correlator adds into them) */
    cbf_corr_cuda *plan;
    if (cbf_corr_cuda_create(&cs, 0, &plan, msg, sizeof msg))
        fail_msg("plan: %s", msg);
    cbf_beam_job g = bj;
    cbf_corr_job gc = cj;
    g.in = gc.in = up(in, in_n);
    g.present = up(present, n * (size_t)N);
    g.coef = up(coef, (size_t)N * B * sizeof *coef);
    g.pol = up(pol, (size_t)B);
    g.out = up(NULL, out_n);
    CK(cudaMemset(g.out, 0x5a, out_n));
    g.saturated = up(NULL, (size_t)B * sizeof(uint64_t)); /* zeros */
    gc.accum = up(NULL, acc_n * sizeof(int64_t));
    const int fused = cbf_xb_cuda_fused(plan, &gc, &g);
    if (hopper)
        assert_int_equal(fused, 1);
    /* a run on poisoned outputs and fresh counts, held to the CPU's */
    int runs = 0;
    for (;;) {
        CK(cudaMemset(g.out, 0x5a, out_n));
        CK(cudaMemset(g.saturated, 0, (size_t)B * sizeof(uint64_t)));
        CK(cudaMemset(gc.accum, 0, acc_n * sizeof(int64_t)));
        if (cbf_xb_cuda_run(plan, &gc, &g, NULL, msg, sizeof msg))
            fail_msg("cbf_xb_cuda_run: %s", msg);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(gout, g.out, out_n, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gsat, g.saturated, (size_t)B * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gacc, gc.accum, acc_n * sizeof(int64_t), cudaMemcpyDeviceToHost));
        printf("N %d B %d C %d T %d batches %zu absent %d dither %d (%s, coefficient version %" PRIu64
               "): saturated", N, B, C, T, n, gone, dither, fused ? "one kernel" : "two kernels", g.coef_version);
        for (int b = 0; b < B; b++)
            printf(" %" PRIu64, sat[b]);
        printf("\n");
        assert_memory_equal(gacc, acc, acc_n * sizeof(int64_t));
        assert_memory_equal(gout, out, out_n);
        assert_memory_equal(gsat, sat, (size_t)B * sizeof(uint64_t));
        /* then with a coefficient version (the one kernel makes its digits
         * once and keeps them), again (kept), then new coefficients in the
         * same array with the next version (made again: stale digits would
         * give the old beams) */
        if (++runs == 4)
            break;
        if (runs == 1)
            g.coef_version = 7;
        if (runs == 3) {
            for (int b = 0; b < B; b++)
                for (int a = 0; a < N; a++)
                    assert_int_equal(cbf_beam_coef_set(&coef[b * N + a], 2 * unif() - 1, gain * (0.5 + unif()),
                                                       (2 * unif() - 1) * 3e-9, (2 * unif() - 1) * 3.14159,
                                                       856e6 / 4096, 100, 2048),
                                     0);
            CK(cudaMemcpy((void *)g.coef, coef, (size_t)N * B * sizeof *coef, cudaMemcpyHostToDevice));
            g.coef_version = 8;
            memset(sat, 0, sizeof sat);
            if (cbf_beam_cpu(&bj, msg, sizeof msg))
                fail_msg("CPU: %s", msg);
        }
    }
    if (gain > 1.0) { /* the case is meant to clip: it did */
        uint64_t total = 0;
        for (int b = 0; b < B; b++)
            total += sat[b];
        assert_true(total > 0);
    }
    cudaFree((void *)g.in);
    cudaFree((void *)g.present);
    cudaFree((void *)g.coef);
    cudaFree((void *)g.pol);
    cudaFree(g.out);
    cudaFree(g.saturated);
    cudaFree(gc.accum);
    cbf_corr_cuda_destroy(plan);
    free(in); free(out); free(gout); free(present); free(pol); free(coef); free(acc); free(gacc);
}

static void test_full_tile(void **st)
{
    (void)st;
    run_case(64, 8, 5, 256, 3, 0, 0.08, "01010101");
}

static void test_absent(void **st)
{
    (void)st;
    run_case(64, 8, 3, 128, 4, 5, 0.08, NULL);
}

static void test_part_tile(void **st)
{
    (void)st;
    run_case(40, 5, 7, 192, 2, 3, 0.1, "11111");
}

static void test_mixed_tile(void **st)
{
    (void)st;
    run_case(64, 8, 4, 256, 2, 2, 0.08, "00000011");
    run_case(64, 7, 3, 64, 3, 0, 0.08, "0000000");
}

static void test_saturation(void **st)
{
    (void)st;
    run_case(24, 3, 2, 64, 5, 0, 4.0, "000");
}

/* without dither: one-pol n-tiles and mixed ones, clipping too */
static void test_no_dither(void **st)
{
    (void)st;
    dither = 0;
    run_case(64, 8, 3, 256, 3, 2, 0.08, "01010101");
    run_case(64, 8, 2, 128, 2, 0, 4.0, "00000011");
    dither = 1;
}

int main(void)
{
    char why[256];
    if (!cbf_test_gpu_available(why, sizeof why)) {
        printf("test_xb: skipped: %s\n", why);
        return 77;
    }
    int dev, major = 0, minor = 0;
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess)
        hopper = major == 9 && minor == 0;
    rng_state = cbf_test_seed("CBF_TEST_STATE", hopper ? "test_xb (Hopper: the one-kernel path must run)"
                                                       : "test_xb (not Hopper: two kernels)");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_tile),
        cmocka_unit_test(test_absent),
        cmocka_unit_test(test_part_tile),
        cmocka_unit_test(test_mixed_tile),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_no_dither),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
