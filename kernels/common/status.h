/* kernels/common/status.h: the return codes of every kernel API, and the
 * one helper that fills a kernel's message buffer.
 *
 * Kernels do not include core/ (they are usable without the runtime), so
 * they cannot use cbf/error.h. Their codes are numerically core's, which
 * lets a plugin hand a kernel's code straight to cbf_error_set; the
 * stage-support library (plugins/stage/kern.c) holds the two lists equal
 * with _Static_asserts, so a change on either side fails the build. */
#ifndef CBF_KERNEL_STATUS_H
#define CBF_KERNEL_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    CBF_KERN_OK = 0,
    CBF_KERN_EINVAL = -1,   /* bad argument: core's CBF_EINVAL */
    CBF_KERN_ENOMEM = -2,   /* allocation failed: CBF_ENOMEM */
    CBF_KERN_ENOTSUP = -5,  /* not available here (architecture, bit width): CBF_ENOTSUP */
    CBF_KERN_ECUDA = -6,    /* a CUDA or cuFFT call failed: CBF_ECUDA */
};

/* Writes a printf-style message into msg (when msg is not NULL and msglen
 * is not 0) and returns rc, so kernels can write
 * `return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "...", ...)`. */
int cbf_kern_fail(char *msg, size_t msglen, int rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
