/* test_xeng_pipeline.c: the X-engine through the real cbf-run. A source
 * (fsim, or the demo's gather) feeds the correlator and, by fan-out, the
 * filesink too, so the test reads back both the exact input and the
 * visibilities from one HDF5 file and holds every dump to the int64
 * reference over the batches whose timestamps fall in it (dumps start at
 * multiples of the interval; the streams here do not), with the magic value
 * exactly on the baselines of antennas that missed a batch of that dump and
 * the saturation counts equal to the reference's. Then pipelines/xeng.yaml
 * runs as a user runs it.
 *
 * `test_xeng_pipeline` runs every graph with `gpu: none`;
 * `test_xeng_pipeline --gpu` with `gpu: required` (the CUDA correlator and
 * reducer), exits 77 without a GPU, and also compares pipelines/xeng.yaml's
 * output with a CPU run of it byte for byte. */
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

#include "pipeline.h"   /* pl_read */
#include "xeng_ref.h"
#include "xeng_run.h"

static char exe[1024], src_root[1024];
static int use_gpu;

static const char *gpu_mode(void) { return use_gpu ? "required" : "none"; }

/* cbf-run yaml_path --quiet [--set s]...; sets NULL-terminated. */
static int run_cbf(const char *yaml_path, const char *const *sets)
{
    const char *argv[32] = {exe, yaml_path, "--quiet"};
    int n = 3;
    for (; sets && *sets && n < 29; sets++) {
        argv[n++] = "--set";
        argv[n++] = *sets;
    }
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

typedef struct seen {
    size_t dumps;         /* visibility dumps checked */
    size_t partial_magic; /* dumps with some antennas flagged, not all */
    uint64_t saturated;   /* reference saturation count over all dumps */
} seen;

/* Holds /reduce of `h5` to the reference computed from /<src> (the
 * X-engine input recorded by fan-out). hat: batches per dump. Batch step
 * 2 x channels x spectra_per_heap (wideband). CI4 input was widened to
 * int8 pairs by filesink: the CI8 layout the reference reads. */
static seen check_file(const char *h5, const char *src, int hat)
{
    char name[128];
    hid_t f = H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    int rank;
    hsize_t d[8], dv[8], dp[8], dt[8], dit[8], ds[8];
    snprintf(name, sizeof name, "/%s/data", src);
    int8_t *in = pl_read(f, name, H5T_NATIVE_INT8, &rank, d);
    assert_non_null(in);
    assert_int_equal(rank, 7); /* time, batch, antenna, channel, spectrum, pol, re_im */
    snprintf(name, sizeof name, "/%s/present", src);
    uint8_t *pres = pl_read(f, name, H5T_NATIVE_UINT8, &rank, dp);
    snprintf(name, sizeof name, "/%s/timestamp", src);
    int64_t *its = pl_read(f, name, H5T_NATIVE_INT64, &rank, dit);
    int32_t *vis = pl_read(f, "/reduce/data", H5T_NATIVE_INT32, &rank, dv);
    int64_t *vts = pl_read(f, "/reduce/timestamp", H5T_NATIVE_INT64, &rank, dt);
    uint64_t *vsat = pl_read(f, "/reduce/saturated", H5T_NATIVE_UINT64, &rank, ds);
    H5Fclose(f);
    assert_non_null(pres);
    assert_non_null(its);
    assert_non_null(vis);
    assert_non_null(vts);
    assert_non_null(vsat);
    const size_t per_buf = d[1], batches = d[0] * d[1];
    const int ants = (int)d[2], ch = (int)d[3], sph = (int)d[4];
    cbf_corr_shape s = {ants, ch, sph, 8};
    const size_t len = cbf_corr_accum_len(&s); /* int32 values per dump */
    assert_int_equal(dv[1] * dv[2] * dv[3], len);
    const int64_t step = (int64_t)sph * 2 * ch, interval = hat * step;
    int64_t *ts = malloc(batches * sizeof *ts);
    for (size_t b = 0; b < batches; b++)
        ts[b] = its[b / per_buf] + (int64_t)(b % per_buf) * step;
    /* dumps from the one holding the first batch to the last whose end arrived */
    const int64_t first_dump = ts[0] / interval;
    const int64_t complete_last = (ts[batches - 1] + step) / interval - 1;
    assert_int_equal(dv[0], (hsize_t)(complete_last - first_dump + 1));
    int32_t *want = malloc(len * sizeof(int32_t));
    uint8_t *bad = malloc((size_t)ants);
    seen r = {dv[0], 0, 0};
    for (size_t k = 0; k < dv[0]; k++) {
        const int64_t dump = first_dump + (int64_t)k;
        assert_int_equal(vts[k], dump * interval);
        memset(bad, 0, (size_t)ants);
        size_t b0 = batches, b1 = 0, nseen = 0;
        for (size_t b = 0; b < batches; b++) {
            if (ts[b] < dump * interval || ts[b] >= (dump + 1) * interval)
                continue;
            b0 = b < b0 ? b : b0;
            b1 = b + 1;
            nseen++;
            for (int a = 0; a < ants; a++)
                bad[a] |= !pres[b * (size_t)ants + a];
        }
        assert_true(b1 - b0 == nseen || nseen == 0); /* no gaps in these streams */
        if (nseen != (size_t)hat)
            memset(bad, 1, (size_t)ants);
        size_t nbad = 0;
        for (int a = 0; a < ants; a++)
            nbad += bad[a];
        r.partial_magic += nbad && nbad < (size_t)ants;
        int64_t *ref = xeng_ref_correlate(&s, (const uint8_t *)in, b0, b0 + nseen);
        uint64_t sat = xeng_ref_reduce(ants, ch, ref, bad, want);
        r.saturated += sat;
        assert_int_equal(vsat[k], sat);
        for (size_t i = 0; i < len; i++)
            if (vis[k * len + i] != want[i])
                fail_msg("%s dump %zu value %zu: got %d want %d", h5, k, i, vis[k * len + i],
                         want[i]);
        free(ref);
    }
    free(in);
    free(pres);
    free(its);
    free(vis);
    free(vts);
    free(vsat);
    free(ts);
    free(want);
    free(bad);
    return r;
}

/* Besides the parameters: extra engine settings after gpu, extra nodes
 * after the filesink, the node feeding the correlator, extra edges. */
static const char yaml_fmt[] =
    "engine: {name: xtest, gpu: %s%s}\n"
    "nodes:\n"
    "  fsim:\n"
    "    plugin: fsim\n"
    "    params: {antennas: %d, channels: %d, spectra_per_heap: %d, batches: %d, length: %d,\n"
    "             start: %lld, delays: %s, signal: %g, noise: %g, seed: %d,\n"
    "             missing_antennas: %s, missing_batches: %s, bits: %d}\n"
    "  corr:\n"
    "    plugin: correlator\n"
    "    params: {heap_accumulation_threshold: %d, slices: %d}\n"
    "  reduce:\n"
    "    plugin: reducer\n"
    "  sink:\n"
    "    plugin: filesink\n"
    "    params: {path: %s, overwrite: true}\n"
    "%s"
    "edges:\n"
    "  - %s -> corr.in\n"
    "  - corr.out -> reduce.in\n"
    "  - reduce.out -> sink.in\n"
    "  - fsim.out -> sink.in\n"
    "%s";

typedef struct pcase {
    int ants, ch, sph, batches, length, hat, bits;
    int slices;                        /* correlator slices (GPU; 0 = auto) */
    double signal, noise;
    const char *missing_ants, *missing_batches;
    int partial_magic;                 /* dumps with some antennas flagged, -1: any */
    int saturates;                     /* the reference must clamp something */
    int to_device;                     /* fsim -> xeng_to_device -> correlator (GPU only) */
} pcase;

/* The first timestamp lies on neither a dump nor a batch boundary. */
static void against_reference(const pcase *c)
{
    char yaml[256], h5[256], delays[1024], text[4096];
    snprintf(yaml, sizeof yaml, "/tmp/xeng-pipe-%d.yaml", (int)getpid());
    snprintf(h5, sizeof h5, "/tmp/xeng-pipe-%d.h5", (int)getpid());
    const int64_t step = (int64_t)c->sph * 2 * c->ch, start = 1000 * c->hat * step + step + 17;
    size_t at = (size_t)snprintf(delays, sizeof delays, "[");
    for (int a = 0; a < c->ants; a++)
        at += (size_t)snprintf(delays + at, sizeof delays - at, "%s%d", a ? ", " : "", 2 * a);
    snprintf(delays + at, sizeof delays - at, "]");
    const int seed = (int)(getpid() % 1000);
    printf("# %d antennas, %d channels, %d-bit, %s, seed %d\n", c->ants, c->ch, c->bits,
           gpu_mode(), seed);
    char engine[1200] = "";
    if (c->to_device)
        snprintf(engine, sizeof engine, ", plugin_path: %s/tests/xeng", getenv("CBF_BUILD_ROOT"));
    snprintf(text, sizeof text, yaml_fmt, gpu_mode(), engine, c->ants, c->ch, c->sph, c->batches,
             c->length, (long long)start, delays, c->signal, c->noise, seed, c->missing_ants,
             c->missing_batches, c->bits, c->hat, c->slices, h5,
             c->to_device ? "  todev:\n    plugin: xeng_to_device\n" : "",
             c->to_device ? "todev.out" : "fsim.out",
             c->to_device ? "  - fsim.out -> todev.in\n" : "");
    FILE *fp = fopen(yaml, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(run_cbf(yaml, NULL), 0);
    seen r = check_file(h5, "fsim", c->hat);
    assert_true(r.dumps >= 2);
    if (c->partial_magic >= 0)
        assert_int_equal(r.partial_magic, c->partial_magic);
    if (c->saturates)
        assert_true(r.saturated > 0);
    else
        assert_int_equal(r.saturated, 0);
    unlink(yaml);
    unlink(h5);
}

/* 5 antennas, dumps of 3 batches in buffers of 7; antennas 1 and 4 miss
 * batches 9 and 20: the partial first dump and those two dumps are magic. */
static const pcase base = {5, 6, 32, 7, 35, 3, 8, 0, 40, 20, "[1, 4]", "[9, 20]", 2, 0, 0};

static void test_against_reference(void **state)
{
    (void)state;
    against_reference(&base);
}

static void test_against_reference_4bit(void **state)
{
    (void)state;
    pcase c = base;
    c.bits = 4;
    c.signal = 3;
    c.noise = 2;
    against_reference(&c);
}

/* Three accumulator slices (the GPU sums them; the CPU has one). */
static void test_slices(void **state)
{
    (void)state;
    pcase c = base;
    c.slices = 3;
    c.hat = 5;
    against_reference(&c);
}

/* 65 antennas: past one 64-antenna tile, missing at both ends. */
static void test_65_antennas(void **state)
{
    (void)state;
    pcase c = {65, 2, 32, 4, 16, 3, 8, 0, 40, 20, "[0, 64]", "[5]", 1, 0, 0};
    against_reference(&c);
}

/* 1024 channels, 4-bit. */
static void test_many_channels(void **state)
{
    (void)state;
    pcase c = {3, 1024, 32, 2, 8, 3, 4, 0, 3, 2, "[]", "[]", 0, 0, 0};
    against_reference(&c);
}

/* Full-scale common signal over 131072 spectra per dump: the
 * autocorrelations pass 2^31 and clamp, and the counts agree. */
static void test_saturation(void **state)
{
    (void)state;
    pcase c = {2, 1, 32768, 1, 14, 4, 8, 0, 1000, 0, "[]", "[]", 0, 1, 0};
    against_reference(&c);
}

/* Device-memory input: fsim's batches copied to the GPU by the test plugin
 * xeng_to_device, upload left in flight (GPU only). */
static void test_device_input(void **state)
{
    (void)state;
    if (!use_gpu)
        skip();
    pcase c = base;
    c.to_device = 1;
    against_reference(&c);
}

/* The demo graph (dsim, 4 F-engines, gather) with the gather's output
 * recorded too, shortened to two dumps of 3 batches. */
static void test_demo(void **state)
{
    (void)state;
    char yaml[256], h5[256], src[1100], gpu[64], path[300];
    snprintf(src, sizeof src, "%s/pipelines/demo.yaml", src_root);
    snprintf(yaml, sizeof yaml, "/tmp/xeng-demo-%d.yaml", (int)getpid());
    snprintf(h5, sizeof h5, "/tmp/xeng-demo-%d.h5", (int)getpid());
    FILE *in = fopen(src, "r"), *out = fopen(yaml, "w");
    assert_non_null(in);
    assert_non_null(out);
    char line[512];
    while (fgets(line, sizeof line, in))
        fputs(line, out);
    fputs("  - gather.out -> sink.in\n", out); /* edges is the last section */
    fclose(in);
    fclose(out);
    snprintf(gpu, sizeof gpu, "engine.gpu=%s", gpu_mode());
    snprintf(path, sizeof path, "sink.path=%s", h5);
    const char *sets[] = {gpu, path, "dsim.length=4194304", "corr.heap_accumulation_threshold=3",
                          NULL};
    assert_int_equal(run_cbf(yaml, sets), 0);
    seen r = check_file(h5, "gather", 3);
    assert_true(r.dumps >= 2);
    assert_int_equal(r.saturated, 0);
    unlink(yaml);
    unlink(h5);
}

/* pipelines/xeng.yaml as shipped: 12 dumps; dump 0 (partial) all magic,
 * dump 3 magic on antenna 3's baselines only, the rest data. On the GPU it
 * must also equal a CPU run byte for byte. */
static int32_t *run_shipped(const char *mode, hsize_t *dv)
{
    char yaml[1100], h5[256], path[300], gpu[64];
    snprintf(yaml, sizeof yaml, "%s/pipelines/xeng.yaml", src_root);
    snprintf(h5, sizeof h5, "/tmp/xeng-shipped-%d-%s.h5", (int)getpid(), mode);
    snprintf(path, sizeof path, "sink.path=%s", h5);
    snprintf(gpu, sizeof gpu, "engine.gpu=%s", mode);
    const char *sets[] = {path, gpu, NULL};
    assert_int_equal(run_cbf(yaml, sets), 0);
    hid_t f = H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    int rank;
    int32_t *vis = pl_read(f, "/reduce/data", H5T_NATIVE_INT32, &rank, dv);
    H5Fclose(f);
    assert_non_null(vis);
    unlink(h5);
    return vis;
}

static void test_shipped_pipeline(void **state)
{
    (void)state;
    hsize_t dv[8];
    int32_t *vis = run_shipped(gpu_mode(), dv);
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
    if (use_gpu) {
        hsize_t dc[8];
        int32_t *cpu = run_shipped("none", dc);
        assert_memory_equal(dc, dv, 4 * sizeof(hsize_t));
        assert_memory_equal(cpu, vis, dv[0] * per * sizeof(int32_t));
        free(cpu);
    }
    free(vis);
}

int main(int argc, char **argv)
{
    const char *sr = getenv("CBF_SOURCE_ROOT");
    if (!sr) {
        printf("test_xeng_pipeline: skipped: CBF_SOURCE_ROOT not set\n");
        return 77;
    }
    snprintf(src_root, sizeof src_root, "%s", sr);
    if ((use_gpu = cbf_test_gpu_arg("test_xeng_pipeline", argc, argv)) < 0 ||
        cbf_test_cbf_run("test_xeng_pipeline", exe, sizeof exe))
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_against_reference_4bit),
        cmocka_unit_test(test_slices),
        cmocka_unit_test(test_65_antennas),
        cmocka_unit_test(test_many_channels),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_device_input),
        cmocka_unit_test(test_shipped_pipeline),
        cmocka_unit_test(test_demo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
