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

static void usage(FILE *f)
{
    fprintf(f, "usage: cbf-bench AREA [options]   (cbf-bench AREA --help for options)\n"
               "       cbf-bench --version\nareas:\n");
    for (int i = 0; areas[i].name; i++)
        fprintf(f, "  %-7s %s\n", areas[i].name, areas[i].doc);
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
