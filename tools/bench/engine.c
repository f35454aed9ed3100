/* cbf-bench engine: whole pipelines through the runtime, as a user runs
 * them: real YAML, real plugins, libcbf's engine API in this process (one
 * engine per thread where a case needs several), rates read from the nodes'
 * counters over a timed window after a warm-up, and every run ended by the
 * engine's stop request (what SIGINT does in cbf-run) and drained, so that
 * cbf_engine_run's pool check proves every buffer came back.
 *
 *   (a) F-engine from host memory on the GPU: dsim -> upload -> K x (pfb ->
 *       fft_post) -> discard, against the PCIe bound measured in the run;
 *   (b) the network F-engine on loopback: dsim (real time) -> sender =>
 *       receiver -> K x (pfb -> fft_post -> sender) => receiver -> discard,
 *       three engines, K = 1, 2, ... antennas until one loses data;
 *   (c) the X-engine: 64 antennas' F-engine heaps => receiver -> correlator
 *       -> reducer -> sender => a draining socket, stepping the offered rate
 *       up against a plain UDP blast measured in the run;
 *   (d) (a) on the CPU path, in antennas per core.
 *
 * Parameters other branches add (dsim mode, realtime, memory; receiver and
 * sender threads and affinity) are written only when the loaded plugin
 * declares them; otherwise the plugin's default runs and the table says so. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cbf/gpu.h"
#include "cbf/log.h"
#include "engine.h"
#include "opts.h"

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* ---- the PCIe bound (a): pinned copies both ways at once ---- */

#ifdef CBF_HAVE_CUDA
#define ECK(call)                                                                        \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "cbf-bench engine: %s: %s\n", #call, cudaGetErrorString(e_)); \
            rc = 1;                                                                      \
            goto out;                                                                    \
        }                                                                                \
    } while (0)

/* GB/s of host-to-device and device-to-host copies of 256 MiB between
 * pinned and device buffers, on two streams running together. */
static int eng_pcie(double *h2d, double *d2h)
{
    const size_t bytes = (size_t)256 << 20;
    const int reps = 8;
    void *hin = NULL, *hout = NULL, *din = NULL, *dout = NULL;
    cudaStream_t s[2] = {NULL, NULL};
    cudaEvent_t ev[4] = {NULL, NULL, NULL, NULL};
    int rc = 0;
    ECK(cudaHostAlloc(&hin, bytes, cudaHostAllocDefault));
    ECK(cudaHostAlloc(&hout, bytes, cudaHostAllocDefault));
    ECK(cudaMalloc(&din, bytes));
    ECK(cudaMalloc(&dout, bytes));
    memset(hin, 1, bytes);
    for (int i = 0; i < 2; i++)
        ECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++)
        ECK(cudaEventCreate(&ev[i]));
    ECK(cudaMemcpyAsync(din, hin, bytes, cudaMemcpyHostToDevice, s[0]));
    ECK(cudaMemcpyAsync(hout, dout, bytes, cudaMemcpyDeviceToHost, s[1]));
    ECK(cudaDeviceSynchronize());
    ECK(cudaEventRecord(ev[0], s[0]));
    ECK(cudaEventRecord(ev[2], s[1]));
    for (int i = 0; i < reps; i++) {
        ECK(cudaMemcpyAsync(din, hin, bytes, cudaMemcpyHostToDevice, s[0]));
        ECK(cudaMemcpyAsync(hout, dout, bytes, cudaMemcpyDeviceToHost, s[1]));
    }
    ECK(cudaEventRecord(ev[1], s[0]));
    ECK(cudaEventRecord(ev[3], s[1]));
    ECK(cudaDeviceSynchronize());
    float ms_in, ms_out;
    ECK(cudaEventElapsedTime(&ms_in, ev[0], ev[1]));
    ECK(cudaEventElapsedTime(&ms_out, ev[2], ev[3]));
    *h2d = (double)reps * (double)bytes / (ms_in * 1e-3) / 1e9;
    *d2h = (double)reps * (double)bytes / (ms_out * 1e-3) / 1e9;
out:
    for (int i = 0; i < 4; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    for (int i = 0; i < 2; i++)
        if (s[i])
            cudaStreamDestroy(s[i]);
    cudaFree(din);
    cudaFree(dout);
    cudaFreeHost(hin);
    cudaFreeHost(hout);
    return rc;
}
#else
static int eng_pcie(double *h2d, double *d2h)
{
    *h2d = *d2h = 0;
    return 1;
}
#endif

/* ---- (a) and (d): the F-engine fed from host memory ---- */

typedef struct eng_result {
    double rate; /* input samples/s, both pols, all antennas */
    uint64_t missing, buffers;
    int rc;
} eng_result;

static eng_result eng_feng_once(eng_bench *b, bool gpu, int ants, int channels)
{
    eng_result res = {0, 0, 1};
    char *yaml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&yaml, &len);
    fprintf(f, "engine: {name: bench-feng, gpu: %s}\nnodes:\n", cbf_bench_eng_gpu(b, gpu ? "required" : "none"));
    cbf_bench_eng_dsim(b, f, ants, false, 1.0);
    cbf_bench_eng_chains(b, f, ants, channels);
    fprintf(f, "  sink: {plugin: discard}\n");
    cbf_bench_eng_chain_edges(f, "dsim.out", ants);
    for (int k = 0; k < ants; k++)
        fprintf(f, "  - post%d.out -> sink.in\n", k);
    eng_run r;
    eng_snap *s = malloc(2 * sizeof *s);
    if (!cbf_bench_eng_start(b, &r, "F-engine", cbf_bench_eng_text(f, &yaml))) {
        cbf_bench_eng_warm(b, &r, "discard", "buffers", 2 * (uint64_t)ants);
        cbf_bench_eng_take(&r, &s[0]);
        cbf_bench_eng_window(b);
        cbf_bench_eng_take(&r, &s[1]);
        if (b->o->verbose)
            cbf_bench_eng_show(&r, &s[0], &s[1]);
        res.rc = cbf_bench_eng_finish(&r, 0);
        /* 8-bit complex out: one byte per input sample. */
        res.rate = (double)cbf_bench_eng_delta(&s[0], &s[1], "discard", "bytes") / (s[1].t - s[0].t);
        res.missing = cbf_bench_eng_delta(&s[0], &s[1], "discard", "missing");
        res.buffers = cbf_bench_eng_delta(&s[0], &s[1], "discard", "buffers");
    }
    cbf_bench_eng_free(&r);
    free(s);
    free(yaml);
    return res;
}

static int eng_case_feng(eng_bench *b, bool gpu)
{
    cbf_bench_eng_header(b, gpu ? "(a) F-engine from host memory, GPU" : "(d) F-engine from host memory, CPU");
    if (gpu && !strcmp(cbf_bench_eng_gpu(b, "required"), "required") && cbf_gpu_count() == 0) {
        printf("skipped: no GPU (%s)\n", cbf_gpu_describe(0));
        return 0;
    }
    double h2d = 0, d2h = 0, bound = 0;
    if (gpu && !eng_pcie(&h2d, &d2h)) {
        bound = h2d * 1e9 / IN_BYTES_PER_SAMPLE < d2h * 1e9 ? h2d * 1e9 / IN_BYTES_PER_SAMPLE : d2h * 1e9;
        printf("PCIe, pinned copies both ways at once: %.2f GB/s in, %.2f GB/s out: bound %.1f Gsample/s "
               "(%.2f antennas at 4.28 GB/s in, 3.42 GB/s out each)\n\n",
               h2d, d2h, bound / 1e9, bound / ANT_RATE);
    }
    if (gpu)
        printf("| channels | antennas | Gsample/s | antennas of rate | real time per antenna | of PCIe bound | "
               "buffers | missing | status |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    else
        printf("| channels | antennas | Gsample/s | antennas of rate | antennas per core | buffers | missing | "
               "status |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int failed = 0;
    for (int c = 0; c < b->o->n_channels; c++) {
        double best = 0;
        int best_k = 0;
        for (int i = 0; i < b->o->n_ants; i++) {
            int k = b->o->ants[i], ch = b->o->channels[c];
            eng_result r = eng_feng_once(b, gpu, k, ch);
            bool ok = !r.rc && !r.missing;
            failed += !ok;
            if (ok && r.rate > best)
                best = r.rate, best_k = k;
            printf("| %d | %d | %.3f | %.3f | %.3f | ", ch, k, r.rate / 1e9, r.rate / ANT_RATE,
                   gpu ? r.rate / ANT_RATE / k : r.rate / ANT_RATE / b->cores);
            if (gpu)
                printf(bound > 0 ? "%.2f | " : "- | ", r.rate / (bound > 0 ? bound : 1));
            /* The window counts whole buffers: with few, the rate is coarse. */
            printf("%llu | %llu | %s%s |\n", (unsigned long long)r.buffers, (unsigned long long)r.missing,
                   r.rc ? "run failed" : r.missing ? "loss" : "ok, drained",
                   r.buffers < 20 && !r.rc ? " (few buffers: coarse rate)" : "");
            fflush(stdout);
        }
        printf("\nhighest at %d channels: %.3f Gsample/s with %d antennas: %.2f antennas of rate %s", b->o->channels[c],
               best / 1e9, best_k, best / ANT_RATE, gpu ? "per GPU" : "");
        if (gpu && bound > 0)
            printf(" (%.2f of the PCIe bound)", best / bound);
        if (!gpu)
            printf("(%.3f per core)", best / ANT_RATE / b->cores);
        printf("\n\n");
    }
    cbf_bench_eng_notes(b);
    printf("case %c: %s\n", gpu ? 'a' : 'd', failed ? "LOSS or failure in some row" : "zero loss in every row");
    return failed ? 1 : 0;
}

/* ---- options ---- */

static const char eng_usage[] =
            "usage: cbf-bench engine [--case a,b,c,d|all] [--seconds S] [--warmup S]\n"
            "                        [--ants 1,2,4,...] [--channels 32768,4096]\n"
            "                        [--gpu auto|required|none] [--scale F]\n"
            "                        [--rx-threads T] [--tx-threads T] [--xeng-channels C]\n"
            "                        [--fractions 0.25,0.5,...] [--plugin-path DIR]\n"
            "                        [--spectra N] [--chunk N]\n"
            "                        [--verbose]\n"
            "  a  F-engine from host memory on the GPU\n"
            "     (dsim -> upload -> K x pfb/fft_post -> discard)\n"
            "  b  network F-engine on loopback, K antennas of real time (x --scale)\n"
            "     until one loses data\n"
            "  c  X-engine of 64 antennas' heaps against the loopback UDP ceiling\n"
            "     (--fractions of it)\n"
            "  d  (a) on the CPU path, antennas per core\n"
            "  --spectra N: pfb's spectra_per_buffer (default: the plugin's)\n"
            "  --chunk N: dsim's samples_per_chunk in a and d (default 8388608, as\n"
            "     pipelines/feng-4ant-gpu.yaml; 0: the plugin's own, 1048576)\n"
            "  --verbose prints every node's counters over each run's window\n"
            "     (what limits it)\n"
            "defaults: --case all --seconds 3 --warmup 1 --ants 1,2,4,8,16\n"
            "          --channels 32768,4096 --scale 1 --rx-threads 4 --tx-threads 2\n"
            "          --xeng-channels 64 --fractions 0.1,0.25,0.5,0.7,0.8,0.9,1\n";

/* --case: "a", "a,d", "ad" or "all". */
static int eng_cases(const char *v, void *value)
{
    eng_opts *o = value;
    size_t n = 0;
    for (const char *c = strcmp(v, "all") ? v : "abcd"; *c; c++)
        if (*c != ',') {
            if (!strchr("abcd", *c) || n + 1 >= sizeof o->cases)
                return -1;
            o->cases[n++] = *c;
        }
    o->cases[n] = '\0';
    return n ? 0 : -1;
}

static int eng_gpu(const char *v, void *value)
{
    *(const char **)value = v;
    return strcmp(v, "auto") && strcmp(v, "required") && strcmp(v, "none");
}

static int eng_dir(const char *v, void *value)
{
    eng_opts *o = value;
    if (o->n_dirs == 8)
        return -1;
    o->dirs[o->n_dirs++] = v;
    return 0;
}

static int eng_parse(int argc, char **argv, eng_opts *o)
{
    *o = (eng_opts){.cases = "abcd", .seconds = 3, .warmup = 1, .scale = 1, .ants = {1, 2, 4, 8, 16}, .n_ants = 5,
                    .channels = {32768, 4096}, .n_channels = 2, .xeng_channels = 64, .rx_threads = 4, .tx_threads = 2,
                    .chunk = 8388608,
                    .fractions = {0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0}, .n_fractions = 7};
    const cbf_bench_opt table[] = {
        {"--case", CBF_BOPT_TEXT, o, .check = eng_cases},
        {"--seconds", CBF_BOPT_REAL, &o->seconds, .lo = 1e-3, .hi = 1e6},
        {"--warmup", CBF_BOPT_REAL, &o->warmup, .lo = 0, .hi = 1e6},
        {"--scale", CBF_BOPT_REAL, &o->scale, .lo = 1e-6, .hi = 1e6},
        {"--ants", CBF_BOPT_INTS, o->ants, &o->n_ants, MAX_LIST, 1, 1 << 16},
        {"--channels", CBF_BOPT_INTS, o->channels, &o->n_channels, 8, 1, 1 << 20},
        {"--rx-threads", CBF_BOPT_INT, &o->rx_threads, .lo = 1, .hi = 1024},
        {"--tx-threads", CBF_BOPT_INT, &o->tx_threads, .lo = 1, .hi = 1024},
        {"--xeng-channels", CBF_BOPT_INT, &o->xeng_channels, .lo = 1, .hi = 1 << 20},
        {"--spectra", CBF_BOPT_INT, &o->spectra, .lo = 1, .hi = 1 << 20},
        {"--chunk", CBF_BOPT_INT, &o->chunk, .lo = 0, .hi = 1 << 30},
        {"--fractions", CBF_BOPT_REALS, o->fractions, &o->n_fractions, MAX_LIST, 1e-6, 1e6},
        {"--gpu", CBF_BOPT_TEXT, &o->gpu, .check = eng_gpu},
        {"--plugin-path", CBF_BOPT_TEXT, o, .check = eng_dir},
        {"--verbose", CBF_BOPT_FLAG, &o->verbose, .set = 1, .alias = "-v"},
        {0},
    };
    return cbf_bench_parse("engine", eng_usage, argc, argv, table);
}

int cbf_bench_engine(int argc, char **argv)
{
    eng_opts o;
    int st = eng_parse(argc, argv, &o);
    if (st)
        return st == 1 ? 0 : st;
    /* The build tree keeps cbf-bench in tools/bench/, two levels under the
     * plugins' folder; the registry's own guess is one level. */
    char exe[4096], dir[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0 && o.n_dirs < 8) {
        exe[n] = '\0';
        *strrchr(exe, '/') = '\0';
        snprintf(dir, sizeof dir, "%s/../../plugins", exe);
        if (!access(dir, R_OK))
            o.dirs[o.n_dirs++] = dir;
    }
    if (cbf_log_get_level() > CBF_LOG_WARN)
        cbf_log_set_level(CBF_LOG_WARN);
    eng_bench b = {.o = &o, .cores = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    cbf_error err;
    cbf_error_clear(&err);
    if (cbf_registry_open(o.dirs, o.n_dirs, &b.reg, &err)) {
        fprintf(stderr, "cbf-bench engine: %s\n", err.msg);
        return 2;
    }
    int rc = 0;
    printf("# cbf-bench engine: rates from the nodes' counters over %.1f s after %.1f s of warm-up; "
           "an antenna is MeerKAT L-band, 2 x 1712 Msample/s\n",
           o.seconds, o.warmup);
    for (const char *c = o.cases; *c; c++) {
        if (*c == 'a' || *c == 'd')
            rc |= eng_case_feng(&b, *c == 'a');
        else if (*c == 'b')
            rc |= cbf_bench_eng_case_net(&b);
        else
            rc |= cbf_bench_eng_case_xeng(&b);
    }
    cbf_registry_close(b.reg);
    return rc;
}
