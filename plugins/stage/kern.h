/* stage/kern.h: a kernel's return code and message as a cbf_error.
 *
 * Kernel APIs (kernels/) return core's codes by number (kernels/common/
 * status.h, held equal in kern.c) and write their message into a buffer
 * the caller gives; a plugin passes that buffer here. */
#ifndef CBF_STAGE_KERN_H
#define CBF_STAGE_KERN_H

#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Message buffer size for kernel calls. */
#define CBF_STAGE_MSG 512

/* 0 when rc is 0; otherwise records rc and msg in err and returns rc. */
int cbf_stage_kern(int rc, const char *msg, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
