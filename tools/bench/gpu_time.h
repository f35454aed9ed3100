/* gpu_time.h: what the GPU benchmark areas share (CUDA builds only):
 * median timing of a step with events, random int8 device data, and the
 * ceilings results are held against (device-to-device copy rate, cuBLAS
 * GEMM rates), each measured in the run that uses them. */
#ifndef CBF_BENCH_GPU_TIME_H
#define CBF_BENCH_GPU_TIME_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime.h>

/* Prints "cbf-bench <area>: <call>: <error>" and returns 1 from the caller. */
#define CBF_BENCH_CK(area, call)                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "cbf-bench %s: %s: %s\n", area, #call, cudaGetErrorString(e_)); \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

typedef int (*cbf_bench_step)(void *ctx);

/* The current GPU's properties; 0, or 1 after printing "cbf-bench <area>:
 * no CUDA GPU here". */
int cbf_bench_gpu(const char *area, struct cudaDeviceProp *prop);

/* Median milliseconds of reps runs of fn (1..64) on stream s, after two
 * warm-ups; 0, or 1 after printing why. */
int cbf_bench_time_ms(cbf_bench_step fn, void *ctx, cudaStream_t s, int reps, float *median);

/* n random bytes (every value, packed samples of any width) into host memory. */
void cbf_bench_random_bytes(uint8_t *p, size_t n, uint64_t seed);

/* bytes of random int8 values in [-127, 127] (never -128) into device memory. */
int cbf_bench_fill_random(void *dev, size_t bytes, uint64_t seed);

/* Device-to-device copy rate, bytes read + written per second (2 GiB copy). */
int cbf_bench_copy_rate(cudaStream_t s, double *bytes_per_s);

/* cuBLAS GEMM rates, operations per second (2 n^3 per call, n = 8192):
 * int8 (int32 accumulate), fp32 (SGEMM, no tensor cores) and fp16 (tensor
 * cores, fp32 accumulate). */
typedef enum cbf_bench_gemm { CBF_BENCH_GEMM_I8, CBF_BENCH_GEMM_F32, CBF_BENCH_GEMM_F16 } cbf_bench_gemm;
int cbf_bench_gemm_rate(cudaStream_t s, cbf_bench_gemm kind, double *ops_per_s);

#endif
