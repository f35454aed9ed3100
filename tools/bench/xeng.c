/* cbf-bench xeng: the tensor-core correlator against two ceilings measured
 * in the same run, a cuBLAS int8 GEMM (int32 accumulate) and the
 * device-to-device copy rate.
 *
 * Operations: 8 real operations per complex multiply-accumulate, counting
 * the unique triangle only: baselines x 4 products = 2 N (N + 1) complex
 * MACs per channel and spectrum (about ASTRON's 16 R^2 for R dual-pol
 * receivers). The bandwidth bound counts the fewest bytes one call must
 * move: its input once, and one read and one write of the int64
 * accumulators it adds into. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "correlator.h"


#include "corr_step.h"
#include "gpu_time.h"
#include "opts.h"

#define CK(call) CBF_BENCH_CK("xeng", call)

typedef struct opts {
    int ants[16], n_ants, bits, reps, blocks[8], n_blocks;
    double gib; /* input bytes per call, GiB */
} opts;

/* One antenna count: batches per call and channels are chosen so that a
 * call correlates at least 64 N spectra (accumulator traffic stays a small
 * fraction of the input) and reads about o->gib of input. */
static int bench_one(const opts *o, int n, int block, double int8_ops, double copy_bps,
                     cudaStream_t s)
{
    cbf_corr_shape sh = {n, 1, 256, o->bits};
    size_t nb = (size_t)(n / 4 > 64 ? n / 4 : 64);
    double per_chan = (double)n * sh.spectra_per_heap * (o->bits / 4) * nb;
    int ch = (int)(o->gib * 1073741824.0 / per_chan);
    sh.channels = ch < 1 ? 1 : ch > 4096 ? 4096 : ch;
    char msg[512];
    cbf_bench_corr c = {.area = "xeng", .s = s};
    if (cbf_corr_cuda_create(&sh, block, &c.plan, msg, sizeof msg))
        return fprintf(stderr, "cbf-bench xeng: %s\n", msg), 1;
    const size_t in_bytes = nb * cbf_corr_batch_bytes(&sh), len = cbf_corr_accum_len(&sh);
    const int slices = cbf_corr_cuda_auto_slices(c.plan, nb);
    void *in, *acc;
    CK(cudaMalloc(&in, in_bytes));
    CK(cudaMalloc(&acc, (size_t)slices * len * 8));
    CK(cudaMemset(acc, 0, (size_t)slices * len * 8));
    if (cbf_bench_fill_random(in, in_bytes, (uint64_t)n * 7919))
        return 1;
    c.job = (cbf_corr_job){sh, in, 0, nb, acc, slices};
    float t;
    if (cbf_bench_time_ms(cbf_bench_corr_step, &c, s, o->reps, &t))
        return 1;
    CK(cudaGetLastError());
    const double spectra = (double)nb * sh.spectra_per_heap;
    const double ops = 8.0 * 2.0 * n * (n + 1.0) * sh.channels * spectra;
    const double rate = ops / (t * 1e-3);
    const double bytes = (double)in_bytes + 2.0 * (double)len * 8;
    const double bound_ms = bytes / copy_bps * 1e3;
    printf("| %d | %d-bit | %s | %d | %.0f | %d | %.3f | %.1f | %.1f%% | %.2f | %.1f%% |\n", n,
           o->bits, cbf_corr_cuda_kernel(c.plan), sh.channels, spectra, slices, t, rate / 1e12,
           100.0 * rate / int8_ops, bound_ms, 100.0 * bound_ms / t);
    cudaFree(in);
    cudaFree(acc);
    cbf_corr_cuda_destroy(c.plan);
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.ants = {64, 80, 256, 512, 1024, 2048}, .n_ants = 6, .bits = 8, .reps = 7,
                .blocks = {0, 32, 48, 64}, .n_blocks = 4, .gib = 1.0};
    const cbf_bench_opt table[] = {
        {"--ants", CBF_BOPT_INTS, o->ants, &o->n_ants, 16, 1, 1 << 16},
        {"--bits", CBF_BOPT_INT, &o->bits, .lo = 4, .hi = 8},
        {"--block", CBF_BOPT_INTS, o->blocks, &o->n_blocks, 8, 0, 1024},
        {"--reps", CBF_BOPT_INT, &o->reps, .lo = 1, .hi = 64},
        {"--gib", CBF_BOPT_REAL, &o->gib, .lo = 1e-6, .hi = 64},
        {0},
    };
    int rc = cbf_bench_parse("xeng", "usage: cbf-bench xeng [--ants 64,80,...] [--bits 8|4] [--block 0,32,48,64]\n"
                                     "                      [--reps N] [--gib G]\n"
                                     "  --block: tile sizes to time (default all); 0 is the automatic choice\n"
                                     "           (wgmma on an H100/H200)\n",
                             argc, argv, table);
    if (!rc && o->bits != 8 && o->bits != 4)
        return fprintf(stderr, "cbf-bench xeng: --bits is 8 or 4\n"), 2;
    return rc;
}

int cbf_bench_xeng(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    struct cudaDeviceProp prop;
    if (cbf_bench_gpu("xeng", &prop))
        return 1;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    double int8_ops, copy_bps;
    if (cbf_bench_gemm_rate(s, CBF_BENCH_GEMM_I8, &int8_ops) || cbf_bench_copy_rate(s, &copy_bps))
        return 1;
    printf("GPU: %s (%d SMs); cuBLAS int8 GEMM 8192^3 %.0f TOPS; device-to-device copy %.3f "
           "TB/s (medians)\n",
           prop.name, prop.multiProcessorCount, int8_ops / 1e12, copy_bps / 1e12);
    printf("spectra_per_heap 256; Tops/s = 8 x 2N(N+1) x channels x spectra / time; bound = "
           "(input + accumulator read and write) / copy rate\n\n");
    printf("| N | input | kernel | channels | spectra/call | slices | ms | Tops/s | of cuBLAS "
           "int8 | bound ms | of bound |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < o.n_ants; i++)
        for (int k = 0; k < o.n_blocks; k++)
            if (bench_one(&o, o.ants[i], o.blocks[k], int8_ops, copy_bps, s))
                return 1;
    cudaStreamDestroy(s);
    return 0;
}
