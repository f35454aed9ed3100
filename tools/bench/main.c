/* cbf-bench: benchmarks of the compute stages, one sub-command per area.
 * Timing lives here, never in pass/fail tests. */
#include <stdio.h>
#include <string.h>

typedef int (*bench_fn)(int argc, char **argv);

#define DECLARE(area) int cbf_bench_##area(int argc, char **argv);
#ifdef CBF_BENCH_FENG
DECLARE(feng)
#endif
#ifdef CBF_BENCH_XENG
DECLARE(xeng)
#endif
#ifdef CBF_BENCH_BEAM
DECLARE(beam)
#endif
#ifdef CBF_BENCH_NET
DECLARE(net)
#endif
#ifdef CBF_BENCH_DDC
DECLARE(ddc)
#endif
DECLARE(engine)

/* The GPU areas are built only with CUDA (tools/bench/meson.build); without
 * it they are still listed, and say why they cannot run (fn NULL). */
#ifndef CBF_BENCH_FENG
#define cbf_bench_feng NULL
#endif
#ifndef CBF_BENCH_XENG
#define cbf_bench_xeng NULL
#endif
#ifndef CBF_BENCH_BEAM
#define cbf_bench_beam NULL
#endif
#ifndef CBF_BENCH_DDC
#define cbf_bench_ddc NULL
#endif

static const struct {
    const char *name;
    bench_fn fn;
    const char *doc;
} areas[] = {
    {"feng", cbf_bench_feng, "wideband F-engine kernels and chain (GPU)"},
    {"xeng", cbf_bench_xeng, "correlator and reducer (GPU)"},
    {"beam", cbf_bench_beam, "tied-array beamformer, alone and beside the correlator (GPU)"},
#ifdef CBF_BENCH_NET
    {"net", cbf_bench_net, "SPEAD receive and send on loopback"},
#endif
    {"ddc", cbf_bench_ddc, "narrowband DDC and chain (GPU)"},
    {"engine", cbf_bench_engine, "whole pipelines through the runtime (F-engine, network, X-engine)"},
    {NULL, NULL, NULL},
};

/* cbf-bench all: the tables docs/performance.md gives, in one call, each
 * area with the figures issue 34 holds the project to: the F-engine with
 * dither (fft_post's default) at 4096 and 32768 channels, the correlator
 * at N = 64, 80 and 256 against cuBLAS and the bandwidth bound, the
 * beamformer alone and beside the correlator, and whole F-engines from
 * host memory against PCIe. Areas this build lacks are reported, not
 * failed silently. Returns the first non-zero status. */
static int bench_all(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f, "usage: cbf-bench AREA [options]   (cbf-bench AREA --help for options)\n"
               "       cbf-bench --version\nareas:\n");
    for (int i = 0; areas[i].name; i++)
        fprintf(f, "  %-7s %s\n", areas[i].name, areas[i].doc);
    fprintf(f, "  %-7s every table of docs/performance.md in one call (GPU)\n", "all");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cbf-bench %s\n", CBF_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "all"))
        return bench_all(argc - 1, argv + 1);
    for (int i = 0; areas[i].name; i++)
        if (!strcmp(argv[1], areas[i].name)) {
            if (!areas[i].fn) {
                fprintf(stderr, "cbf-bench %s: built without CUDA; this benchmark needs a GPU\n", argv[1]);
                return 1;
            }
            return areas[i].fn(argc - 1, argv + 1);
        }
    fprintf(stderr, "cbf-bench: unknown area '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

static int bench_all(int argc, char **argv)
{
    static const char *const runs[][10] = {
        {"feng", "--channels", "4096,32768", "--dither", NULL},
        {"xeng", "--ants", "64,80,256", "--block", "0", NULL},
        {"beam", "--ants", "64", "--beams", "8", NULL},
        {"engine", "--case", "a", "--ants", "1,4,8,12", "--channels", "4096,32768", NULL},
    };
    const size_t n_runs = sizeof runs / sizeof runs[0];
    if (argc > 1) {
        const int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
        FILE *f = help ? stdout : stderr;
        fprintf(f, "usage: cbf-bench all\nruns, in this order and in one process:\n");
        for (size_t r = 0; r < n_runs; r++) {
            fprintf(f, "  cbf-bench");
            for (int k = 0; runs[r][k]; k++)
                fprintf(f, " %s", runs[r][k]);
            fprintf(f, "\n");
        }
        fprintf(f, "areas this build lacks say so; the first failing status is the exit status\n");
        return help ? 0 : 2;
    }
    int first = 0;
    for (size_t r = 0; r < n_runs; r++) {
        char *av[10];
        int ac = 0;
        printf("\n## cbf-bench");
        for (; runs[r][ac]; ac++) {
            av[ac] = (char *)runs[r][ac];
            printf(" %s", av[ac]);
        }
        av[ac] = NULL;
        printf("\n\n");
        fflush(stdout);
        bench_fn fn = NULL;
        for (int i = 0; areas[i].name; i++)
            if (!strcmp(areas[i].name, av[0]))
                fn = areas[i].fn;
        int rc = fn ? fn(ac, av) : 1;
        if (!fn)
            printf("not run: this build has no %s benchmark (built without CUDA)\n", av[0]);
        fflush(stdout);
        fflush(stderr);
        if (rc && !first)
            first = rc;
    }
    return first;
}
