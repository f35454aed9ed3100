/* correlator_sm90.h: the Hopper (sm_90a) warpgroup-MMA correlator, private to
 * this folder. correlator.cu calls it for plans it can serve (see
 * cbf_corr_sm90_fits); correlator_sm90.cu is compiled for sm_90a alone. */
#ifndef CBF_KERNEL_CORRELATOR_SM90_H
#define CBF_KERNEL_CORRELATOR_SM90_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "beamform.h"
#include "correlator.h"

/* Antennas per tile side: 64 rows (A) x 64 columns (B). */
#define CBF_CORR_SM90_TILE 64

#ifdef __CUDACC__
/* (r0, i0, r1, i1) -> (-i0, r0, -i1, r1): 0x00FF00FF minus the imaginary
 * bytes negates them, the 0xFF bytes absorbing the borrows. Both kernels
 * build B's imaginary-part columns with it. */
__device__ __forceinline__ unsigned cbf_corr_conj_perm(unsigned v)
{
    return __byte_perm(v, 0x00FF00FFu - (v & 0xFF00FF00u), 0x2705);
}
#endif

/* 1 when the shape suits the kernels: 8- or 4-bit, spectra_per_heap a
 * multiple of their 64-spectrum stage. */
int cbf_corr_sm90_fits(const cbf_corr_shape *s);

/* Checks that the device can run the sm_90a image and raises the kernel's
 * shared-memory limit; cudaSuccess or the error. */
cudaError_t cbf_corr_sm90_prepare(void);

/* The kernel a plan of n_ants antennas runs, as cbf_corr_cuda_kernel says
 * it: "wgmma 64x64", or "wgmma 80x80 (small)" for 64 < n_ants <= 80 (one
 * block per channel). */
const char *cbf_corr_sm90_kernel(int n_ants);

/* tiles: device array of (a1 origin, a2 origin), a1 origin <= a2 origin,
 * both multiples of CBF_CORR_SM90_TILE; sms: the GPU's multiprocessors.
 * Adds into slice 0 of job->accum whatever job->slices says (the kernel
 * spreads the time range over blocks itself, with atomic adds). */
cudaError_t cbf_corr_sm90_launch(const cbf_corr_job *job, const int2 *tiles, int ntiles, int sms,
                                 cudaStream_t stream);

/* The correlation and up to 8 beams of the same batches in one kernel
 * (xb_wgmma): 1 when the jobs suit it (8-bit, N <= 64, one input, whole
 * heaps from batch 0, no raw sums). */
int cbf_corr_sm90_xb_shape_fits(const cbf_corr_shape *s, const cbf_beam_shape *b);
int cbf_corr_sm90_xb_fits(const cbf_corr_job *job, const cbf_beam_job *beams);
/* The one kernel's coefficient digits of every channel of a beam job
 * (shape-dependent bytes: cbf_corr_sm90_xb_digits_bytes), made on a
 * stream by a kernel of their own so that calls with the same coefficients
 * copy them instead of making them (cbf_xb_cuda_run keeps them). */
size_t cbf_corr_sm90_xb_digits_bytes(const cbf_beam_shape *beams);
cudaError_t cbf_corr_sm90_xb_digits(const cbf_beam_job *beams, void *digits, cudaStream_t stream);
/* digits: NULL (the kernel makes the digits itself) or
 * cbf_corr_sm90_xb_digits's for these coefficients. */
cudaError_t cbf_corr_sm90_xb_launch(const cbf_corr_job *job, const cbf_beam_job *beams, const void *digits,
                                    const int2 *tiles, int sms, cudaStream_t stream);

#endif
