/* kernels/common/cuda_check.h: the checked CUDA call of every .cu kernel
 * file (it needs cuda_runtime.h, so C files do not include it).
 *
 * The message reads "<who>: <what>: <CUDA's reason>", where `what` is the
 * call's text for CBF_KERN_CUDA_TRY, so a failure names the kernel and the
 * call without the caller writing either out. */
#ifndef CBF_KERNEL_CUDA_CHECK_H
#define CBF_KERNEL_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "status.h"

/* 0 when e is cudaSuccess, else CBF_KERN_ECUDA with the message written. */
static inline int cbf_kern_cuda(cudaError_t e, char *msg, size_t msglen, const char *who,
                                const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return cbf_kern_fail(msg, msglen, CBF_KERN_ECUDA, "%s: %s: %s", who, what,
                         cudaGetErrorString(e));
}

/* For functions with `char *msg, size_t msglen` parameters that return a
 * CBF_KERN_* code: returns from the caller when the call fails. */
#define CBF_KERN_CUDA_TRY(who, call)                                      \
    do {                                                                  \
        int rc_ = cbf_kern_cuda((call), msg, msglen, (who), #call);       \
        if (rc_)                                                          \
            return rc_;                                                   \
    } while (0)

#endif
