/* correlator_sm90.cu: the Hopper correlator, warpgroup MMA (wgmma, sm_90a
 * only; correlator.cu keeps the portable mma.sync kernel and picks this one
 * at run time). Same maths, output layout and order as correlator.cu.
 *
 * One block = two warpgroups = one 64 x 64 antenna tile (a1 rows, a2
 * columns) of one channel, over one piece of the call's time range. As a
 * real int8 GEMM over k = (spectrum, re|im), in spectrum order:
 *   A (registers): row (a1, p1) holds x = (re, im) along k; warp w of
 *     warpgroup h owns antennas 32 h + 8 w + (0..7), rows g = pol 0 and
 *     g + 8 = pol 1; thread t's fragment words are spectra 16 s + 2 t, +1
 *     and 16 s + 8 + 2 t, +1 of k-block s, two 8-byte shared loads and
 *     byte permutes;
 *   B (shared memory, 256 columns): column 4 a2 + 2 p2 + 0 holds (re, im),
 *     column 4 a2 + 2 p2 + 1 holds (-im, re), so accumulator columns come
 *     out as Re and Im of x(a1, p1) conj(x(a2, p2)) side by side. Each stage
 *     is 64 spectra, so a column is one 128-byte row: the K-major layout
 *     with the 128-byte swizzle that wgmma reads (16-byte chunk j of row c at
 *     chunk j ^ (c % 8); 8-row groups 1024 bytes apart), four m64n256k32 per
 *     warpgroup per stage.
 *
 * Samples reach shared memory by cp.async, DEPTH stages ahead, into a ring
 * of raw slots (the antennas' bytes as they are in memory, padded or
 * swizzled so that the reads below are free of bank conflicts): no register
 * holds a load in flight, which is what limited the earlier version (its
 * global loads waited behind the MMAs for registers). Per stage every thread
 * then turns raw samples into the next stage's A fragments (a second set of
 * registers, so the MMAs in flight keep theirs) and its share of the next
 * stage's B (permuted, conjugated, swizzled; B is double-buffered), while the
 * tensor cores run the current stage.
 *
 * Diagonal tiles: the second warpgroup's rows (antennas 32..63 of the tile)
 * meet only columns 32..63 that count (a1 <= a2), so it runs m64n128 on B's
 * upper half, a quarter less work for the tile.
 *
 * Time range: a call's stages (spectra / 64 per batch) are cut into pieces
 * of at most 1023 stages, sized so the blocks fill the GPU's last wave
 * evenly; a block is one (tile, channel, piece). Pieces of one tile may run
 * at once, so results are added with 64-bit atomics (integer: exact in any
 * order) into slice 0 of the accumulators.
 *
 * int32 exactness: one stage adds at most 64 x 2 x 127^2 per element, so
 * 1023 stages (65472 spectra) stay below 2^31. */
#include "correlator_sm90.h"

#include <stdint.h>

#define THREADS 256
#define TS 64                   /* spectra per stage */
#define TILE CBF_CORR_SM90_TILE /* antennas per tile side */
#define RAW_ANT (TS * 4)        /* bytes of one antenna in one stage */
#define BSW_BYTES (TILE * 4 * TS * 2) /* B of one stage: 256 rows of 128 bytes */
/* Raw A rows 288 bytes apart (32 mod 128): the 8-byte fragment loads of a
 * half-warp (4 antennas x 4 threads) fall in distinct banks. */
#define A_STRIDE 288
#define RAW_A (TILE * A_STRIDE)
#define RAW_BYTES (RAW_A + TILE * RAW_ANT) /* one ring slot: raw A, then raw B */
#define DEPTH 4                            /* ring slots */
#define SMEM_BYTES (2 * BSW_BYTES + DEPTH * RAW_BYTES + 1024) /* + 1024-byte alignment */
#define UNIT_MAX 1023 /* stages per piece: int32 partial sums stay exact */

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

/* D(64 x 128, s32) += A(64 x 32, s8, registers) B(128 x 32, s8, shared). */
__device__ __forceinline__ void wgmma_n128(int *d, const unsigned a[4], uint64_t desc)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, {%64, %65, %66, %67}, %68, p;\n"
                 "}\n"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
                   "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
                   "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
                   "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]),
                   "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]),
                   "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]),
                   "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]),
                   "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
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

/* 16 bytes global -> shared, bypassing L1; ok = 0 writes zeros and reads
 * nothing (antennas past the last). */
__device__ __forceinline__ void cp16(unsigned dst, const void *src, bool ok)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(ok ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint2 ld_shared8(unsigned addr)
{
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ uint4 ld_shared16(unsigned addr)
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
__device__ __forceinline__ void st_shared16(unsigned addr, unsigned a, unsigned b, unsigned c,
                                            unsigned d)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c),
                 "r"(d)
                 : "memory");
}

/* K-major operand, 128-byte swizzle, 8-row groups 1024 bytes apart. */
__device__ __forceinline__ uint64_t sw128_desc(unsigned saddr)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

/* What one block works on, and this thread's place in it. */
struct corr_unit {
    const unsigned char *in;
    long long *out; /* slice 0, this channel */
    int2 tile;      /* (a1 origin, a2 origin) */
    int n_ants, steps, n;   /* stages per batch; stages in this piece */
    size_t per_ant, per_batch;
    size_t off;     /* byte offset of the piece's first stage (batch and spectrum) */
    int r;          /* its stage within the batch */
    unsigned sbase; /* 1024-aligned shared memory */
};

/* Cursor over the stages that cp.async fetches, one stage after another. */
__device__ __forceinline__ void next_stage(corr_unit &u)
{
    u.off += RAW_ANT;
    if (++u.r == u.steps) {
        u.r = 0;
        u.off += u.per_batch - (size_t)u.steps * RAW_ANT;
    }
}

/* HALF: this warpgroup is the second of a diagonal tile and multiplies B's
 * upper 128 columns only (accumulators 64..127). */
template <bool HALF> __device__ __forceinline__ void corr_run(corr_unit &u)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, w = warp & 3;
    const int g = lane >> 2, t = lane & 3;
    const unsigned bsw0 = u.sbase, ring = u.sbase + 2 * BSW_BYTES;

    /* cp.async: thread copies 16-byte chunk (tid & 15) of antennas
     * (tid >> 4) + 16 q, q = 0..3, of A's and of B's tile side. Raw B chunk
     * c is stored at c ^ (c >> 3), for the B reads below. */
    const int cc = tid & 15, ca = tid >> 4;
    const unsigned dst_a = (unsigned)(ca * A_STRIDE + 16 * cc);
    const unsigned dst_b = (unsigned)(RAW_A + ca * RAW_ANT + 16 * (cc ^ (cc >> 3)));
    const size_t q_step = 16 * u.per_ant;
    const unsigned char *src_a = u.in + (size_t)(u.tile.x + ca) * u.per_ant + 16 * cc;
    const unsigned char *src_b = u.in + (size_t)(u.tile.y + ca) * u.per_ant + 16 * cc;
    unsigned ok = 0; /* bit q: A antenna valid; bit 4 + q: B antenna valid */
#pragma unroll
    for (int q = 0; q < 4; q++) {
        ok |= (unsigned)(u.tile.x + ca + 16 * q < u.n_ants) << q;
        ok |= (unsigned)(u.tile.y + ca + 16 * q < u.n_ants) << (4 + q);
    }
    auto copy = [&](int stage) {
        const unsigned slot = ring + (unsigned)(stage % DEPTH) * RAW_BYTES;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const bool va = (ok >> q) & 1, vb = (ok >> (4 + q)) & 1;
            cp16(slot + dst_a + q * 16 * A_STRIDE, va ? src_a + u.off + q * q_step : u.in, va);
            cp16(slot + dst_b + q * 16 * RAW_ANT, vb ? src_b + u.off + q * q_step : u.in, vb);
        }
    };

    /* A fragments of a stage from its raw slot. */
    const unsigned a_rd = (unsigned)((32 * wg + 8 * w + g) * A_STRIDE + 8 * t);
    auto frag_a = [&](int stage, unsigned (&af)[4][4]) {
        const unsigned base = ring + (unsigned)(stage % DEPTH) * RAW_BYTES + a_rd;
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint2 lo = ld_shared8(base + 64 * ks), hi = ld_shared8(base + 64 * ks + 32);
            af[ks][0] = __byte_perm(lo.x, lo.y, 0x5410); /* row g: pol 0 */
            af[ks][1] = __byte_perm(lo.x, lo.y, 0x7632); /* row g + 8: pol 1 */
            af[ks][2] = __byte_perm(hi.x, hi.y, 0x5410);
            af[ks][3] = __byte_perm(hi.x, hi.y, 0x7632);
        }
    };

    /* B of a stage: thread builds chunk j = tid & 7 (spectra 8 j .. 8 j + 7)
     * of antennas (tid >> 3) + 32 qq; the 8 lanes storing at once hold one
     * antenna and the 8 chunks, so neither the loads nor the stores meet a
     * bank twice. */
    const int bj = tid & 7, bant = tid >> 3;
    const unsigned b_rd0 = (unsigned)(RAW_A + bant * RAW_ANT + 16 * ((2 * bj) ^ (bj >> 2)));
    const unsigned b_rd1 = (unsigned)(RAW_A + bant * RAW_ANT + 16 * ((2 * bj + 1) ^ (bj >> 2)));
    auto build_b = [&](int stage, unsigned bsw) {
        const unsigned slot = ring + (unsigned)(stage % DEPTH) * RAW_BYTES;
#pragma unroll
        for (int qq = 0; qq < 2; qq++) {
            const uint4 x0 = ld_shared16(slot + b_rd0 + qq * 32 * RAW_ANT);
            const uint4 x1 = ld_shared16(slot + b_rd1 + qq * 32 * RAW_ANT);
            const int a = bant + 32 * qq;
#pragma unroll
            for (int p2 = 0; p2 < 2; p2++) {
                const unsigned sel = p2 ? 0x7632 : 0x5410;
                const unsigned r0 = __byte_perm(x0.x, x0.y, sel), r1 = __byte_perm(x0.z, x0.w, sel);
                const unsigned r2 = __byte_perm(x1.x, x1.y, sel), r3 = __byte_perm(x1.z, x1.w, sel);
                const int c = 4 * a + 2 * p2;
                st_shared16(bsw + (unsigned)c * 128u + ((unsigned)(bj ^ (c & 7)) << 4), r0, r1, r2,
                            r3);
                st_shared16(bsw + (unsigned)(c + 1) * 128u + ((unsigned)(bj ^ ((c + 1) & 7)) << 4),
                            cbf_corr_conj_perm(r0), cbf_corr_conj_perm(r1),
                            cbf_corr_conj_perm(r2), cbf_corr_conj_perm(r3));
            }
        }
    };

    int acc[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc[i] = 0;
    unsigned af0[4][4], af1[4][4];
    const int n = u.n;

    /* Prologue: stages 0 .. DEPTH - 1 in flight; stage 0 into B and A. */
#pragma unroll
    for (int d = 0; d < DEPTH; d++) {
        if (d < n)
            copy(d);
        next_stage(u);
        cp_commit();
    }
    cp_wait<DEPTH - 2>(); /* stages 0 and 1: this thread's copies */
    __syncthreads();      /* ... and everyone's */
    build_b(0, bsw0);
    frag_a(0, af0);
    fence_async_smem();
    __syncthreads();

    /* Stage s: B in bsw[s & 1], A in cur. Copies of stage s + 1 and s + 2
     * have landed; s + 3 .. s + DEPTH - 1 are in flight. */
    auto step = [&](int s, unsigned (&cur)[4][4], unsigned (&nxt)[4][4]) {
        const unsigned b = bsw0 + (unsigned)(s & 1) * BSW_BYTES;
#pragma unroll
        for (int i = 0; i < 128; i++)
            keep(acc[i]);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            if constexpr (HALF)
                wgmma_n128(acc + 64, cur[ks], sw128_desc(b + 128 * 128 + 32 * ks));
            else
                wgmma_n256(acc, cur[ks], sw128_desc(b + 32 * ks));
        }
        wg_commit();
        /* while the tensor cores run: stage s + 1 into the other B buffer
         * (its last readers, stage s - 1's MMAs, were waited for) and the
         * other A fragments */
        if (s + 1 < n) {
            build_b(s + 1, bsw0 + (unsigned)((s + 1) & 1) * BSW_BYTES);
            frag_a(s + 1, nxt);
        }
        /* the slot of stage s, read in the previous step, refills */
        if (s + DEPTH < n)
            copy(s + DEPTH);
        next_stage(u);
        cp_commit();
        cp_wait<DEPTH - 2>(); /* stage s + 2 landed (read in the next step) */
        fence_async_smem();
        wg_wait0();
#pragma unroll
        for (int i = 0; i < 128; i++)
            keep(acc[i]);
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                keep(cur[ks][e]);
        __syncthreads();
    };
    for (int s = 0; s < n; s += 2) {
        step(s, af0, af1);
        if (s + 1 < n)
            step(s + 1, af1, af0);
    }

    /* Accumulator quad j: rows g (p1 = 0) and g + 8 (p1 = 1), columns
     * 8 j + 2 t + (0, 1) = antenna 2 j + t / 2, p2 = t % 2, (re, im): the
     * products (0, p2) and (1, p2) are adjacent in SPEC.md order. */
    const int a1 = u.tile.x + 32 * wg + 8 * w + g;
#pragma unroll
    for (int j = HALF ? 16 : 0; j < 32; j++) {
        const int a2 = u.tile.y + 2 * j + (t >> 1), p2 = t & 1;
        if (a2 < u.n_ants && a1 <= a2) {
            unsigned long long *p = reinterpret_cast<unsigned long long *>(
                u.out + (((size_t)a2 * (a2 + 1) / 2 + a1) * 4 + 2 * p2) * 2);
#pragma unroll
            for (int e = 0; e < 4; e++)
                atomicAdd(p + e, (unsigned long long)(long long)acc[4 * j + e]);
        }
    }
}
#endif

__global__ void __launch_bounds__(THREADS, 1)
    corr_wgmma(const unsigned char *__restrict__ in, long long *__restrict__ accum,
               const int2 *__restrict__ tiles, int ntiles, int n_ants, int channels,
               int spectra, size_t b_begin, long long niter, int unit)
{
#ifdef CBF_SM90_DEVICE
    extern __shared__ unsigned char smem_dyn[];
    corr_unit u;
    u.sbase = ((unsigned)__cvta_generic_to_shared(smem_dyn) + 1023u) & ~1023u;
    const unsigned items = (unsigned)ntiles * (unsigned)channels;
    const unsigned item = blockIdx.x % items, piece = blockIdx.x / items;
    const int chan = (int)(item / (unsigned)ntiles);
    u.tile = tiles[item % (unsigned)ntiles];
    u.in = in;
    u.n_ants = n_ants;
    u.steps = spectra / TS;
    const long long k0 = (long long)piece * unit;
    u.n = (int)(niter - k0 < unit ? niter - k0 : unit);
    u.per_ant = (size_t)channels * spectra * 4;
    u.per_batch = (size_t)n_ants * u.per_ant;
    const long long q = k0 / u.steps;
    u.r = (int)(k0 - q * u.steps);
    u.off = (b_begin + (size_t)q) * u.per_batch + (size_t)chan * spectra * 4 +
            (size_t)u.r * RAW_ANT;
    u.out = accum + (size_t)chan * ((size_t)n_ants * (n_ants + 1) / 2) * 8;
    if (u.tile.x == u.tile.y && threadIdx.x >= 128)
        corr_run<true>(u);
    else
        corr_run<false>(u);
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

/* Stages per piece: at most UNIT_MAX, and among the piece counts that allow,
 * the one whose blocks best fill whole waves of `sms` blocks (one block per
 * SM), counting a few stages per block for the pipeline's start and the
 * flush. */
static int pick_unit(long long niter, long long items, int sms)
{
    const long long pmin = (niter + UNIT_MAX - 1) / UNIT_MAX;
    const double fixed = 4.0; /* stages' worth of prologue and flush per block */
    long long best_unit = (niter + pmin - 1) / pmin;
    double best = -1.0;
    for (long long p = pmin; p <= pmin + 16; p++) {
        const long long unit = (niter + p - 1) / p, pieces = (niter + unit - 1) / unit;
        const long long blocks = items * pieces;
        if ((unit < 16 && p > pmin) || blocks > 0x7FFFFFFFLL)
            break;
        const long long waves = (blocks + sms - 1) / sms;
        const double eff = (double)items * (double)niter / ((double)waves * sms * (unit + fixed));
        if (eff > best * 1.005) { /* more pieces only for a real gain */
            best = eff;
            best_unit = unit;
        }
    }
    return (int)best_unit;
}

cudaError_t cbf_corr_sm90_launch(const cbf_corr_job *job, const int2 *tiles, int ntiles, int sms,
                                 cudaStream_t stream)
{
    const cbf_corr_shape *s = &job->shape;
    const long long steps = s->spectra_per_heap / TS;
    const long long niter = (long long)(job->batch_end - job->batch_begin) * steps;
    const long long items = (long long)ntiles * s->channels;
    const int unit = pick_unit(niter, items, sms);
    const long long blocks = items * ((niter + unit - 1) / unit);
    if (blocks > 0x7FFFFFFFLL)
        return cudaErrorInvalidConfiguration;
    corr_wgmma<<<(unsigned)blocks, THREADS, SMEM_BYTES, stream>>>(
        job->in, (long long *)job->accum, tiles, ntiles, s->n_ants, s->channels,
        s->spectra_per_heap, job->batch_begin, niter, unit);
    return cudaGetLastError();
}
