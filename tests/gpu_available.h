/* gpu_available.h: what the kernel and pipeline tests' mains share (they
 * link no libcbf: tests/xeng, tests/beamform): whether a --gpu run has a
 * CUDA device to run on, and if not why (the "skipped: ..." line before exit
 * 77); the random state a run draws from, printed so it can be repeated;
 * the cbf-run a pipeline test drives. */
#ifndef CBF_TEST_GPU_AVAILABLE_H
#define CBF_TEST_GPU_AVAILABLE_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
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

/* argv[1] == "--gpu": 1 with a GPU to run on; 0 without the flag; -1 after
 * printing "NAME --gpu: skipped: why" (the caller returns 77). */
static inline int cbf_test_gpu_arg(const char *name, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--gpu"))
        return 0;
    char why[256];
    if (cbf_test_gpu_available(why, sizeof why))
        return 1;
    printf("%s --gpu: skipped: %s\n", name, why);
    return -1;
}

/* The state a run's random inputs come from: $var when set, else from the
 * clock; never 0 (an xorshift state). Printed with the variable that
 * repeats it, after `what` (the run's name and flags). */
static inline uint64_t cbf_test_seed(const char *var, const char *what)
{
    const char *env = getenv(var);
    uint64_t s0 = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    printf("%s: inputs from state %" PRIu64 " (%s repeats them)\n", what, s0, var);
    return s0 ? s0 : 1;
}

/* $CBF_BUILD_ROOT/tools/cbf-run into exe: 0, or -1 after printing why the
 * pipeline test NAME is skipped (the caller returns 77). */
static inline int cbf_test_cbf_run(const char *name, char *exe, size_t n)
{
    const char *b = getenv("CBF_BUILD_ROOT");
    if (!b) {
        printf("%s: skipped: CBF_BUILD_ROOT not set\n", name);
        return -1;
    }
    snprintf(exe, n, "%s/tools/cbf-run", b);
    if (access(exe, X_OK)) {
        printf("%s: skipped: no cbf-run at %s\n", name, exe);
        return -1;
    }
    return 0;
}

#endif
