/* gpu_available.h: whether a test's --gpu run has a CUDA device to run on,
 * and if not, why (for the "skipped: ..." line before exit 77). Shared by
 * the kernel tests that link no libcbf (tests/xeng, tests/beamform). */
#ifndef CBF_TEST_GPU_AVAILABLE_H
#define CBF_TEST_GPU_AVAILABLE_H

#include <stddef.h>
#include <stdio.h>
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* 1 when a CUDA device is usable; else 0 with the reason in msg. */
static inline int cbf_test_gpu_available(char *msg, size_t msglen)
{
#ifdef CBF_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        snprintf(msg, msglen, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "count 0");
        return 0;
    }
    return 1;
#else
    snprintf(msg, msglen, "built without CUDA");
    return 0;
#endif
}

#endif
