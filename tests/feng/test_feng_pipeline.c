/* test_feng_pipeline.c: dsim -> pfb -> fft_post through the real loader and
 * engine, output captured by the feng_capture test sink. Checks that the
 * output does not depend on the input chunk size, that a tone lands in its
 * channel, that a missing heap flags exactly the batches whose windows used
 * it, and (with --gpu; exit 77 without a GPU) that the GPU pipeline matches
 * the CPU one to 1 LSB on >= 99.9% of values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbf/cbf.h"
#include "cbf/graph.h"
#include "capture_read.h"
#include "feng_run.h"

#define N_CH 1024
#define STEP (2 * N_CH)
#define TAPS 16
#define SPB 64          /* spectra per pfb buffer */
#define SPH 32          /* spectra per heap */
#define TONE_CH 100
#define LENGTH 4194304

static char dir[256];

/* Writes and runs a pipeline; the capture goes to dir/<name>.raw. */
static void run_pipeline(const char *name, const char *gpu, long spc, const char *missing,
                         const char *missing_inputs)
{
    char yaml[256], out[256], text[4096];
    snprintf(yaml, sizeof yaml, "%s/%s.yaml", dir, name);
    snprintf(out, sizeof out, "%s/%s.raw", dir, name);
    snprintf(text, sizeof text,
             "engine: {gpu: %s}\n"
             "nodes:\n"
             "  dsim:\n"
             "    plugin: dsim\n"
             "    params: {antennas: 2, bits: 10, samples_per_chunk: %ld, length: %d, noise: 0.05,\n"
             "             tones: [{frequency: %.6f, amplitude: 0.3}],\n"
             "             missing: %s, missing_inputs: %s}\n"
             "  pfb:\n"
             "    plugin: pfb\n"
             "    params: {channels: %d, taps: %d, antenna: 1, spectra_per_buffer: %d}\n"
             "  post:\n"
             "    plugin: fft_post\n"
             "    params: {spectra_per_heap: %d, gain: [0.02, 0.005]}\n"
             "  cap:\n"
             "    plugin: feng_capture\n"
             "    params: {path: %s}\n"
             "edges:\n"
             "  - dsim.out -> pfb.in\n"
             "  - pfb.out -> post.in\n"
             "  - post.out -> cap.in\n",
             gpu, spc, LENGTH, 1712e6 / STEP * TONE_CH, missing, missing_inputs, N_CH, TAPS,
             SPB, SPH, out);
    FILE *f = fopen(yaml, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    char here[512];
    snprintf(here, sizeof here, "%s/tests/feng", getenv("CBF_BUILD_ROOT") ? getenv("CBF_BUILD_ROOT") : ".");
    const char *dirs[] = {here};
    cbf_registry *r = NULL;
    cbf_graph *g = NULL;
    cbf_engine *e = NULL;
    cbf_error err = {0};
    int rc = cbf_registry_open(dirs, 1, &r, &err);
    if (!rc)
        rc = cbf_graph_load(yaml, NULL, 0, r, &g, &err);
    if (!rc)
        rc = cbf_engine_create(g, &e, &err);
    if (!rc)
        rc = cbf_engine_run(e, &err);
    if (rc)
        fail_msg("%s: %s", name, err.msg);
    cbf_engine_free(e);
    cbf_graph_free(g);
    cbf_registry_close(r);
}

static void load(const char *name, capture *c)
{
    char path[300];
    snprintf(path, sizeof path, "%s/%s.raw", dir, name);
    read_capture(path, c);
    assert_true(c->n >= 8);
}

static void test_chunk_size(void **state)
{
    (void)state;
    run_pipeline("small_chunks", "none", 65536, "[]", "[]");
    run_pipeline("large_chunks", "none", 1048576, "[]", "[]");
    capture a, b;
    load("small_chunks", &a);
    load("large_chunks", &b);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.b[i].ts, b.b[i].ts);
        assert_int_equal(a.b[i].ts, (int64_t)(i * SPB * STEP));
        assert_memory_equal(a.b[i].present, b.b[i].present, a.b[i].np);
        assert_memory_equal(a.b[i].aux, b.b[i].aux, a.b[i].as);
        assert_memory_equal(a.b[i].data, b.b[i].data, a.b[i].bytes);
    }
    free_capture(&a);
    free_capture(&b);
}

static void test_tone_channel(void **state)
{
    (void)state;
    capture a;
    load("large_chunks", &a);
    for (size_t i = 0; i < a.n; i++) {
        const int8_t *d = (const int8_t *)a.b[i].data;
        for (int t = 0; t < SPB; t += 7)
            for (int pol = 0; pol < 2; pol++) {
                int best = -1;
                double bmag = -1;
                for (int k = 0; k < N_CH; k++) {
                    size_t idx = (((size_t)(t / SPH) * N_CH + (size_t)k) * SPH + (size_t)(t % SPH)) * 2 + (size_t)pol;
                    double mag = hypot(d[2 * idx], d[2 * idx + 1]);
                    if (mag > bmag) {
                        bmag = mag;
                        best = k;
                    }
                }
                if (best != TONE_CH || bmag < 40)
                    fail_msg("buffer %zu spectrum %d pol %d: peak %.1f in channel %d", i, t, pol,
                             bmag, best);
            }
        /* Power comes through fft_post's aux after the saturation counts. */
        uint64_t aux[4];
        memcpy(aux, a.b[i].aux, sizeof aux);
        assert_true(aux[2] > 0 && aux[3] > 0);
    }
    free_capture(&a);
}

static void test_missing_heap(void **state)
{
    (void)state;
    const long heap = 300;   /* samples 1228800 .. 1232895 */
    /* Input 2 is antenna 1, pol 0 (the one channelised); input 0 is antenna 0. */
    run_pipeline("missing_used", "none", 262144, "[300]", "[2]");
    run_pipeline("missing_other", "none", 262144, "[300]", "[0]");
    capture a, b;
    load("missing_used", &a);
    load("missing_other", &b);
    size_t flagged = 0;
    for (size_t i = 0; i < a.n; i++) {
        for (uint64_t bt = 0; bt < a.b[i].np; bt++) {
            int expect = 1;
            for (int t = 0; t < SPH; t++) {
                long g = (long)(i * SPB + bt * SPH + (uint64_t)t), lo = g * STEP;
                if (lo < (heap + 1) * 4096 && lo + (long)STEP * TAPS > heap * 4096)
                    expect = 0;
            }
            if (a.b[i].present[bt] != expect)
                fail_msg("buffer %zu batch %llu: present %d, expected %d", i,
                         (unsigned long long)bt, a.b[i].present[bt], expect);
            flagged += !expect;
            assert_int_equal(b.b[i].present[bt], 1);
        }
    }
    assert_true(flagged >= 1);
    free_capture(&a);
    free_capture(&b);
}

static void test_gpu_matches_cpu(void **state)
{
    (void)state;
    run_pipeline("gpu", "required", 1048576, "[300]", "[3]");
    run_pipeline("cpu", "none", 1048576, "[300]", "[3]");
    capture a, b;
    load("gpu", &a);
    load("cpu", &b);
    assert_int_equal(a.n, b.n);
    size_t n = 0, same = 0;
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.b[i].ts, b.b[i].ts);
        assert_memory_equal(a.b[i].present, b.b[i].present, a.b[i].np);
        /* Power sums are exact integers on both paths. */
        assert_memory_equal(a.b[i].aux + 16, b.b[i].aux + 16, 16);
        for (uint64_t j = 0; j < a.b[i].bytes; j++) {
            int d = abs((int8_t)a.b[i].data[j] - (int8_t)b.b[i].data[j]);
            assert_true(d <= 1);
            same += d == 0;
            n++;
        }
    }
    assert_true(same >= n - n / 1000);
    free_capture(&a);
    free_capture(&b);
}

int main(int argc, char **argv)
{
    int gpu = argc > 1 && !strcmp(argv[1], "--gpu");
    if (gpu && !feng_have_gpu()) {
        printf("SKIP: no CUDA GPU here (or built without CUDA)\n");
        return 77;
    }
    snprintf(dir, sizeof dir, "%s/feng-pipeline-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest cpu_tests[] = {
        cmocka_unit_test(test_chunk_size),
        cmocka_unit_test(test_tone_channel),
        cmocka_unit_test(test_missing_heap),
    };
    const struct CMUnitTest gpu_tests[] = {
        cmocka_unit_test(test_gpu_matches_cpu),
    };
    int rc = gpu ? cmocka_run_group_tests(gpu_tests, NULL, NULL)
                 : cmocka_run_group_tests(cpu_tests, NULL, NULL);
    if (!rc) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return rc;
}
