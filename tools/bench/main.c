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

static const struct {
    const char *name;
    bench_fn fn;
    const char *doc;
} areas[] = {
#ifdef CBF_BENCH_FENG
    {"feng", cbf_bench_feng, "wideband F-engine kernels and chain (GPU)"},
#endif
#ifdef CBF_BENCH_XENG
    {"xeng", cbf_bench_xeng, "correlator and reducer (GPU)"},
#endif
#ifdef CBF_BENCH_BEAM
    {"beam", cbf_bench_beam, "tied-array beamformer, alone and beside the correlator (GPU)"},
#endif
#ifdef CBF_BENCH_NET
    {"net", cbf_bench_net, "SPEAD receive and send on loopback"},
#endif
#ifdef CBF_BENCH_DDC
    {"ddc", cbf_bench_ddc, "narrowband DDC and chain (GPU)"},
#endif
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
        if (!strcmp(argv[1], areas[i].name))
            return areas[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "cbf-bench: unknown area '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
