/* kernels/common/cbf_async.h: cp.async, the asynchronous global-to-shared
 * copies of compute capability 8.0 and up, written once for the kernels
 * that stage their input through shared memory (the beamformer; the
 * correlator's portable kernel). CUDA device code only.
 *
 * A copy whose source size is 0 writes zeros and reads nothing: kernels
 * use that to fill missing inputs and the ends of arrays without a branch
 * around the copy. Completion is per thread (commit groups); a barrier
 * (__syncwarp, __syncthreads) after the wait makes other threads' copies
 * visible. */
#ifndef CBF_KERNEL_CBF_ASYNC_H
#define CBF_KERNEL_CBF_ASYNC_H

/* 16 bytes, through L2 only (streamed data, read once). */
static __device__ __forceinline__ void cbf_cp_async16(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

/* 4 bytes (cp.async.cg takes only 16). */
static __device__ __forceinline__ void cbf_cp_async4(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

static __device__ __forceinline__ void cbf_cp_commit(void)
{
    asm volatile("cp.async.commit_group;\n" ::);
}

/* Until at most N of this thread's groups are still in flight. */
template <int N> static __device__ __forceinline__ void cbf_cp_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ unsigned cbf_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

#endif
