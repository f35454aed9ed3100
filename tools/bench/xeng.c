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

#ifdef CBF_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CK(call)                                                                      \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            fprintf(stderr, "cbf-bench xeng: %s: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

typedef struct opts {
    int ants[16], n_ants, bits, reps, blocks[8], n_blocks;
    double gib; /* input bytes per call, GiB */
} opts;

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef int (*step_fn)(void *ctx);
/* Median milliseconds of reps runs (at most 64) after two warm-ups. */
static int time_ms(step_fn fn, void *ctx, cudaStream_t s, int reps, float *median)
{
    cudaEvent_t a, b;
    float t[64];
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = -2; i < reps; i++) {
        CK(cudaEventRecord(a, s));
        if (fn(ctx))
            return 1;
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        if (i >= 0)
            CK(cudaEventElapsedTime(&t[i], a, b));
    }
    qsort(t, (size_t)reps, sizeof(float), cmp_float);
    *median = t[reps / 2];
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 0;
}

/* Random bytes in [-127, 127] (never -128), filled from one host block. */
static int fill_random(void *dev, size_t bytes, uint64_t seed)
{
    const size_t blk = (size_t)64 << 20;
    uint8_t *h = malloc(blk);
    if (!h)
        return 1;
    uint64_t x = seed | 1;
    for (size_t i = 0; i < blk; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        h[i] = (uint8_t)(int8_t)((int)((x >> 24) % 255) - 127);
    }
    for (size_t off = 0; off < bytes; off += blk) {
        size_t n = bytes - off < blk ? bytes - off : blk;
        if (cudaMemcpy((uint8_t *)dev + off, h, n, cudaMemcpyHostToDevice) != cudaSuccess) {
            free(h);
            return 1;
        }
    }
    free(h);
    return 0;
}

typedef struct gemm_ctx {
    cublasHandle_t h;
    int n;
    void *a, *b, *c;
} gemm_ctx;

static int do_gemm(void *p)
{
    gemm_ctx *g = p;
    const int32_t one = 1, zero = 0;
    /* int8 GEMM wants A transposed (TN); C = A^T B, n x n, k = n */
    cublasStatus_t st = cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->n, g->n, &one,
                                      g->a, CUDA_R_8I, g->n, g->b, CUDA_R_8I, g->n, &zero, g->c,
                                      CUDA_R_32I, g->n, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cbf-bench xeng: cublasGemmEx: status %d\n", (int)st);
        return 1;
    }
    return 0;
}

typedef struct copy_ctx {
    void *src, *dst;
    size_t bytes;
    cudaStream_t s;
} copy_ctx;

static int do_copy(void *p)
{
    copy_ctx *c = p;
    CK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->s));
    return 0;
}

typedef struct corr_ctx {
    cbf_corr_cuda *plan;
    cbf_corr_job job;
    cudaStream_t s;
} corr_ctx;

static int do_corr(void *p)
{
    corr_ctx *c = p;
    char msg[512];
    if (cbf_corr_cuda_run(c->plan, &c->job, c->s, msg, sizeof msg)) {
        fprintf(stderr, "cbf-bench xeng: %s\n", msg);
        return 1;
    }
    return 0;
}

static int ceilings(cudaStream_t s, double *int8_ops, double *copy_bps)
{
    gemm_ctx g = {0};
    g.n = 8192;
    size_t nn = (size_t)g.n * g.n;
    if (cublasCreate(&g.h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(g.h, s))
        return fprintf(stderr, "cbf-bench xeng: cublasCreate failed\n"), 1;
    CK(cudaMalloc(&g.a, nn));
    CK(cudaMalloc(&g.b, nn));
    CK(cudaMalloc(&g.c, nn * 4));
    if (fill_random(g.a, nn, 1) || fill_random(g.b, nn, 2))
        return 1;
    float t;
    if (time_ms(do_gemm, &g, s, 10, &t))
        return 1;
    *int8_ops = 2.0 * (double)nn * g.n / (t * 1e-3);
    cublasDestroy(g.h);
    cudaFree(g.a);
    cudaFree(g.b);
    cudaFree(g.c);

    copy_ctx c = {0};
    c.bytes = (size_t)1 << 31;
    c.s = s;
    CK(cudaMalloc(&c.src, c.bytes));
    CK(cudaMalloc(&c.dst, c.bytes));
    CK(cudaMemset(c.src, 0x5a, c.bytes));
    if (time_ms(do_copy, &c, s, 10, &t))
        return 1;
    *copy_bps = 2.0 * (double)c.bytes / (t * 1e-3);
    cudaFree(c.src);
    cudaFree(c.dst);
    return 0;
}

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
    corr_ctx c = {0};
    c.s = s;
    if (cbf_corr_cuda_create(&sh, block, &c.plan, msg, sizeof msg))
        return fprintf(stderr, "cbf-bench xeng: %s\n", msg), 1;
    const size_t in_bytes = nb * cbf_corr_batch_bytes(&sh), len = cbf_corr_accum_len(&sh);
    const int slices = cbf_corr_cuda_auto_slices(c.plan, nb);
    void *in, *acc;
    CK(cudaMalloc(&in, in_bytes));
    CK(cudaMalloc(&acc, (size_t)slices * len * 8));
    CK(cudaMemset(acc, 0, (size_t)slices * len * 8));
    if (fill_random(in, in_bytes, (uint64_t)n * 7919))
        return 1;
    c.job = (cbf_corr_job){sh, in, 0, nb, acc, slices};
    float t;
    if (time_ms(do_corr, &c, s, o->reps, &t))
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
    static const int def[] = {64, 80, 256, 512, 1024, 2048};
    memset(o, 0, sizeof *o);
    o->bits = 8;
    o->reps = 7;
    o->gib = 1.0;
    for (size_t i = 0; i < sizeof def / sizeof def[0]; i++)
        o->ants[o->n_ants++] = def[i];
    static const int defb[] = {0, 32, 48, 64};
    for (size_t i = 0; i < sizeof defb / sizeof defb[0]; i++)
        o->blocks[o->n_blocks++] = defb[i];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: cbf-bench xeng [--ants 64,80,...] [--bits 8|4] [--block 0,32,48,64]\n"
                   "                      [--reps N] [--gib G]\n"
                   "  --block: tile sizes to time (default all); 0 is the automatic choice\n"
                   "           (wgmma on an H100/H200)\n");
            return 1;
        } else if (v && !strcmp(a, "--ants")) {
            o->n_ants = 0;
            for (char *p = (char *)v; *p && o->n_ants < 16;) {
                o->ants[o->n_ants++] = (int)strtol(p, &p, 10);
                if (*p == ',')
                    p++;
                else
                    break;
            }
            i++;
        } else if (v && !strcmp(a, "--bits")) {
            o->bits = atoi(v), i++;
        } else if (v && !strcmp(a, "--block")) {
            o->n_blocks = 0;
            for (char *p = (char *)v; *p && o->n_blocks < 8;) {
                o->blocks[o->n_blocks++] = (int)strtol(p, &p, 10);
                if (*p == ',')
                    p++;
                else
                    break;
            }
            i++;
        } else if (v && !strcmp(a, "--reps")) {
            o->reps = atoi(v), i++;
        } else if (v && !strcmp(a, "--gib")) {
            o->gib = atof(v), i++;
        } else {
            fprintf(stderr, "cbf-bench xeng: unknown option '%s' (--help)\n", a);
            return 2;
        }
    }
    if (o->reps < 1 || o->reps > 64 || (o->bits != 8 && o->bits != 4) || !(o->gib > 0))
        return fprintf(stderr, "cbf-bench xeng: bad --reps, --bits or --gib\n"), 2;
    return 0;
}

int cbf_bench_xeng(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        fprintf(stderr, "cbf-bench xeng: no CUDA GPU here\n");
        return 1;
    }
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    double int8_ops, copy_bps;
    if (ceilings(s, &int8_ops, &copy_bps))
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
#else
int cbf_bench_xeng(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "cbf-bench xeng: built without CUDA; the X-engine benchmark needs a GPU\n");
    return 1;
}
#endif
