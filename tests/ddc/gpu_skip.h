/* gpu_skip.h: the --gpu runs of the ddc tests exit 77 (meson's skip) and say
 * why when there is no GPU to run them on. */
#ifndef CBF_TEST_DDC_GPU_SKIP_H
#define CBF_TEST_DDC_GPU_SKIP_H

#include <stdio.h>
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* 0 when a CUDA GPU is usable; otherwise prints the reason, returns 77. */
static inline int ddc_test_gpu_or_skip(void)
{
#ifdef CBF_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("skipped: no CUDA GPU on this machine\n");
        return 77;
    }
    return 0;
#else
    printf("skipped: built without CUDA\n");
    return 77;
#endif
}

#endif
