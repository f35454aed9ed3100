/* xeng_run.h: run the X-engine kernels on host buffers, on the CPU or the
 * GPU, so the tests can hold both to the same reference. */
#ifndef XENG_RUN_H
#define XENG_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "correlator.h"
#include "reducer.h"
#include "../gpu_available.h"   /* cbf_test_gpu_available */

/* accum: slices x cbf_corr_accum_len values, added into. The CPU adds into
 * slice 0 whatever `slices` says. in holds `batches` batches. */
int xeng_correlate(int gpu, const cbf_corr_shape *s, const uint8_t *in, size_t batches,
                   size_t b0, size_t b1, int slices, int block_ants, int64_t *accum, char *msg,
                   size_t msglen);

/* job pointers are host memory; copied for the GPU and back. */
int xeng_reduce(int gpu, const cbf_reduce_job *job, uint64_t *saturated, char *msg,
                size_t msglen);

#endif
