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

#endif
