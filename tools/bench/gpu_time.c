/* gpu_time.c: timing and ceilings for the GPU benchmark areas (gpu_time.h). */
#include "gpu_time.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call) CBF_BENCH_CK("gpu", call)

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int cbf_bench_gpu(const char *area, struct cudaDeviceProp *prop)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(prop, dev) != cudaSuccess)
        return fprintf(stderr, "cbf-bench %s: no CUDA GPU here\n", area), 1;
    return 0;
}

int cbf_bench_time_ms(cbf_bench_step fn, void *ctx, cudaStream_t s, int reps, float *median)
{
    cudaEvent_t a, b;
    float t[64];
    if (reps < 1 || reps > 64)
        return fprintf(stderr, "cbf-bench: reps %d outside 1..64\n", reps), 1;
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
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return 0;
}

void cbf_bench_random_bytes(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;   /* xorshift64*: fast, and plenty for test signals */
    for (size_t i = 0; i < n; i++) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        p[i] = (uint8_t)((x * 0x2545f4914f6cdd1dull) >> 56);
    }
}

int cbf_bench_fill_random(void *dev, size_t bytes, uint64_t seed)
{
    const size_t blk = (size_t)64 << 20;
    uint8_t *h = malloc(blk);
    if (!h)
        return fprintf(stderr, "cbf-bench: out of memory\n"), 1;
    uint64_t x = seed | 1;
    for (size_t i = 0; i < blk; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        h[i] = (uint8_t)(int8_t)((int)((x >> 24) % 255) - 127);
    }
    int rc = 0;
    for (size_t off = 0; off < bytes && !rc; off += blk) {
        size_t n = bytes - off < blk ? bytes - off : blk;
        cudaError_t e = cudaMemcpy((uint8_t *)dev + off, h, n, cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            rc = fprintf(stderr, "cbf-bench: filling input: %s\n", cudaGetErrorString(e)) > 0;
    }
    free(h);
    return rc;
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

int cbf_bench_copy_rate(cudaStream_t s, double *bytes_per_s)
{
    copy_ctx c = {NULL, NULL, (size_t)1 << 31, s};
    CK(cudaMalloc(&c.src, c.bytes));
    CK(cudaMalloc(&c.dst, c.bytes));
    CK(cudaMemset(c.src, 0x5a, c.bytes));
    float t;
    int rc = cbf_bench_time_ms(do_copy, &c, s, 10, &t);
    *bytes_per_s = 2.0 * (double)c.bytes / (t * 1e-3);
    CK(cudaFree(c.src));
    CK(cudaFree(c.dst));
    return rc;
}

typedef struct gemm_ctx {
    cublasHandle_t h;
    cbf_bench_gemm kind;
    int n;
    void *a, *b, *c;
} gemm_ctx;

static int do_gemm(void *p)
{
    gemm_ctx *g = p;
    const int32_t i1 = 1, i0 = 0;
    const float f1 = 1.0f, f0 = 0.0f;
    cublasStatus_t st;
    switch (g->kind) {
    case CBF_BENCH_GEMM_I8:   /* int8 GEMM wants A transposed (TN) */
        st = cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->n, g->n, &i1, g->a, CUDA_R_8I,
                          g->n, g->b, CUDA_R_8I, g->n, &i0, g->c, CUDA_R_32I, g->n,
                          CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
        break;
    case CBF_BENCH_GEMM_F32:  /* plain fp32: what CUDA-core arithmetic reaches */
        st = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &f1, g->a, CUDA_R_32F,
                          g->n, g->b, CUDA_R_32F, g->n, &f0, g->c, CUDA_R_32F, g->n,
                          CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
        break;
    default:
        st = cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &f1, g->a, CUDA_R_16F,
                          g->n, g->b, CUDA_R_16F, g->n, &f0, g->c, CUDA_R_32F, g->n,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        break;
    }
    if (st != CUBLAS_STATUS_SUCCESS)
        return fprintf(stderr, "cbf-bench: cublasGemmEx (kind %d): status %d\n", (int)g->kind, (int)st), 1;
    return 0;
}

int cbf_bench_gemm_rate(cudaStream_t s, cbf_bench_gemm kind, double *ops_per_s)
{
    gemm_ctx g = {NULL, kind, 8192, NULL, NULL, NULL};
    const size_t nn = (size_t)g.n * g.n, el = kind == CBF_BENCH_GEMM_I8 ? 1 : kind == CBF_BENCH_GEMM_F16 ? 2 : 4;
    if (cublasCreate(&g.h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(g.h, s) != CUBLAS_STATUS_SUCCESS)
        return fprintf(stderr, "cbf-bench: cublasCreate failed\n"), 1;
    CK(cudaMalloc(&g.a, nn * el));
    CK(cudaMalloc(&g.b, nn * el));
    CK(cudaMalloc(&g.c, nn * 4));
    /* int8: random values; floats: random bytes as small values are as
     * good as any for a rate (no denormals: exponent bits from the pattern
     * 0x3c3c... give numbers near 1) */
    int rc = kind == CBF_BENCH_GEMM_I8 ? cbf_bench_fill_random(g.a, nn, 1) || cbf_bench_fill_random(g.b, nn, 2) : 0;
    if (kind != CBF_BENCH_GEMM_I8) {
        CK(cudaMemset(g.a, 0x3c, nn * el));
        CK(cudaMemset(g.b, 0x3c, nn * el));
    }
    float t = 0;
    if (!rc)
        rc = cbf_bench_time_ms(do_gemm, &g, s, 10, &t);
    *ops_per_s = 2.0 * (double)nn * g.n / (t * 1e-3);
    cublasDestroy(g.h);
    CK(cudaFree(g.a));
    CK(cudaFree(g.b));
    CK(cudaFree(g.c));
    return rc;
}
