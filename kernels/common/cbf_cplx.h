/* kernels/common/cbf_cplx.h: the float2 complex helpers that the FFT
 * stages share (fft_post's post-processing, the narrowband FIR's first
 * radix-n stage), written once. CUDA device code only. */
#ifndef CBF_KERNEL_CBF_CPLX_H
#define CBF_KERNEL_CBF_CPLX_H

static __device__ __forceinline__ float2 cmul(float2 a, float2 b)
{
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

/* exp(-2 pi i e / 4) for e = 0..3, applied without a multiply. */
static __device__ __forceinline__ float2 rot_quarter(float2 v, int e)
{
    switch (e & 3) {
    case 0: return v;
    case 1: return make_float2(v.y, -v.x);
    case 2: return make_float2(-v.x, -v.y);
    default: return make_float2(-v.y, v.x);
    }
}

/* exp(i pi x) */
static __device__ __forceinline__ float2 expi_pi(float x)
{
    float sn, cs;
    sincospif(x, &sn, &cs);
    return make_float2(cs, sn);
}

#endif
