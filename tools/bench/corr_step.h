/* corr_step.h: the correlator as one timed step (a cbf_bench_step), which
 * the xeng area times alone and the beam area beside the beamformer
 * (CUDA builds only). */
#ifndef CBF_BENCH_CORR_STEP_H
#define CBF_BENCH_CORR_STEP_H

#include <stdio.h>
#include <cuda_runtime.h>

#include "correlator.h"

typedef struct cbf_bench_corr {
    const char *area;        /* the area timing it, for its message */
    cbf_corr_cuda *plan;
    cbf_corr_job job;
    cudaStream_t s;
} cbf_bench_corr;

/* One call of the plan on the job, queued on s: 0, or 1 after printing
 * "cbf-bench <area>: <why>". */
static inline int cbf_bench_corr_step(void *ctx)
{
    cbf_bench_corr *c = ctx;
    char msg[512];
    if (cbf_corr_cuda_run(c->plan, &c->job, c->s, msg, sizeof msg))
        return fprintf(stderr, "cbf-bench %s: %s\n", c->area, msg), 1;
    return 0;
}

#endif
