/* dsim through the real cbf-run and filesink: the samples on the wire
 * equal the signal model's for every chunk size, missing heaps are flagged
 * exactly, saturation is counted exactly. Skips (77) until cbf-run exists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dsim_model.h"
#include "pack.h"
#include "pipeline.h"

#define ANTS 2

static const char *yaml_fmt =
    "engine: {gpu: none}\n"
    "nodes:\n"
    "  dsim:\n"
    "    plugin: dsim\n"
    "    params: {antennas: %d, bits: %d, samples_per_chunk: %zu, length: %zu, seed: 77,\n"
    "             tones: [{frequency: 100.3e6, amplitude: %g, phase_x: 0.5, phase_y: 2.0}],\n"
    "             noise: %g, common_noise: 0.03, delays: [0.0, 9.75],\n"
    "             missing: [%s], missing_inputs: [%s], threads: %d, start: %lld}\n"
    "  sink:\n"
    "    plugin: filesink\n"
    "    params: {path: %s, overwrite: true}\n"
    "edges:\n"
    "  - dsim.out -> sink.in\n";

typedef struct run {
    size_t spc, length, n_buffers, n_flags;
    int64_t start;
    uint8_t *data, *present;
    int64_t *timestamp;
    uint64_t *saturated, *missing;
} run;

static run do_run(const char *name, int bits, size_t spc, size_t length, double amp,
                  double noise, const char *missing, const char *inputs, int threads,
                  long long start)
{
    char yaml[2048], path[512];
    snprintf(path, sizeof path, "%s/%s.h5", pl_tmpdir(), name);
    snprintf(yaml, sizeof yaml, yaml_fmt, ANTS, bits, spc, length, amp, noise, missing, inputs,
             threads, start, path);
    hid_t f = pl_run_open(name, yaml, path);
    assert_true(f >= 0);
    run r = {.spc = spc, .length = length, .start = start};
    int rank;
    hsize_t dims[8];
    r.data = pl_read(f, "/dsim/data", H5T_NATIVE_UINT8, &rank, dims);
    assert_non_null(r.data);
    assert_int_equal(rank, 4);
    assert_int_equal(dims[0], length / spc);
    assert_int_equal(dims[1], ANTS);
    assert_int_equal(dims[2], 2);
    assert_int_equal(dims[3], cbf_pack_bytes(spc, bits));
    r.n_buffers = dims[0];
    r.present = pl_read(f, "/dsim/present", H5T_NATIVE_UINT8, &rank, dims);
    assert_non_null(r.present);
    assert_int_equal(dims[1], ANTS * 2 * spc / 4096);
    r.n_flags = dims[1];
    r.timestamp = pl_read(f, "/dsim/timestamp", H5T_NATIVE_INT64, &rank, dims);
    r.saturated = pl_read(f, "/dsim/saturated", H5T_NATIVE_UINT64, &rank, dims);
    r.missing = pl_read(f, "/dsim/missing", H5T_NATIVE_UINT64, &rank, dims);
    assert_true(r.timestamp && r.saturated && r.missing);
    for (size_t b = 0; b < r.n_buffers; b++)
        assert_int_equal(r.timestamp[b], start + (int64_t)(b * spc));
    H5Fclose(f);
    return r;
}

static void free_run(run *r)
{
    free(r->data);
    free(r->present);
    free(r->timestamp);
    free(r->saturated);
    free(r->missing);
}

/* Decoded samples of one (antenna, pol) over the whole run. */
static int16_t *decode(const run *r, int bits, int a, int p)
{
    const size_t sb = cbf_pack_bytes(r->spc, bits);
    int16_t *v = malloc(r->length * sizeof *v);
    assert_non_null(v);
    for (size_t b = 0; b < r->n_buffers; b++)
        assert_int_equal(cbf_unpack(r->data + ((b * ANTS + (size_t)a) * 2 + (size_t)p) * sb,
                                    r->spc, bits, v + b * r->spc, NULL, 0), 0);
    return v;
}

static cbf_dsim_model *model(int bits, double amp, double noise)
{
    const cbf_dsim_tone tone = {100.3e6, amp, {0.5, 2.0}};
    const double delays[ANTS] = {0.0, 9.75};
    cbf_dsim_config cfg = {.antennas = ANTS, .adc_sample_rate = 1712e6, .bits = bits,
                           .n_tones = 1, .tones = &tone, .noise = noise, .common_noise = 0.03,
                           .delays = delays, .seed = 77};
    cbf_dsim_model *m;
    assert_int_equal(cbf_dsim_model_create(&cfg, &m, NULL, 0), 0);
    return m;
}

static void chunk_sizes_identical(void **state)
{
    (void)state;
    const size_t total = (size_t)1 << 21, spcs[3] = {4096, 65536, (size_t)1 << 20};
    cbf_dsim_model *m = model(10, 0.3, 0.1);
    int16_t *want = malloc(total * sizeof *want);
    for (int c = 0; c < 3; c++) {
        char name[32];
        snprintf(name, sizeof name, "chunk%zu", spcs[c]);
        /* threads deal out streams differently; the output must not change */
        run r = do_run(name, 10, spcs[c], total, 0.3, 0.1, "", "", c == 1 ? 3 : 1, 0);
        for (int a = 0; a < ANTS; a++)
            for (int p = 0; p < 2; p++) {
                cbf_dsim_model_generate(m, a, p, 0, total, want);
                int16_t *got = decode(&r, 10, a, p);
                assert_memory_equal(got, want, total * sizeof *got);
                free(got);
            }
        for (size_t i = 0; i < r.n_buffers * r.n_flags; i++)
            assert_int_equal(r.present[i], 1);
        free_run(&r);
    }
    free(want);
    cbf_dsim_model_free(m);
}

/* missing: [6, 9] on inputs 1 and 2 (antenna 0 pol y, antenna 1 pol x),
 * with 4 heaps per chunk and start = 4 heaps: heap indices count from
 * sample 0, so heap 6 is in buffer 0 (heap 2 of it), heap 9 in buffer 1. */
static void missing_heaps_flagged(void **state)
{
    (void)state;
    const size_t spc = 4 * 4096, heaps = 4;
    run r = do_run("missing", 10, spc, 3 * spc, 0.3, 0.1, "6, 9", "1, 2", 2, 4 * 4096);
    const size_t hb = cbf_pack_bytes(4096, 10);
    cbf_dsim_model *m = model(10, 0.3, 0.1);
    int16_t want[4096];
    uint8_t packed[5120];
    for (size_t b = 0; b < r.n_buffers; b++) {
        uint64_t count = 0;
        for (size_t in = 0; in < 2 * ANTS; in++)
            for (size_t h = 0; h < heaps; h++) {
                const size_t heap = 4 + b * heaps + h;
                const int gone = (in == 1 || in == 2) && (heap == 6 || heap == 9);
                assert_int_equal(r.present[b * r.n_flags + in * heaps + h], !gone);
                count += (uint64_t)gone;
                const uint8_t *d = r.data + (b * 2 * ANTS + in) * heaps * hb + h * hb;
                if (gone) {   /* no data arrived: the bytes are zero */
                    for (size_t k = 0; k < hb; k++)
                        assert_int_equal(d[k], 0);
                } else {      /* the model's samples at the absolute time */
                    cbf_dsim_model_generate(m, (int)in / 2, (int)in % 2, (int64_t)heap * 4096,
                                            4096, want);
                    assert_int_equal(cbf_pack(want, 4096, 10, packed, NULL, 0), 0);
                    assert_memory_equal(d, packed, hb);
                }
            }
        assert_int_equal(r.missing[b], count);
    }
    cbf_dsim_model_free(m);
    free_run(&r);
}

static void saturation_counted(void **state)
{
    (void)state;
    const size_t spc = 65536, total = 4 * spc;
    run r = do_run("saturate", 8, spc, total, 1.6, 0.02, "", "", 1, 0);
    cbf_dsim_model *m = model(8, 1.6, 0.02);
    int16_t *v = malloc(spc * sizeof *v);
    uint64_t sum = 0;
    for (size_t b = 0; b < r.n_buffers; b++) {
        uint64_t want = 0;
        for (int a = 0; a < ANTS; a++)
            for (int p = 0; p < 2; p++) {
                /* the model's count is checked against the formula in test_dsim_model */
                want += cbf_dsim_model_generate(m, a, p, (int64_t)(b * spc), spc, v);
            }
        assert_int_equal(r.saturated[b], want);
        sum += want;
    }
    assert_true(sum > total / 2);   /* an overdriven tone really clips */
    free(v);
    free_run(&r);
    cbf_dsim_model_free(m);
}

int main(void)
{
    int rc = pl_setup();
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunk_sizes_identical),
        cmocka_unit_test(missing_heaps_flagged),
        cmocka_unit_test(saturation_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
