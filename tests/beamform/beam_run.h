/* beam_run.h: the beamformer kernel on host buffers, on the CPU or (copied
 * there and back) the GPU, so the tests hold both to one reference. */
#ifndef BEAM_RUN_H
#define BEAM_RUN_H

#include <stddef.h>

#include "beamform.h"
#include "../gpu_available.h"   /* cbf_test_gpu_available */

/* job's pointers are host memory; out, raw and saturated are written back
 * (values outside the job's span of spectra kept as they were). */
int beam_run(int gpu, const cbf_beam_job *job, char *msg, size_t msglen);

#ifdef CBF_HAVE_CUDA
/* *d: a device copy of n host bytes (n zero bytes when h is NULL); 0 or
 * CBF_KERN_ECUDA with msg. */
int beam_dev_up(void **d, const void *h, size_t n, char *msg, size_t msglen);
#endif

#endif
