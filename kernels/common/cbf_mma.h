/* kernels/common/cbf_mma.h (not mma.h: CUDA ships one of that name): the
 * warp-level int8 tensor-core product every mma.sync kernel uses (the
 * correlator's portable kernel, the beamformer), written once. Compute
 * capability 8.0 and up; CUDA device code only.
 *
 * c += a x b for one m16n8k32 tile, s8 x s8 -> s32 (exact): a0..a3 the
 * row-major A fragment (rows g and g + 8 of k 0-15, then of k 16-31, g =
 * lane / 4), b0, b1 the column-major B fragment, c the four accumulators
 * (rows g and g + 8, columns 2 (lane % 4) and the next). */
#ifndef CBF_KERNEL_CBF_MMA_H
#define CBF_KERNEL_CBF_MMA_H

static __device__ __forceinline__ void cbf_mma_s8(int c[4], unsigned a0, unsigned a1, unsigned a2,
                                                  unsigned a3, unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#endif
