/* correlator_sm90.cu: the Hopper correlator, warpgroup MMA (wgmma, sm_90a
 * only; correlator.cu keeps the portable mma.sync kernel and picks this one
 * at run time). Same maths, output layout and order as correlator.cu.
 *
 * One block = two warpgroups = one 64 x 64 antenna tile (a1 rows, a2
 * columns) of one channel and one batch slice. As a real int8 GEMM over
 * k = (spectrum, re|im):
 *   A (registers): row (a1, p1) holds x = (re, im) along k; warp w of
 *     warpgroup h owns antennas 32 h + 8 w + (0..7), rows g = pol 0 and
 *     g + 8 = pol 1, so one 16-byte load (4 spectra, both pols) gives a
 *     thread its four fragment words with byte permutes;
 *   B (shared memory, 256 columns): column 4 a2 + 2 p2 + 0 holds (re, im),
 *     column 4 a2 + 2 p2 + 1 holds (-im, re), so accumulator columns come
 *     out as Re and Im of x(a1, p1) conj(x(a2, p2)) side by side.
 * Each stage is 64 spectra, so a column of B is one 128-byte row: the
 * K-major layout with the 128-byte swizzle that wgmma reads (16-byte chunk j
 * of row c stored at chunk j ^ (c % 8); 8-row groups 1024 bytes apart), four
 * m64n256k32 per warpgroup per stage. The threads write B from registers
 * (global loads one stage ahead, permuted and conjugated on the way), so B
 * is double-buffered and shared memory sees each byte once.
 *
 * Along k, the 32 bytes of one wgmma hold spectra 16 s + (0, 1, 4, 5, 8, 9,
 * 12, 13) in its first 16 bytes and (2, 3, 6, 7, ...) in its second, the
 * order the A fragment (thread t: bytes 4t..4t+3 and 16+4t..) makes
 * natural; B is written in the same order, and k is summed over.
 * (Warp-specialised and wait_group-1 pipelined versions were tried and were
 * slower on the H100: docs/performance.md.)
 *
 * int32 exactness: one stage adds at most 64 x 2 x 127^2 per element, so
 * 1023 stages (65472 spectra) stay below 2^31; registers are flushed into
 * the int64 accumulators that often and at the end. */
#include "correlator_sm90.h"

#include <stdint.h>

#define THREADS 256
#define TS 64                   /* spectra per stage */
#define TILE CBF_CORR_SM90_TILE /* antennas per tile side */
#define BBYTES (TILE * 4 * TS * 2) /* one stage of B: 256 rows of 128 bytes */
#define SMEM_BYTES (2 * BBYTES + 1024) /* two stages, plus 1024-byte alignment */
#define FLUSH_STAGES 1023

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CBF_SM90_DEVICE 1
#endif

#ifdef CBF_SM90_DEVICE
/* D(64 x 256, s32) += A(64 x 32, s8, registers) B(256 x 32, s8, shared). */
__device__ __forceinline__ void wgmma_n256(int *d, const unsigned a[4], uint64_t desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, {%128, %129, %130, %131}, %132, p;\n"
                 "}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                   "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
                   "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
                   "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
                   "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
                   "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
                   "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]),
                   "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]),
                   "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]),
                   "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]),
                   "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]),
                   "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]),
                   "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]),
                   "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]),
                   "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait0()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* Ordinary shared-memory stores become visible to wgmma (the async proxy). */
__device__ __forceinline__ void fence_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* Keeps a register's value where it is across the asynchronous MMA. */
__device__ __forceinline__ void keep(int &x) { asm volatile("" : "+r"(x)::"memory"); }
__device__ __forceinline__ void keep(unsigned &x) { asm volatile("" : "+r"(x)::"memory"); }

__device__ __forceinline__ void st_shared16(unsigned addr, uint4 v)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

/* K-major operand, 128-byte swizzle, 8-row groups 1024 bytes apart. */
__device__ __forceinline__ uint64_t sw128_desc(unsigned saddr)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}
#endif

__global__ void __launch_bounds__(THREADS, 1)
    corr_wgmma(const unsigned char *__restrict__ in, long long *__restrict__ accum,
               const int2 *__restrict__ tiles, int n_ants, int channels, int spectra,
               size_t b_begin, size_t b_end, size_t accum_len)
{
#ifdef CBF_SM90_DEVICE
    extern __shared__ unsigned char smem_dyn[];
    const unsigned sbase = ((unsigned)__cvta_generic_to_shared(smem_dyn) + 1023u) & ~1023u;

    const int2 tile = tiles[blockIdx.x];
    const int chan = blockIdx.y;
    const size_t nb = b_end - b_begin, per = (nb + gridDim.z - 1) / gridDim.z;
    const size_t lo = b_begin + blockIdx.z * per;
    const size_t hi = lo + per < b_end ? lo + per : b_end;
    if (lo >= hi)
        return; /* uniform over the block */
    const int steps = spectra / TS;
    const long long niter = (long long)(hi - lo) * steps;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wg = warp >> 2, w = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    /* A warpgroup whose antennas all lie past the last one only loads. */
    const bool active = tile.x + 32 * wg < n_ants;
    const int a1 = tile.x + 32 * wg + 8 * w + g; /* this thread's A antenna */
    /* B: this thread permutes antenna tile.y + bl, spectra 16 bks .. + 15 of
     * each stage; lanes 4 apart take neighbouring antennas, which with the
     * part swap below keeps the 16-byte stores free of bank conflicts. */
    const int bl = warp * 8 + (lane >> 2), bks = lane & 3;
    const int b_ant = tile.y + bl;
    const size_t per_ant = (size_t)channels * spectra * 4, per_batch = (size_t)n_ants * per_ant;
    const unsigned char *a_src =
        a1 < n_ants ? in + (size_t)a1 * per_ant + (size_t)chan * spectra * 4 + 16 * t : nullptr;
    const unsigned char *b_src =
        b_ant < n_ants ? in + (size_t)b_ant * per_ant + (size_t)chan * spectra * 4 + 64 * bks
                       : nullptr;
    auto stage_off = [&](long long it) -> size_t {
        const long long q = it / steps;
        return (size_t)(lo + q) * per_batch + (size_t)(it - q * steps) * (TS * 4);
    };

    uint4 an[4], bn[4]; /* raw samples of a coming stage: A rows, B columns */
    auto load_a = [&](long long it) {
        const bool ok = a_src && it < niter;
        const uint4 *p = ok ? reinterpret_cast<const uint4 *>(a_src + stage_off(it)) : nullptr;
#pragma unroll
        for (int k = 0; k < 4; k++)
            an[k] = ok ? __ldg(p + 4 * k) : make_uint4(0, 0, 0, 0);
    };
    auto load_b = [&](long long it) {
        const bool ok = b_src && it < niter;
        const uint4 *p = ok ? reinterpret_cast<const uint4 *>(b_src + stage_off(it)) : nullptr;
#pragma unroll
        for (int k = 0; k < 4; k++)
            bn[k] = ok ? __ldg(p + k) : make_uint4(0, 0, 0, 0);
    };
    auto store_b = [&](unsigned buf) {
#pragma unroll
        for (int p2 = 0; p2 < 2; p2++)
#pragma unroll
            for (int kc = 0; kc < 2; kc++) {
                unsigned re[4], im[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    re[k] = __byte_perm(kc ? bn[k].z : bn[k].x, kc ? bn[k].w : bn[k].y,
                                        p2 ? 0x7632 : 0x5410);
                    im[k] = cbf_corr_conj_perm(re[k]);
                }
#pragma unroll
                for (int ps = 0; ps < 2; ps++) {
                    /* odd antennas store their parts in the other order */
                    const int part = ps ^ (bl & 1);
                    const int c = 4 * bl + 2 * p2 + part;
                    const unsigned addr =
                        buf + (unsigned)c * 128u + ((unsigned)((2 * bks + kc) ^ (c & 7)) << 4);
                    st_shared16(addr, part ? make_uint4(im[0], im[1], im[2], im[3])
                                           : make_uint4(re[0], re[1], re[2], re[3]));
                }
            }
    };
    unsigned af[4][4]; /* A fragments of the stage being multiplied */
    auto frag_a = [&]() {
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            af[ks][0] = __byte_perm(an[ks].x, an[ks].y, 0x5410); /* row g: pol 0 */
            af[ks][1] = __byte_perm(an[ks].x, an[ks].y, 0x7632); /* row g + 8: pol 1 */
            af[ks][2] = __byte_perm(an[ks].z, an[ks].w, 0x5410);
            af[ks][3] = __byte_perm(an[ks].z, an[ks].w, 0x7632);
        }
    };

    int acc[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc[i] = 0;
    const size_t nbl = (size_t)n_ants * (n_ants + 1) / 2;
    long long *acc_out = accum + blockIdx.z * accum_len + (size_t)chan * nbl * 8;
    /* Accumulator j-th quad: rows g (p1 = 0) and g + 8 (p1 = 1), columns
     * 8 j + 2 t + (0, 1) = antenna 2 j + t / 2, p2 = t % 2, (re, im): the
     * products (0, p2) and (1, p2) are adjacent in SPEC.md order. */
    auto flush = [&]() {
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int a2 = tile.y + 2 * j + (t >> 1), p2 = t & 1;
            if (a2 < n_ants && a1 <= a2) {
                longlong2 *p = reinterpret_cast<longlong2 *>(
                    acc_out + (((size_t)a2 * (a2 + 1) / 2 + a1) * 4 + 2 * p2) * 2);
                longlong2 v0 = p[0], v1 = p[1];
                v0.x += acc[4 * j];
                v0.y += acc[4 * j + 1];
                v1.x += acc[4 * j + 2];
                v1.y += acc[4 * j + 3];
                p[0] = v0;
                p[1] = v1;
            }
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[4 * j + e] = 0;
            /* one quad at a time: hoisting all 64 loads would spill */
            asm volatile("" ::: "memory");
        }
    };

    load_a(0);
    load_b(0);
    store_b(sbase);
    frag_a();
    load_a(1);
    load_b(1);
    fence_async_smem();
    __syncthreads();
    for (long long it0 = 0; it0 < niter; it0 += FLUSH_STAGES) {
    const long long it1 = it0 + FLUSH_STAGES < niter ? it0 + FLUSH_STAGES : niter;
    for (long long it = it0; it < it1; it++) {
        const unsigned cur = sbase + (unsigned)(it & 1) * BBYTES;
        /* every warpgroup multiplies (zeros past the last antenna): a
         * branch around wgmma would make ptxas serialise them */
#pragma unroll
        for (int i = 0; i < 128; i++)
            keep(acc[i]);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
            wgmma_n256(acc, af[ks], sw128_desc(cur + 32 * ks));
        wg_commit();
        /* while the tensor cores run: B of the next stage into the other
         * buffer (last read by the MMAs waited for at the previous end) */
        if (it + 1 < niter)
            store_b(sbase + (unsigned)((it + 1) & 1) * BBYTES);
        load_b(it + 2);
        fence_async_smem();
        wg_wait0();
#pragma unroll
        for (int i = 0; i < 128; i++)
            keep(acc[i]);
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                keep(af[ks][e]);
        frag_a(); /* stage it + 1 */
        load_a(it + 2);
        __syncthreads(); /* B of stage it + 1 written; everyone done with stage it */
    }
    if (active)
        flush();
    }
#else
    __trap(); /* wgmma needs sm_90a */
#endif
}

int cbf_corr_sm90_fits(const cbf_corr_shape *s)
{
    return s->bits == 8 && s->spectra_per_heap % TS == 0;
}

cudaError_t cbf_corr_sm90_prepare(void)
{
    int dev, major, minor;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess)
        return e;
    if (major != 9 || minor != 0)
        return cudaErrorNoKernelImageForDevice; /* sm_90a code runs on 9.0 alone */
    return cudaFuncSetAttribute(corr_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                SMEM_BYTES);
}

cudaError_t cbf_corr_sm90_launch(const cbf_corr_job *job, const int2 *tiles, int ntiles,
                                 cudaStream_t stream)
{
    const cbf_corr_shape *s = &job->shape;
    dim3 grid((unsigned)ntiles, (unsigned)s->channels, (unsigned)job->slices);
    corr_wgmma<<<grid, THREADS, SMEM_BYTES, stream>>>(
        job->in, (long long *)job->accum, tiles, s->n_ants, s->channels, s->spectra_per_heap,
        job->batch_begin, job->batch_end, cbf_corr_accum_len(s));
    return cudaGetLastError();
}

