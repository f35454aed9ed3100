/* test_xeng_pipeline.c: the X-engine through the real cbf-run. fsim feeds
 * the correlator and, by fan-out, the filesink too, so the test reads back
 * both the exact input and the visibilities from the HDF5 file and holds
 * every dump to the int64 reference over the batches whose timestamps fall
 * in it (dumps start at multiples of the interval; the stream does not),
 * with the magic value exactly on the baselines of antennas that missed a
 * batch of that dump. Then pipelines/xeng.yaml itself runs as a user runs it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xeng_ref.h"

static char exe[1024], src_root[1024];

static int run_cbf(const char *yaml_path, const char *set)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (set)
            execl(exe, exe, yaml_path, "--quiet", "--set", set, (char *)NULL);
        else
            execl(exe, exe, yaml_path, "--quiet", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Whole dataset as `type`; dims filled; NULL if absent. */
static void *read_ds(hid_t f, const char *name, hid_t type, size_t elem, int *rank, hsize_t *dims)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return NULL;
    hid_t sp = H5Dget_space(ds);
    *rank = H5Sget_simple_extent_dims(sp, dims, NULL);
    size_t n = 1;
    for (int i = 0; i < *rank; i++)
        n *= dims[i];
    void *p = malloc(n * elem + 1);
    if (H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, p) < 0) {
        free(p);
        p = NULL;
    }
    H5Sclose(sp);
    H5Dclose(ds);
    return p;
}

static const char yaml_fmt[] =
    "engine: {name: xtest, gpu: none}\n"
    "nodes:\n"
    "  fsim:\n"
    "    plugin: fsim\n"
    "    params: {antennas: 5, channels: 6, spectra_per_heap: 32, batches: 7, length: 35,\n"
    "             start: %lld, delays: [0, 2, 4, 6, 8], signal: 40, noise: 20, seed: %d,\n"
    "             missing_antennas: [1, 4], missing_batches: [9, 20], bits: %d}\n"
    "  corr:\n"
    "    plugin: correlator\n"
    "    params: {heap_accumulation_threshold: 3}\n"
    "  reduce:\n"
    "    plugin: reducer\n"
    "  sink:\n"
    "    plugin: filesink\n"
    "    params: {path: %s, overwrite: true}\n"
    "edges:\n"
    "  - fsim.out -> corr.in\n"
    "  - corr.out -> reduce.in\n"
    "  - reduce.out -> sink.in\n"
    "  - fsim.out -> sink.in\n";

/* bits: fsim's output width. filesink widens CI4 to int8 pairs, which is
 * the CI8 layout the reference reads, with values in [-7, 7]. */
static void against_reference(int bits)
{
    char yaml[256], h5[256], text[2048];
    snprintf(yaml, sizeof yaml, "/tmp/xeng-pipe-%d.yaml", (int)getpid());
    snprintf(h5, sizeof h5, "/tmp/xeng-pipe-%d.h5", (int)getpid());
    const int ants = 5, ch = 6, sph = 32, hat = 3;
    const int64_t step = (int64_t)sph * 2 * ch, start = 1000 * hat * step + step + 17;
    snprintf(text, sizeof text, yaml_fmt, (long long)start, (int)(getpid() % 1000), bits, h5);
    FILE *fp = fopen(yaml, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(run_cbf(yaml, NULL), 0);

    hid_t f = H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    int rank;
    hsize_t d[8], dv[8], dp[8], dt[8];
    int8_t *in = read_ds(f, "/fsim/data", H5T_NATIVE_INT8, 1, &rank, d);
    assert_non_null(in);
    assert_int_equal(rank, 7); /* time, batch, antenna, channel, spectrum, pol, re_im */
    uint8_t *pres = read_ds(f, "/fsim/present", H5T_NATIVE_UINT8, 1, &rank, dp);
    int32_t *vis = read_ds(f, "/reduce/data", H5T_NATIVE_INT32, 4, &rank, dv);
    int64_t *vts = read_ds(f, "/reduce/timestamp", H5T_NATIVE_INT64, 8, &rank, dt);
    assert_non_null(pres);
    assert_non_null(vis);
    assert_non_null(vts);
    H5Fclose(f);
    const size_t batches = d[0] * d[1];
    assert_int_equal(batches, 35);
    cbf_corr_shape s = {ants, ch, sph, 8};
    const size_t len = cbf_corr_accum_len(&s), per_dump = len; /* int32 values per dump */
    const int64_t interval = hat * step;
    /* stream batch k starts at start + k step; dumps at multiples of interval */
    const int64_t first_dump = start / interval, last_ts = start + (int64_t)(batches - 1) * step;
    const int64_t complete_last = (last_ts + step) / interval - 1; /* last dump whose end arrived */
    assert_int_equal(dv[0], (hsize_t)(complete_last - first_dump + 1));
    int32_t *want = malloc(len * sizeof(int32_t));
    size_t magic_dumps = 0;
    for (size_t k = 0; k < dv[0]; k++) {
        const int64_t dump = first_dump + (int64_t)k;
        assert_int_equal(vts[k], dump * interval);
        uint8_t bad[5] = {0};
        size_t b0 = batches, b1 = 0, seen = 0;
        for (size_t b = 0; b < batches; b++) {
            int64_t ts = start + (int64_t)b * step;
            if (ts < dump * interval || ts >= (dump + 1) * interval)
                continue;
            b0 = b < b0 ? b : b0;
            b1 = b + 1;
            seen++;
            for (int a = 0; a < ants; a++)
                bad[a] |= !pres[b * ants + a];
        }
        if (seen != (size_t)hat)
            memset(bad, 1, sizeof bad);
        magic_dumps += bad[1] || bad[4];
        int64_t *ref = xeng_ref_correlate(&s, (const uint8_t *)in, b0, b1);
        xeng_ref_reduce(ants, ch, ref, bad, want);
        for (size_t i = 0; i < len; i++)
            if (vis[k * per_dump + i] != want[i])
                fail_msg("dump %zu value %zu: got %d want %d", k, i, vis[k * per_dump + i],
                         want[i]);
        free(ref);
    }
    /* the partial first dump and the dumps holding batches 9 and 20 */
    assert_int_equal(magic_dumps, 3);
    free(in);
    free(pres);
    free(vis);
    free(vts);
    free(want);
    unlink(yaml);
    unlink(h5);
}

static void test_against_reference(void **state)
{
    (void)state;
    against_reference(8);
}

static void test_against_reference_4bit(void **state)
{
    (void)state;
    against_reference(4);
}

/* pipelines/xeng.yaml as shipped: 12 dumps; dump 0 (partial) all magic,
 * dump 3 magic on antenna 3's baselines only, the rest data. */
static void test_shipped_pipeline(void **state)
{
    (void)state;
    char yaml[1100], h5[256], set[300];
    snprintf(yaml, sizeof yaml, "%s/pipelines/xeng.yaml", src_root);
    snprintf(h5, sizeof h5, "/tmp/xeng-shipped-%d.h5", (int)getpid());
    snprintf(set, sizeof set, "sink.path=%s", h5);
    assert_int_equal(run_cbf(yaml, set), 0);
    hid_t f = H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    int rank;
    hsize_t dv[8];
    int32_t *vis = read_ds(f, "/reduce/data", H5T_NATIVE_INT32, 4, &rank, dv);
    H5Fclose(f);
    assert_non_null(vis);
    assert_int_equal(dv[0], 12);
    const size_t nbl = 10, per = dv[1] * dv[2] * dv[3];
    for (size_t k = 0; k < dv[0]; k++)
        for (size_t c = 0; c < dv[1]; c++)
            for (size_t bl = 0; bl < nbl; bl++) {
                int a2 = bl >= 6 ? 3 : bl >= 3 ? 2 : bl >= 1 ? 1 : 0;
                int a1 = (int)bl - a2 * (a2 + 1) / 2;
                int expect = k == 0 || (k == 3 && (a1 == 3 || a2 == 3));
                const int32_t *v = vis + k * per + (c * nbl + bl) * 8;
                for (int p = 0; p < 4; p++) {
                    int magic = v[2 * p] == INT32_MIN && v[2 * p + 1] == 1;
                    if (magic != expect)
                        fail_msg("dump %zu channel %zu baseline %zu: magic %d, expected %d", k, c,
                                 bl, magic, expect);
                }
            }
    free(vis);
    unlink(h5);
}

int main(void)
{
    const char *b = getenv("CBF_BUILD_ROOT"), *sr = getenv("CBF_SOURCE_ROOT");
    if (!b || !sr) {
        printf("test_xeng_pipeline: skipped: CBF_BUILD_ROOT / CBF_SOURCE_ROOT not set\n");
        return 77;
    }
    snprintf(exe, sizeof exe, "%s/tools/cbf-run", b);
    snprintf(src_root, sizeof src_root, "%s", sr);
    if (access(exe, X_OK)) {
        printf("test_xeng_pipeline: skipped: no cbf-run at %s\n", exe);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_against_reference_4bit),
        cmocka_unit_test(test_shipped_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
