/* filesink read back from C: group layout, shapes, dtypes, timestamps,
 * attributes (descriptor and producer parameters), data equal to the dsim
 * model's packed samples; overwrite refusal, max_buffers, several inputs.
 * Runs the built cbf-run; skips (77) until it exists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <cbf/cbf.h>

#include "dsim_model.h"
#include "pack.h"
#include "pipeline.h"

static char path[512];

static const char *two_sources =
    "engine: {gpu: none}\n"
    "nodes:\n"
    "  a:\n"
    "    plugin: dsim\n"
    "    params: {antennas: 2, bits: 10, samples_per_chunk: 8192, length: 32768, seed: 5,\n"
    "             tones: [{frequency: 300e6, amplitude: 0.25}], noise: 0.1}\n"
    "  b:\n"
    "    plugin: dsim\n"
    "    params: {antennas: 1, bits: 4, samples_per_chunk: 4096, length: 40960, seed: 6,\n"
    "             tones: [], noise: 0.3}\n"
    "  sink:\n"
    "    plugin: filesink\n"
    "    params: {path: %s, overwrite: %s, max_buffers: %d}\n"
    "edges:\n"
    "  - a.out -> sink.in\n"
    "  - {from: b.out, to: sink.in, depth: 2}\n";

static int run_two(const char *name, const char *overwrite, int max_buffers)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml, two_sources, path, overwrite, max_buffers);
    return pl_run(name, yaml);
}

static void check_group(hid_t f, const char *g, int ants, int bits, size_t spc, size_t rows,
                        uint64_t seed, double amp, double freq, double noise)
{
    char obj[128], text[256];
    int rank;
    hsize_t dims[8];
    snprintf(obj, sizeof obj, "/%s/data", g);
    hid_t ds = H5Dopen2(f, obj, H5P_DEFAULT);
    assert_true(ds >= 0);
    hid_t t = H5Dget_type(ds);
    assert_int_equal(H5Tget_class(t), H5T_INTEGER);
    assert_int_equal(H5Tget_size(t), 1);
    assert_int_equal(H5Tget_sign(t), H5T_SGN_NONE);   /* packed bytes as uint8 */
    H5Tclose(t);
    H5Dclose(ds);
    uint8_t *data = pl_read(f, obj, H5T_NATIVE_UINT8, &rank, dims);
    assert_non_null(data);
    const size_t sb = cbf_pack_bytes(spc, bits);
    assert_int_equal(rank, 4);
    assert_int_equal(dims[0], rows);
    assert_int_equal(dims[1], (hsize_t)ants);
    assert_int_equal(dims[2], 2);
    assert_int_equal(dims[3], sb);
    const char *axes[4] = {"time", "antenna", "pol", "byte"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(pl_attr_string(f, obj, "axes", i, text, sizeof text), 0);
        assert_string_equal(text, axes[i]);
    }
    snprintf(obj, sizeof obj, "/%s", g);
    assert_int_equal(pl_attr_string(f, obj, "producer", 0, text, sizeof text), 0);
    assert_string_equal(text, g);
    assert_int_equal(pl_attr_string(f, obj, "producer_plugin", 0, text, sizeof text), 0);
    assert_string_equal(text, "dsim");
    double v;
    assert_int_equal(pl_attr_double(f, obj, "adc_sample_rate", &v), 0);
    assert_true(v == 1712e6);
    assert_int_equal(pl_attr_double(f, obj, "heap_samples", &v), 0);
    assert_true(v == 4096);
    assert_int_equal(pl_attr_double(f, obj, "samples_per_chunk", &v), 0);
    assert_true(v == (double)spc);
    assert_int_equal(pl_attr_double(f, obj, "bits", &v), 0);
    assert_true(v == bits);
    assert_int_equal(pl_attr_double(f, obj, "timestamp_step", &v), 0);
    assert_true(v == (double)spc);
    snprintf(obj, sizeof obj, "/%s/params", g);
    assert_int_equal(pl_attr_string(f, obj, "antennas", 0, text, sizeof text), 0);
    assert_int_equal(atoi(text), ants);
    assert_int_equal(pl_attr_string(f, obj, "seed", 0, text, sizeof text), 0);
    assert_int_equal(strtoull(text, NULL, 10), seed);

    snprintf(obj, sizeof obj, "/%s/timestamp", g);
    int64_t *ts = pl_read(f, obj, H5T_NATIVE_INT64, &rank, dims);
    assert_non_null(ts);
    assert_int_equal(rank, 1);
    assert_int_equal(dims[0], rows);
    snprintf(obj, sizeof obj, "/%s/present", g);
    uint8_t *present = pl_read(f, obj, H5T_NATIVE_UINT8, &rank, dims);
    assert_non_null(present);
    assert_int_equal(dims[0], rows);
    assert_int_equal(dims[1], (hsize_t)ants * 2 * spc / 4096);
    snprintf(obj, sizeof obj, "/%s/missing", g);
    uint64_t *missing = pl_read(f, obj, H5T_NATIVE_UINT64, &rank, dims);
    assert_non_null(missing);

    const cbf_dsim_tone tone = {freq, amp, {0, 0}};
    cbf_dsim_config cfg = {.antennas = ants, .adc_sample_rate = 1712e6, .bits = bits,
                           .n_tones = amp > 0, .tones = &tone, .noise = noise, .seed = seed};
    cbf_dsim_model *m;
    assert_int_equal(cbf_dsim_model_create(&cfg, &m, NULL, 0), 0);
    int16_t *want = malloc(spc * sizeof *want);
    uint8_t *packed = malloc(sb);
    for (size_t b = 0; b < rows; b++) {
        assert_int_equal(ts[b], (int64_t)(b * spc));
        assert_int_equal(missing[b], 0);
        for (size_t k = 0; k < dims[1]; k++)
            assert_int_equal(present[b * dims[1] + k], 1);
        for (int a = 0; a < ants; a++)
            for (int p = 0; p < 2; p++) {
                cbf_dsim_model_generate(m, a, p, (int64_t)(b * spc), spc, want);
                assert_int_equal(cbf_pack(want, spc, bits, packed, NULL, 0), 0);
                assert_memory_equal(data + ((b * (size_t)ants + (size_t)a) * 2 + (size_t)p) * sb,
                                    packed, sb);
            }
    }
    free(want);
    free(packed);
    cbf_dsim_model_free(m);
    free(data);
    free(ts);
    free(present);
    free(missing);
}

static void read_back(void **state)
{
    (void)state;
    int rc = run_two("two", "false", 0);
    if (rc)
        fprintf(stderr, "%s", pl_log("two"));
    assert_int_equal(rc, 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    check_group(f, "a", 2, 10, 8192, 4, 5, 0.25, 300e6, 0.1);
    check_group(f, "b", 1, 4, 4096, 10, 6, 0.0, 0.0, 0.3);
    H5Fclose(f);
    /* One info line per dataset says where it wrote and what. */
    assert_non_null(strstr(pl_log("two"), "/a/data [4, 2, 2, 10240]"));
    assert_non_null(strstr(pl_log("two"), "/b/data [10, 1, 2, 2048]"));
}

static void refuses_to_overwrite(void **state)
{
    (void)state;
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    int rc = run_two("again", "false", 0);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(pl_log("again"), "exists"));
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_size, after.st_size);
    assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
    assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
}

static void max_buffers_and_overwrite(void **state)
{
    (void)state;
    assert_int_equal(run_two("max", "true", 3), 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    check_group(f, "a", 2, 10, 8192, 3, 5, 0.25, 300e6, 0.1);
    check_group(f, "b", 1, 4, 4096, 3, 6, 0.0, 0.0, 0.3);
    H5Fclose(f);
}

/* Complex data and aux through the F-engine stages: 4-bit complex (CI4)
 * is stored as int8 (re, im) pairs on a trailing axis. A wrong nibble
 * sign extension would show as values above 7; 4-bit output is symmetric,
 * so -8 never appears either. */
static void complex_ci4_and_aux(void **state)
{
    (void)state;
    char yaml[2048], h5[512], text[64];
    snprintf(h5, sizeof h5, "%s/feng4.h5", pl_tmpdir());
    snprintf(yaml, sizeof yaml,
             "engine: {gpu: none}\n"
             "nodes:\n"
             "  dsim: {plugin: dsim, params: {antennas: 1, samples_per_chunk: 65536,\n"
             "         length: 524288, noise: 0.2, tones: []}}\n"
             "  pfb: {plugin: pfb, params: {channels: 256, taps: 4, spectra_per_buffer: 256}}\n"
             "  fft_post: {plugin: fft_post, params: {out_bits: 4, gain: [0.05, 0.0]}}\n"
             "  sink: {plugin: filesink, params: {path: %s}}\n"
             "edges:\n"
             "  - dsim.out -> pfb.in\n"
             "  - pfb.out -> fft_post.in\n"
             "  - fft_post.out -> sink.in\n",
             h5);
    hid_t f = pl_run_open("feng4", yaml, h5);
    assert_true(f >= 0);
    int rank, arank;
    hsize_t dims[8], adims[8];
    int8_t *v = pl_read(f, "/fft_post/data", H5T_NATIVE_INT8, &rank, dims);
    assert_non_null(v);
    assert_true(rank >= 3);
    assert_true(dims[0] >= 1);
    assert_int_equal(dims[rank - 1], 2);
    assert_int_equal(pl_attr_string(f, "/fft_post/data", "axes", (size_t)rank - 1, text,
                                    sizeof text), 0);
    assert_string_equal(text, "re_im");
    assert_int_equal(pl_attr_string(f, "/fft_post", "dtype", 0, text, sizeof text), 0);
    assert_string_equal(text, cbf_dtype_name(CBF_DTYPE_CI4));
    size_t n = 1, neg = 0, pos = 0;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i] >= -7 && v[i] <= 7);
        neg += v[i] < 0;
        pos += v[i] > 0;
    }
    assert_true(neg > n / 10 && pos > n / 10);
    /* aux: u64 saturated count per pol then u64 power sum per pol */
    uint8_t *aux = pl_read(f, "/fft_post/aux", H5T_NATIVE_UINT8, &arank, adims);
    assert_non_null(aux);
    assert_int_equal(arank, 2);
    assert_int_equal(adims[0], dims[0]);
    assert_int_equal(adims[1], 32);
    uint64_t power;
    memcpy(&power, aux + 16, sizeof power);
    assert_true(power > 0);
    free(aux);
    free(v);
    H5Fclose(f);
}

int main(void)
{
    int rc = pl_setup();
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/sub/dir/two.h5", pl_tmpdir());   /* parents created */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read_back),
        cmocka_unit_test(refuses_to_overwrite),
        cmocka_unit_test(max_buffers_and_overwrite),
        cmocka_unit_test(complex_ci4_and_aux),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
