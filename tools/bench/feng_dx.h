/* feng_dx.h: cbf-bench feng --dx (feng_dx.c), built where cuFFTDx is. */
#ifndef CBF_BENCH_FENG_DX_H
#define CBF_BENCH_FENG_DX_H

#include <stddef.h>

/* The cuFFTDx-against-cuFFT table for `samples` complex points (samples
 * per pol: both pols' real samples, two to a point),
 * against copy_rate (bytes read + written per second, measured by the
 * caller); 0, or 1 after printing why. */
int cbf_bench_feng_dx(double copy_rate, size_t samples, int reps);

#endif
