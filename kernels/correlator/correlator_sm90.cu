/* correlator_sm90.cu: the Hopper correlator, warpgroup MMA (wgmma, sm_90a
 * only; correlator.cu keeps the portable mma.sync kernel and picks this one
 * at run time). Same maths, output layout and order as correlator.cu.
 *
 * Two kernels: for 64 < N <= 80, corr_wgmma_small (one block per channel;
 * "Small arrays" below); otherwise corr_wgmma, described here.
 *
 * One block = two warpgroups = one 64 x 64 antenna tile (a1 rows, a2
 * columns) of one channel, over one piece of the call's time range. As a
 * real int8 GEMM over k = (spectrum, re|im), in spectrum order:
 *   A (registers): row (a1, p1) holds x = (re, im) along k; warp w of
 *     warpgroup h owns 8 of antennas 32 h + 8 w + (0..7) (order: see a1 in
 *     corr_wgmma), rows g = pol 0 and g + 8 = pol 1; thread t's fragment
 *     words are spectra 16 s + 2 t, +1 and 16 s + 8 + 2 t, +1 of k-block s,
 *     two 8-byte shared loads and byte permutes;
 *   B (shared memory, 256 columns): column 4 a2 + 2 p2 + 0 holds (re, im),
 *     column 4 a2 + 2 p2 + 1 holds (-im, re), so accumulator columns come
 *     out as Re and Im of x(a1, p1) conj(x(a2, p2)) side by side. Each stage
 *     is 64 spectra, so a column is one 128-byte row: the K-major layout
 *     with the 128-byte swizzle that wgmma reads (16-byte chunk j of row c at
 *     chunk j ^ (c % 8); 8-row groups 1024 bytes apart), four m64n256k32 per
 *     warpgroup per stage.
 *
 * Samples reach shared memory through the tensor-copy engine (TMA): one
 * thread copies each stage, DEPTH - 1 stages ahead, as boxes of 64 antennas
 * x 32 spectra into a ring of slots with one mbarrier each; no register
 * holds a load in flight (what limited the first version: its global loads
 * waited behind the MMAs for registers), and no thread spends instructions
 * on addresses. Per stage every thread then turns raw samples into the next
 * stage's A fragments (a second set of registers, so the MMAs in flight keep
 * theirs) and its share of the next stage's B (permuted, conjugated,
 * swizzled; B is double-buffered), while the tensor cores run the current
 * stage. The lanes' shares are laid out so that no shared load or store
 * meets a bank twice.
 *
 * 4-bit input (CI4, BITS = 4) runs the same kernels: a stage is then 128
 * bytes per antenna, one box of 64 antennas x 64 spectra per tile side
 * (half of each ring slot used), and the A fragments and B columns are built
 * from it by expanding nibbles to int8 (ci4_*) where 8-bit input takes byte
 * permutes. B's layout, the MMAs and the accumulators are unchanged (the
 * 64 x 64 kernel's A holds 16 x the samples, and its flush shifts back:
 * frag_a).
 *
 * Diagonal tiles: the second warpgroup's rows (antennas 32..63 of the tile)
 * meet only columns 32..63 that count (a1 <= a2), so it runs m64n128 on B's
 * upper half, a quarter less work for the tile. Edge tiles (columns past the
 * last antenna) multiply only up to the next 64 columns past it.
 *
 * Time range: a call's stages (spectra / 64 per batch) are cut into pieces
 * of at most 1023 stages, sized so the blocks fill the GPU's last wave
 * evenly; a block is one (tile, channel, piece). Pieces of one tile may run
 * at once, so results are added with 64-bit atomics (integer: exact in any
 * order) into slice 0 of the accumulators: through shared memory in output
 * order, so that each warp instruction adds 32 consecutive values (corr_run).
 *
 * int32 exactness: one stage adds at most 64 x 2 x 127^2 per element, so
 * 1023 stages (65472 spectra) stay below 2^31. 4-bit: at most 64 x 2 x
 * 128 x 8 (A holds 16 x the samples in the 64 x 64 kernel, frag_a). */
#include "correlator_sm90.h"

#include <cuda.h> /* CUtensorMap (the type only: no libcuda link) */
#include <cudaTypedefs.h>
#include <stdint.h>

#include "beamform_dev.cuh"
#include "cbf_mma.h"
#include "correlator_sm90_tuning.h"

#define THREADS 256
#define TS 64                   /* spectra per stage */
#define TILE CBF_CORR_SM90_TILE /* antennas per tile side */
#define BSW_BYTES (TILE * 4 * TS * 2) /* B of one stage: 256 rows of 128 bytes */
/* One bulk-tensor copy: 64 antennas x 128 bytes (32 spectra), 128-byte
 * swizzle (16-byte chunk c of antenna row r at chunk c ^ (r % 8)). */
#define HALF_BYTES (TILE * 128)
#define RAW_BYTES (4 * HALF_BYTES) /* one ring slot: A's two halves, B's two */
#define DEPTH 4                    /* ring slots */
/* B's two buffers, the ring, its mbarriers, 1024 bytes for alignment */
#define SMEM_BYTES (2 * BSW_BYTES + DEPTH * RAW_BYTES + 8 * DEPTH + 1024)
#define UNIT_MAX 1023 /* stages per piece: int32 partial sums stay exact */
/* The flush's staging rows (corr_run): 64 a1 x 8 values, int32, and 8
 * words more so that the two rows and two pols one quarter-warp stores
 * meet distinct banks; 64 rows fit in the B buffers and the ring. */
#define FL_ROW (TILE * 8 + 8)
static_assert(TILE * FL_ROW * 4 <= 2 * BSW_BYTES + DEPTH * RAW_BYTES, "flush staging");

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CBF_SM90_DEVICE 1
#endif

#ifdef CBF_SM90_DEVICE
/* wgmma operand lists: accumulator registers %0 .. %(n - 1) as "+r"(d[i])
 * in groups of 32, then the A fragments or descriptor and B's descriptor. */
#define CBF_REGS_0 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define CBF_REGS_1 \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define CBF_REGS_2 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define CBF_REGS_3 \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define CBF_D8(i)                                                                              \
    "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), "+r"(d[i + 5]), \
        "+r"(d[i + 6]), "+r"(d[i + 7])
#define CBF_D32(i) CBF_D8(i), CBF_D8(i + 8), CBF_D8(i + 16), CBF_D8(i + 24)
#define CBF_WGMMA_HEAD(n) \
    "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned.m64n" #n "k32.s32.s8.s8 {"
#define CBF_WGMMA_TAIL "p;\n}\n"

/* D(64 x 256, s32) += A(64 x 32, s8, registers) B(256 x 32, s8, shared). */
__device__ __forceinline__ void wgmma_n256(int *d, const unsigned a[4], uint64_t desc)
{
    asm volatile(CBF_WGMMA_HEAD(256) CBF_REGS_0 ", " CBF_REGS_1 ", " CBF_REGS_2 ", " CBF_REGS_3
                 "}, {%128, %129, %130, %131}, %132, " CBF_WGMMA_TAIL
                 : CBF_D32(0), CBF_D32(32), CBF_D32(64), CBF_D32(96)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

/* D(64 x 128, s32) += A(64 x 32, s8, registers) B(128 x 32, s8, shared). */
__device__ __forceinline__ void wgmma_n128(int *d, const unsigned a[4], uint64_t desc)
{
    asm volatile(CBF_WGMMA_HEAD(128) CBF_REGS_0 ", " CBF_REGS_1
                 "}, {%64, %65, %66, %67}, %68, " CBF_WGMMA_TAIL
                 : CBF_D32(0), CBF_D32(32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

/* D(64 x 64, s32) += A(64 x 32, s8, registers) B(64 x 32, s8, shared). */
__device__ __forceinline__ void wgmma_n64(int *d, const unsigned a[4], uint64_t desc)
{
    asm volatile(CBF_WGMMA_HEAD(64) CBF_REGS_0 "}, {%32, %33, %34, %35}, %36, " CBF_WGMMA_TAIL
                 : CBF_D32(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

/* The same with A in shared memory too (the small-array kernel). */
__device__ __forceinline__ void wgmma_ss_n256(int *d, uint64_t adesc, uint64_t bdesc)
{
    asm volatile(CBF_WGMMA_HEAD(256) CBF_REGS_0 ", " CBF_REGS_1 ", " CBF_REGS_2 ", " CBF_REGS_3
                 "}, %128, %129, " CBF_WGMMA_TAIL
                 : CBF_D32(0), CBF_D32(32), CBF_D32(64), CBF_D32(96)
                 : "l"(adesc), "l"(bdesc));
}
__device__ __forceinline__ void wgmma_ss_n192(int *d, uint64_t adesc, uint64_t bdesc)
{
    asm volatile(CBF_WGMMA_HEAD(192) CBF_REGS_0 ", " CBF_REGS_1 ", " CBF_REGS_2
                 "}, %96, %97, " CBF_WGMMA_TAIL
                 : CBF_D32(0), CBF_D32(32), CBF_D32(64)
                 : "l"(adesc), "l"(bdesc));
}
__device__ __forceinline__ void wgmma_ss_n64(int *d, uint64_t adesc, uint64_t bdesc)
{
    asm volatile(CBF_WGMMA_HEAD(64) CBF_REGS_0 "}, %32, %33, " CBF_WGMMA_TAIL
                 : CBF_D32(0)
                 : "l"(adesc), "l"(bdesc));
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

/* mbarriers: the copy engine reports the bytes it wrote into one, and the
 * threads wait for its phase to flip. */
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n.reg .pred p;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* One box of the input tensor (byte, channel, antenna, batch) into shared
 * memory, completing on mbarrier bar. */
__device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap *map, int c0, int c1,
                                         int c2, int c3, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ uint2 ld_shared8(unsigned addr)
{
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ unsigned ld_shared4(unsigned addr)
{
    unsigned v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
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

/* CI4 (4-bit) samples to int8, four bytes at a time (correlator.h: re in
 * the high nibble, im in the low one, two's complement). ci4_u: nibble n of
 * each byte (shift 4: re, 0: im) as u = n ^ 8 = v + 8 in 0..15. Then per
 * byte u + 0x78 = v + 0x80 and 0x88 - u = 0x80 - v stay inside the byte (no
 * carry or borrow crosses into the next), and flipping bit 7 leaves v and
 * -v: exact for -8 too (-(-8) = 8 fits int8). */
__device__ __forceinline__ unsigned ci4_u(unsigned x, int shift)
{
    return ((x >> shift) & 0x0F0F0F0Fu) ^ 0x08080808u;
}
__device__ __forceinline__ unsigned ci4_val(unsigned u) { return (u + 0x78787878u) ^ 0x80808080u; }
__device__ __forceinline__ unsigned ci4_neg(unsigned u) { return (0x88888888u - u) ^ 0x80808080u; }
/* A CI4 word (both pols of spectra s, s + 1) gives, for pol p, the int8
 * word (re, im) of s and s + 1 as perm(re, im, CI4_SEL(p)), and the
 * conjugate column's (-im, re) as perm(-im, re, CI4_SEL(p)). */
#define CI4_SEL(p) ((p) ? 0x7351u : 0x6240u)

/* One raw 4-bit chunk (8 spectra, both pols) expanded: words re, im, -im. */
struct ci4_chunk {
    unsigned re[4], im[4], ni[4];
};
__device__ __forceinline__ ci4_chunk ci4_expand(uint4 x)
{
    const unsigned w[4] = {x.x, x.y, x.z, x.w};
    ci4_chunk c;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const unsigned ui = ci4_u(w[i], 0);
        c.re[i] = ci4_val(ci4_u(w[i], 4));
        c.im[i] = ci4_val(ui);
        c.ni[i] = ci4_neg(ui);
    }
    return c;
}

/* Pol p's two B rows from an expanded 4-bit chunk: (re, im) words to addr,
 * (-im, re) to conj_addr (the column that yields the imaginary part). */
__device__ __forceinline__ void ci4_store(const ci4_chunk &e, int p, unsigned addr,
                                          unsigned conj_addr)
{
    const unsigned sel = CI4_SEL(p);
    st_shared16(addr, __byte_perm(e.re[0], e.im[0], sel), __byte_perm(e.re[1], e.im[1], sel),
                __byte_perm(e.re[2], e.im[2], sel), __byte_perm(e.re[3], e.im[3], sel));
    st_shared16(conj_addr, __byte_perm(e.ni[0], e.re[0], sel), __byte_perm(e.ni[1], e.re[1], sel),
                __byte_perm(e.ni[2], e.re[2], sel), __byte_perm(e.ni[3], e.re[3], sel));
}

/* K-major operand, 128-byte swizzle, 8-row groups sbo bytes apart (1024:
 * contiguous rows). */
__device__ __forceinline__ uint64_t sw128_desc(unsigned saddr, unsigned sbo = 1024)
{
    return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) |
           ((uint64_t)(sbo >> 4) << 32) | ((uint64_t)1 << 62);
}

/* What one block works on. */
struct corr_unit {
    long long *out; /* slice 0, this channel */
    int2 tile;      /* (a1 origin, a2 origin) */
    int n_ants, chan, steps, n; /* stages per batch; stages in this piece */
    int batch, r;   /* copy cursor: batch and stage within it of the next copy */
    unsigned sbase; /* 1024-aligned shared memory */
    /* 0, or (xb_wgmma) the mbarriers on which the beams' warpgroup says it
     * is done with each ring slot; the ring's own mbarriers are then set
     * up before corr_run */
    unsigned empty;
    int staged; /* the flush through shared memory (corr_run) */
};

/* The correlating warpgroups' barrier, of 256 threads: the whole block in
 * corr_wgmma and corr_wgmma_small; in xb_wgmma the beams' warpgroup goes
 * at its own pace. The warpgroups reach it from different instantiations
 * (corr_run's column ranges, small_seg's halves), so it is the form of
 * barrier that allows that (barrier.sync, not the .aligned bar.sync that
 * __syncthreads is). */
__device__ __forceinline__ void corr_sync() { asm volatile("barrier.sync 2, 256;\n" ::: "memory"); }

__device__ __forceinline__ void next_stage(corr_unit &u)
{
    if (++u.r == u.steps) {
        u.r = 0;
        u.batch++;
    }
}

/* The copy of one stage (batch, stage r within it) of a tile's antennas
 * into a ring slot, completing on mbarrier bar: per copy half, a box of
 * the tile's A antennas and, off the diagonal, one of its B antennas. */
template <int BITS>
__device__ __forceinline__ void stage_copy(unsigned slot, unsigned bar, const CUtensorMap *map, int chan,
                                           int2 tile, int batch, int r)
{
    constexpr int NH = BITS / 4;
    const bool diag = tile.x == tile.y;
    mbar_expect_tx(bar, (diag ? 1 : 2) * NH * HALF_BYTES);
#pragma unroll
    for (int h = 0; h < NH; h++) {
        const int c0 = r * TS * BITS / 2 + h * 128;
        tma_load(slot + h * HALF_BYTES, map, c0, chan, tile.x, batch, bar);
        if (!diag)
            tma_load(slot + (NH + h) * HALF_BYTES, map, c0, chan, tile.y, batch, bar);
    }
}

/* This warpgroup multiplies B's columns START .. START + W - 1 (accumulators
 * START / 2 ..): W = 256 on whole tiles; START = 128 for the second
 * warpgroup of a diagonal tile (its antennas meet only the upper half);
 * W < 256 where the tile's columns run past the last antenna (columns of
 * absent antennas are multiplied only up to the next 64); W = 0 for a
 * warpgroup whose antennas are all past the last, which only helps. */
template <int BITS, int START, int W>
__device__ __forceinline__ void corr_run(corr_unit &u, const CUtensorMap *map, int a1)
{
    /* Copy halves per tile side and stage: 8-bit, 256 bytes per antenna
     * (two boxes of 32 spectra); 4-bit, 128 bytes (one box of 64 spectra,
     * the ring slot half used). */
    constexpr int NH = BITS / 4;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned bsw0 = u.sbase, ring = u.sbase + 2 * BSW_BYTES;
    const unsigned bar0 = ring + DEPTH * RAW_BYTES;
    /* A diagonal tile's B antennas are its A antennas: copied once. */
    const bool diag = u.tile.x == u.tile.y;
    const unsigned b_raw = diag ? 0 : NH * HALF_BYTES;

    /* Stage s lives in ring slot s % DEPTH, with that slot's mbarrier. */
    auto slot_of = [&](int stage) { return ring + (unsigned)(stage % DEPTH) * RAW_BYTES; };
    auto bar_of = [&](int stage) { return bar0 + 8u * (unsigned)(stage % DEPTH); };
    /* Thread 0 copies stage `stage` (the cursor's) into its slot. */
    auto issue = [&](int stage) {
        stage_copy<BITS>(slot_of(stage), bar_of(stage), map, u.chan, u.tile, u.batch, u.r);
    };
    auto wait_stage = [&](int stage) {
        mbar_wait(bar_of(stage), (unsigned)(stage / DEPTH) & 1u);
    };

    /* A fragments: this thread's antenna row ar (a1's place in the tile,
     * ar % 8 = sg), spectra 16 ks + 2 t, +1 (k bytes 4 t..) and 16 ks + 8 +
     * 2 t, +1 (16 + 4 t..): 8 bytes at byte 64 ks + 8 t and + 32 of the
     * antenna's 256, i.e. half ks / 2, chunk 4 (ks % 2) + t / 2 (+ 2). A
     * half-warp's four antennas have sg = 0, 2, 4, 6 or 1, 3, 5, 7, so its
     * 16 loads meet 16 distinct bank pairs through the swizzle.
     * 4-bit: the same spectra are 4 bytes each, byte 32 ks + 4 t (chunk
     * 2 ks) and + 16 (chunk 2 ks + 1) of the antenna's 128; a warp's eight
     * antennas have distinct sg, so its 32 loads meet 32 distinct banks. */
    const int t = lane & 3, ar = a1 - u.tile.x, sg = ar & 7;
    unsigned a_rd[2][2]; /* [ks % 2][lo, hi] */
#pragma unroll
    for (int k2 = 0; k2 < 2; k2++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            a_rd[k2][e] = (unsigned)(ar * 128 + (((4 * k2 + (t >> 1) + 2 * e) ^ sg) << 4) +
                                     8 * (t & 1));
    auto frag_a = [&](unsigned slot, unsigned (&af)[4][4]) {
        if constexpr (BITS == 4) {
            unsigned ra[8];
#pragma unroll
            for (int c = 0; c < 8; c++)
                ra[c] = ld_shared4(slot + (unsigned)(ar * 128 + ((c ^ sg) << 4) + 4 * t));
            /* A is not negated anywhere, so its nibbles need no sign
             * extension: the nibble in a byte's high half is the int8 16 v
             * (-8 -> -128 too). A = 16 x the samples, so every product is
             * 16 times the true one, and the flush shifts by 4 (exact). */
#pragma unroll
            for (int c = 0; c < 8; c++) {
                const unsigned re16 = ra[c] & 0xF0F0F0F0u, im16 = (ra[c] << 4) & 0xF0F0F0F0u;
                af[c >> 1][2 * (c & 1)] = __byte_perm(re16, im16, CI4_SEL(0));
                af[c >> 1][2 * (c & 1) + 1] = __byte_perm(re16, im16, CI4_SEL(1));
            }
        } else {
            uint2 ra[8];
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                const unsigned half = slot + (unsigned)(ks >> 1) * HALF_BYTES;
                ra[2 * ks] = ld_shared8(half + a_rd[ks & 1][0]);
                ra[2 * ks + 1] = ld_shared8(half + a_rd[ks & 1][1]);
            }
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                const uint2 lo = ra[2 * ks], hi = ra[2 * ks + 1];
                af[ks][0] = __byte_perm(lo.x, lo.y, 0x5410); /* row g: pol 0 */
                af[ks][1] = __byte_perm(lo.x, lo.y, 0x7632); /* row g + 8: pol 1 */
                af[ks][2] = __byte_perm(hi.x, hi.y, 0x5410);
                af[ks][3] = __byte_perm(hi.x, hi.y, 0x7632);
            }
        }
    };

    /* B: thread builds chunk j (spectra 8 j .. 8 j + 7: raw chunks 2 j and
     * 2 j + 1) of antennas bn and bn + 32. The 8 lanes that store at once
     * hold two neighbouring antennas (c % 8 differs in bit 2) and j over one
     * half (4 values), and load from one copy half with the two antennas'
     * swizzles differing in bit 0: no bank met twice either way.
     * 4-bit: chunk j is raw chunk j (16 bytes, both pols), and the 8 lanes
     * are one antenna's eight chunks (j = lane % 8): one row, eight chunks,
     * for the loads and the stores alike. */
    const int jlo = lane & 3, aodd = (lane >> 2) & 1, jhi = (lane >> 3) & 1;
    const int bn = BITS == 8 ? 4 * warp + 2 * (lane >> 4) + aodd : 4 * warp + (lane >> 3);
    const int bj = BITS == 8 ? jlo + 4 * jhi : lane & 7, bx = bn & 7;
    const int b_valid = u.n_ants - u.tile.y;
    unsigned b_rd[2];
#pragma unroll
    for (int e = 0; e < 2; e++)
        b_rd[e] = BITS == 8 ? b_raw + (unsigned)(jhi * HALF_BYTES + bn * 128 +
                                                 (((2 * jlo + e) ^ bx) << 4))
                            : b_raw + (unsigned)(bn * 128 + ((bj ^ bx) << 4));
    /* B column c's chunk bj: 8 spectra of (re, im) or (-im, re) words */
    auto st_col = [&](unsigned bsw, int c, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
        st_shared16(bsw + (unsigned)c * 128u + ((unsigned)(bj ^ (c & 7)) << 4), r0, r1, r2, r3);
    };
    auto build_b = [&](unsigned slot, unsigned bsw) {
        if constexpr (BITS == 4) {
            uint4 rb[2];
#pragma unroll
            for (int qq = 0; qq < 2; qq++)
                rb[qq] = ld_shared16(slot + b_rd[0] + qq * 32 * 128);
#pragma unroll
            for (int qq = 0; qq < 2; qq++) {
                const int a = bn + 32 * qq;
                if (a >= b_valid)
                    continue;
                const ci4_chunk e = ci4_expand(rb[qq]);
#pragma unroll
                for (int p2 = 0; p2 < 2; p2++) {
                    const int c = 4 * a + 2 * p2;
                    ci4_store(e, p2, bsw + (unsigned)c * 128u + ((unsigned)(bj ^ (c & 7)) << 4),
                              bsw + (unsigned)(c + 1) * 128u +
                                  ((unsigned)(bj ^ ((c + 1) & 7)) << 4));
                }
            }
        } else {
            uint4 rb[4];
#pragma unroll
            for (int qq = 0; qq < 2; qq++) {
                rb[2 * qq] = ld_shared16(slot + b_rd[0] + qq * 32 * 128);
                rb[2 * qq + 1] = ld_shared16(slot + b_rd[1] + qq * 32 * 128);
            }
#pragma unroll
            for (int qq = 0; qq < 2; qq++) {
                const uint4 x0 = rb[2 * qq], x1 = rb[2 * qq + 1];
                const int a = bn + 32 * qq;
                if (a >= b_valid) /* past the last antenna: its columns' products are dropped */
                    continue;
#pragma unroll
                for (int p2 = 0; p2 < 2; p2++) {
                    const unsigned sel = p2 ? 0x7632 : 0x5410;
                    const unsigned r0 = __byte_perm(x0.x, x0.y, sel);
                    const unsigned r1 = __byte_perm(x0.z, x0.w, sel);
                    const unsigned r2 = __byte_perm(x1.x, x1.y, sel);
                    const unsigned r3 = __byte_perm(x1.z, x1.w, sel);
                    const int c = 4 * a + 2 * p2;
                    st_col(bsw, c, r0, r1, r2, r3);
                    st_col(bsw, c + 1, cbf_corr_conj_perm(r0), cbf_corr_conj_perm(r1),
                           cbf_corr_conj_perm(r2), cbf_corr_conj_perm(r3));
                }
            }
        }
    };
    /* Stage `stage` from its raw slot into B buffer bsw and fragments af. */
    auto unpack = [&](int stage, unsigned bsw, unsigned (&af)[4][4]) {
        build_b(slot_of(stage), bsw);
        frag_a(slot_of(stage), af);
    };

    int acc[128];
#pragma unroll
    for (int i = 0; i < 128; i++)
        acc[i] = 0;
    unsigned af0[4][4], af1[4][4];
    const int n = u.n;

    /* Prologue: stages 0 .. DEPTH - 1 in flight; stage 0 into B and A. */
    if (tid == 0 && !u.empty) {
        for (int d = 0; d < DEPTH; d++)
            mbar_init(bar0 + 8u * d, 1);
        mbar_init_fence();
    }
    corr_sync();
    if (tid == 0)
        for (int d = 0; d < DEPTH; d++) {
            if (d < n)
                issue(d);
            next_stage(u);
        }
    wait_stage(0);
    unpack(0, bsw0, af0);
    fence_async_smem();
    corr_sync();

    /* Stage s: B in bsw[s & 1], A in cur; copies of stages s + 1 ..
     * s + DEPTH - 1 landed or in flight. */
    auto step = [&](int s, unsigned (&cur)[4][4], unsigned (&nxt)[4][4]) {
        const unsigned b = bsw0 + (unsigned)(s & 1) * BSW_BYTES;
#pragma unroll
        for (int i = 0; i < 128; i++)
            keep(acc[i]);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const unsigned bk = b + START * 128 + 32 * ks; /* column START, k-block ks */
            if constexpr (W == 256)
                wgmma_n256(acc, cur[ks], sw128_desc(bk));
            else if constexpr (W == 192) {
                wgmma_n128(acc + START / 2, cur[ks], sw128_desc(bk));
                wgmma_n64(acc + START / 2 + 64, cur[ks], sw128_desc(bk + 128 * 128));
            } else if constexpr (W == 128)
                wgmma_n128(acc + START / 2, cur[ks], sw128_desc(bk));
            else if constexpr (W == 64)
                wgmma_n64(acc + START / 2, cur[ks], sw128_desc(bk));
        }
        wg_commit();
        /* the slot of stage s, read in the previous step (and by the
         * beams, where they are formed: their warps say when), refills */
        if (tid == 0) {
            if (s + DEPTH < n) {
                if (u.empty)
                    mbar_wait(u.empty + 8u * (unsigned)(s % DEPTH), (unsigned)(s / DEPTH) & 1u);
                issue(s + DEPTH);
            }
            next_stage(u);
        }
        /* while the tensor cores run: stage s + 1 into the other B buffer
         * (its last readers, stage s - 1's MMAs, were waited for) and the
         * other A fragments */
        if (s + 1 < n) {
            wait_stage(s + 1);
            unpack(s + 1, bsw0 + (unsigned)((s + 1) & 1) * BSW_BYTES, nxt);
        }
        fence_async_smem(); /* B stores, and the slot reads before its refill */
        wg_wait0();
#pragma unroll
        for (int i = 0; i < 128; i++)
            keep(acc[i]);
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                keep(cur[ks][e]);
        corr_sync();
    };
    for (int s = 0; s < n; s += 2) {
        step(s, af0, af1);
        if (s + 1 < n)
            step(s + 1, af1, af0);
    }

    /* Accumulator quad j: rows g (p1 = 0) and g + 8 (p1 = 1), columns
     * 8 j + 2 t + (0, 1) = antenna 2 j + t / 2, p2 = t % 2, (re, im): the
     * products (0, p2) and (1, p2) are adjacent in docs/formats.md order,
     * one 32-byte sector. 4-bit: A was 16 x the samples. */
    auto value = [&](int i) { return BITS == 4 ? acc[i] >> 4 : acc[i]; };
    if (u.staged) {
        /* Through shared memory: a warp's 64-bit atomics straight from the
         * fragments meet 32 sectors, one value each, and the block's 32768
         * of them took about 20 stages' time; from the tile's products laid
         * out in output order (row a2: a1, product, re/im, as in global
         * memory), each instruction adds 32 consecutive values, 8 whole
         * sectors. The ring and B are idle: every copy issued has landed
         * (each stage was waited for) and the MMAs were waited for before
         * the last step's barrier. Beside the beams (xb_wgmma) the ring is
         * idle once their warps are done with their last stage: they
         * arrive on barrier 3 then (xb_beams), which these threads wait
         * at. */
        if (u.empty)
            asm volatile("barrier.sync 3, %0;\n" ::"n"(THREADS + 128) : "memory");
#pragma unroll
        for (int j = START / 8; j < (START + W) / 8; j++) {
            const int a2 = u.tile.y + 2 * j + (t >> 1), p2 = t & 1;
            if (a2 < u.n_ants && a1 <= a2)
                st_shared16(u.sbase + 4u * (unsigned)((a2 - u.tile.y) * FL_ROW + (a1 - u.tile.x) * 8 +
                                                      4 * p2),
                            (unsigned)value(4 * j), (unsigned)value(4 * j + 1),
                            (unsigned)value(4 * j + 2), (unsigned)value(4 * j + 3));
        }
        corr_sync();
        /* warp w: rows (a2) w, w + 8, ...; every (a1 <= a2, a2 < N) of the
         * tile was written above (the warpgroups' columns cover them) */
        for (int r = warp; r < TILE && u.tile.y + r < u.n_ants; r += THREADS / 32) {
            const int a2 = u.tile.y + r, nv = 8 * min(TILE, a2 - u.tile.x + 1);
            unsigned long long *p = reinterpret_cast<unsigned long long *>(
                u.out + ((size_t)a2 * (a2 + 1) / 2 + u.tile.x) * 8);
            const unsigned row = u.sbase + 4u * (unsigned)(r * FL_ROW);
            for (int i0 = 0; i0 < nv; i0 += 4 * 32) { /* 4 loads in flight, then their adds */
                int v[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int i = i0 + 32 * k + lane;
                    v[k] = i < nv ? (int)ld_shared4(row + 4u * (unsigned)i) : 0;
                }
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (i0 + 32 * k + lane < nv)
                        atomicAdd(p + i0 + 32 * k + lane, (unsigned long long)(long long)v[k]);
            }
        }
        return;
    }
#pragma unroll
    for (int j = START / 8; j < (START + W) / 8; j++) {
        const int a2 = u.tile.y + 2 * j + (t >> 1), p2 = t & 1;
        if (a2 < u.n_ants && a1 <= a2) {
            unsigned long long *p = reinterpret_cast<unsigned long long *>(
                u.out + (((size_t)a2 * (a2 + 1) / 2 + a1) * 4 + 2 * p2) * 2);
#pragma unroll
            for (int e = 0; e < 4; e++)
                atomicAdd(p + e, (unsigned long long)(long long)value(4 * j + e));
        }
    }
}

/* The block's unit of corr_wgmma's grid: (tile, channel) items, then
 * pieces of `unit` stages. */
__device__ __forceinline__ corr_unit corr_unit_of(unsigned char *smem_dyn, long long *accum,
                                                  const int2 *tiles, int ntiles, int n_ants,
                                                  int channels, int steps, long long b_begin,
                                                  long long niter, int unit)
{
    corr_unit u;
    u.sbase = ((unsigned)__cvta_generic_to_shared(smem_dyn) + 1023u) & ~1023u;
    const unsigned items = (unsigned)ntiles * (unsigned)channels;
    const unsigned item = blockIdx.x % items, piece = blockIdx.x / items;
    u.chan = (int)(item / (unsigned)ntiles);
    u.tile = tiles[item % (unsigned)ntiles];
    u.n_ants = n_ants;
    u.steps = steps;
    const long long k0 = (long long)piece * unit, q = k0 / steps;
    u.n = (int)(niter - k0 < unit ? niter - k0 : unit);
    u.batch = (int)(b_begin + q);
    u.r = (int)(k0 - q * steps);
    u.out = accum + (size_t)u.chan * ((size_t)n_ants * (n_ants + 1) / 2) * 8;
    u.empty = 0;
    u.staged = 0;
    return u;
}

/* The correlation of the block's unit by its first two warpgroups. */
template <int BITS>
__device__ __forceinline__ void corr_tile(corr_unit &u, const CUtensorMap *mapp)
{
    const CUtensorMap &map = *mapp;
    const int n_ants = u.n_ants;
    /* Rows of warp w of warpgroup h: antennas 32 h + 8 w + sg(g), sg a
     * permutation of 0..7 that puts g = 0..3 on even antennas and 4..7 on
     * odd ones (for the A loads' banks). */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2;
    const int a1 = u.tile.x + 32 * (warp >> 2) + 8 * (warp & 3) + (((g & 3) << 1) | (g >> 2));
    /* This warpgroup's columns (see corr_run), in 64s. */
    const int wg = warp >> 2;
    const int start = u.tile.x == u.tile.y && wg == 1 ? 128 : 0;
    const int cols = 4 * min(TILE, n_ants - u.tile.y), end = (cols + 63) & ~63;
    const int width = u.tile.x + 32 * wg < n_ants && end > start ? end - start : 0;
    if (width == 0)
        corr_run<BITS, 0, 0>(u, &map, a1);
    else if (start) /* width 64 or 128 */
        width == 128 ? corr_run<BITS, 128, 128>(u, &map, a1) : corr_run<BITS, 128, 64>(u, &map, a1);
    else if (width == 256)
        corr_run<BITS, 0, 256>(u, &map, a1);
    else if (width == 192)
        corr_run<BITS, 0, 192>(u, &map, a1);
    else if (width == 128)
        corr_run<BITS, 0, 128>(u, &map, a1);
    else
        corr_run<BITS, 0, 64>(u, &map, a1);
}
#endif

template <int BITS>
__global__ void __launch_bounds__(THREADS, 1)
    corr_wgmma(const __grid_constant__ CUtensorMap map, long long *__restrict__ accum,
               const int2 *__restrict__ tiles, int ntiles, int n_ants, int channels, int steps,
               long long b_begin, long long niter, int unit)
{
#ifdef CBF_SM90_DEVICE
    extern __shared__ unsigned char smem_dyn[];
    corr_unit u = corr_unit_of(smem_dyn, accum, tiles, ntiles, n_ants, channels, steps, b_begin,
                               niter, unit);
    u.staged = 1;
    corr_tile<BITS>(u, &map);
#else
    __trap(); /* wgmma needs sm_90a */
#endif
}

/* ---- Beams from the staged samples: xb_wgmma (N <= 64, 8-bit) ---------
 *
 * The beamformer beside the correlator reads every sample a second time;
 * for small arrays, where the correlator itself is bound by memory, that
 * read is most of the beams' cost. Here a third warpgroup of the
 * correlator's block forms the beams (beamform.h's maths, beamform_dev.cuh's
 * steps, so the CPU's bytes) from the ring slots the tensor-copy engine has
 * filled for the correlation: the samples are read from DRAM once for both.
 * One 64 x 64 tile holds every antenna of the channel, hence N <= 64.
 *
 * Warpgroup 2 goes through the block's stages at its own pace: it waits
 * for a slot's copy on the slot's mbarrier as the others do, and its warps
 * say they are done with the slot on a second mbarrier per slot, which the
 * copying thread waits for before it refills the slot; corr_run's own
 * barrier (corr_sync) counts its 256 threads only. So the beams' set-up
 * (the coefficient digits, the batches' presence masks) overlaps the
 * correlator's first stages instead of holding them. Warp w takes spectra
 * 16 w .. 16 w + 15 of a 64-spectrum stage (copy half w / 2) as one m16
 * tile, rows g and g + 8 the spectra 2 g and 2 g + 1 as in beamform.cu,
 * the rows of 4 antennas per k32 step read with the copy's 128-byte
 * swizzle and permuted into one pol's (re, im) of 16 antennas (the
 * per-pol layout of beamform_dev.cuh, bf_coefs_pol: a beam takes one pol,
 * so the usual beams need half the products of the two-pol layout).
 * Presence is applied to the samples (zeros for an antenna missing from
 * the batch), the coefficient digits of up to 8 beams sit in the ring
 * slots' halves a diagonal tile leaves empty (below: the one kernel 33.6%
 * over the correlator alone on 1024-channel buffers against 39-41% with
 * them after the correlator's 193 KB, cbf-bench beam, 2026-11-25).
 * Registers: the correlating warpgroups need about 200 and the block has
 * 65536 for 384 threads, so warpgroup 2 gives back its share (setmaxnreg)
 * and theirs grows. */
#define XB_THREADS (THREADS + 128)
/* The beams' coefficient digits and mbarriers, and a presence mask per
 * batch (a block's UNIT_MAX stages meet at most UNIT_MAX + 1 batches): in
 * the ring, whose slots' B halves a diagonal tile never fills, in slots 2
 * and 3, past the flush's staging (TILE rows of FL_ROW words from sbase):
 * the block takes corr_wgmma's shared memory and no more. The registers of
 * each warpgroup (XB_REGS_*) and the pieces' least length (XB_MIN_UNIT):
 * correlator_sm90_tuning.h. */
#define XB_COEF_OFS (2 * BSW_BYTES + 2 * RAW_BYTES + 2 * HALF_BYTES)
#define XB_MASK_OFS (2 * BSW_BYTES + 3 * RAW_BYTES + 2 * HALF_BYTES)
#define XB_AUX ((int)sizeof(bf_coefs_pol) + 8 * DEPTH)
#define XB_SMEM SMEM_BYTES
static_assert(TILE * FL_ROW * 4 <= XB_COEF_OFS && XB_AUX <= 2 * HALF_BYTES &&
                  8 * (UNIT_MAX + 1) <= 2 * HALF_BYTES,
              "the beams' data fit the ring slots' B halves, past the staging");

#ifdef CBF_SM90_DEVICE
__device__ __forceinline__ void xb_sync_beams() { asm volatile("barrier.sync 1, 128;\n" ::: "memory"); }

/* Which beam each of the 8 slots (n-tile nt = slot / 4, column pair slot
 * % 4) holds: pol-0 beams from slot 0, pol-1 beams from slot 4, the rest
 * of either in the slots left, so that the usual beams (at most 4 of each
 * pol) give n-tiles of one pol each. From the B <= 8 beams' pols (bit b of
 * pmask: beam b takes pol 1); returns slot j's beam in bits 4 j .. 4 j + 3
 * (15: none) and in ntpol the pols each n-tile's beams take (bit 2 nt +
 * p). Nibbles in a register rather than arrays: no local memory. */
__device__ __forceinline__ unsigned xb_slots(int B, unsigned pmask, unsigned &ntpol)
{
    unsigned slots = 0xffffffffu, spill = 0u;
    int n0 = 0, n1 = 0, ns = 0;
#pragma unroll
    for (int b = 0; b < BF_GROUP; b++) {
        if (b >= B)
            break;
        const int p = (int)(pmask >> b) & 1, np = p ? n1 : n0;
        if (np < 4) {
            const int sh = 4 * (4 * p + np);
            slots = (slots & ~(0xfu << sh)) | (unsigned)b << sh;
            n0 += p ? 0 : 1;
            n1 += p;
        } else {
            spill |= (unsigned)b << (4 * ns++);
        }
    }
    ntpol = 0u;
#pragma unroll
    for (int j = 0; j < BF_GROUP; j++) {
        unsigned b = (slots >> (4 * j)) & 0xfu;
        if (b == 0xfu && ns > 0) {
            b = (spill >> (4 * --ns)) & 0xfu;
            slots = (slots & ~(0xfu << (4 * j))) | b << (4 * j);
        }
        if (b != 0xfu)
            ntpol |= 1u << (2 * (j / 4) + ((pmask >> b) & 1u));
    }
    return slots;
}

/* A compile-time switch of xb_beams' stage loop (every n-tile on one pol;
 * dither) */
template <bool ON> struct xb_flag {
    static constexpr bool on = ON;
};

__device__ __forceinline__ int xb_slot_beam(unsigned slots, int j)
{
    const unsigned b = (slots >> (4 * j)) & 0xfu;
    return b == 0xfu ? -1 : (int)b;
}

/* The slot of beam b (one of those xb_slots placed). */
__device__ __forceinline__ int xb_beam_slot(unsigned slots, int b)
{
    int j = 0;
#pragma unroll
    for (int i = 0; i < BF_GROUP; i++)
        if (((slots >> (4 * i)) & 0xfu) == (unsigned)b)
            j = i;
    return j;
}

/* Beam b's s_b and 1 / s_b (bf_beam_scales) from the 4 warps' partial
 * maxima of its gains. */
__device__ __forceinline__ void xb_scales(const float (*s_part)[BF_GROUP], int b, float *scale, float *inv)
{
    bf_beam_scales(fmaxf(fmaxf(s_part[0][b], s_part[1][b]), fmaxf(s_part[2][b], s_part[3][b])), scale,
                   inv);
}

/* Channel c's coefficient digits of every beam into sc, by 128 threads
 * (tid 0..127, four warps, named barrier 1): beam bb = tid % 8 of antennas
 * tid / 8 + 16 i, its coefficients loaded in one round; each beam's largest
 * |gain| from them (shuffles, then the four warps' partial maxima in
 * s_part, which hold them after), then the digits in the beam's slot. A
 * slot no beam takes keeps what shared memory held: its output columns
 * are never written out. */
__device__ __forceinline__ void xb_make_digits(const cbf_beam_job &bj, int c, int tid, unsigned slots,
                                               unsigned pmask, bf_coefs_pol &sc, float (*s_part)[BF_GROUP])
{
    const int A = bj.shape.n_ants, B = bj.shape.n_beams, lane = tid & 31, warp = tid >> 5;
    const int bb = tid % BF_GROUP;
    cbf_beam_coef k4[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int a = tid / BF_GROUP + 16 * i;
        k4[i] = bb < B && a < A ? bj.coef[(size_t)bb * A + a] : cbf_beam_coef{0.0f, 0u, 0ull, 0ull};
    }
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++)
        m = fmaxf(m, fabsf(k4[i].gain));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
    if (lane < BF_GROUP)
        s_part[warp][lane] = m;
    xb_sync_beams();
    if (bb < B) {
        float scale, inv;
        xb_scales(s_part, bb, &scale, &inv);
        const int j = xb_beam_slot(slots, bb), p = (int)(pmask >> bb) & 1;
#pragma unroll
        for (int i = 0; i < 4; i++)
            bf_coef_make_pol(sc, tid / BF_GROUP + 16 * i, j, bf_weight(&k4[i], c, 1), scale, p);
    }
}

__device__ __forceinline__ void xb_beams(const corr_unit &u, const cbf_beam_job &bj, bf_coefs_pol &sc,
                                         unsigned long long *masks, float (*s_part)[BF_GROUP],
                                         const uint4 *dig, const float *dinv)
{
    const int tid = threadIdx.x - THREADS, lane = tid & 31, warp = tid >> 5, g = lane >> 2,
              tig = lane & 3;
    const int A = bj.shape.n_ants, B = bj.shape.n_beams, C = bj.shape.channels,
              T = bj.shape.spectra_per_heap, c = u.chan, n = u.n;
    const unsigned ring = u.sbase + 2 * BSW_BYTES, bar0 = ring + DEPTH * RAW_BYTES;
    /* this lane's 8-byte load of a k-step's rows: copy half warp / 2,
     * spectra 16 (warp % 2) + 2 g and the next, chunk 4 (warp % 2) + g / 2 */
    const unsigned half = (unsigned)(warp >> 1) * HALF_BYTES;
    const int chunk = 4 * (warp & 1) + (g >> 1), in_chunk = 8 * (g & 1);
    const uint64_t dz = bj.total_channels * (uint64_t)B * CBF_DITHER_GAMMA;
    int batch = u.batch, r = u.r, pbatch = -1;
    unsigned pm = 0; /* bit 2 kk (+1): antenna 8 kk + tig (+4) present in `batch` */
    bool allp = false; /* every antenna present in `batch` */
    unsigned sat[2] = {0u, 0u};
    const unsigned pmask = __ballot_sync(0xffffffffu, lane < B && bj.pol[lane]);
    unsigned ntpol;
    const unsigned slots = xb_slots(B, pmask, ntpol);
    /* n-tile nt's beams take npol[nt] pols, the first pol0[nt] */
    int npol[2], pol0[2];
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        const unsigned m = (ntpol >> (2 * nt)) & 3u;
        npol[nt] = __popc(m);
        pol0[nt] = m & 1u ? 0 : 1;
    }
    int beam[2] = {-1, -1};  /* this lane's beams: slots tig and 4 + tig */
    float inv[2] = {0.0f, 0.0f}; /* and their 1 / s_b */

    /* the presence of every batch the block meets, one 64-bit mask
     * each, so that a new batch costs no global load */
    auto load_masks = [&]() {
        const int nbat = (u.r + n - 1) / u.steps + 1;
        for (int k = warp; k < nbat; k += 4) {
            const uint8_t *f = bj.present + (size_t)(u.batch + k) * A;
            const unsigned lo = __ballot_sync(0xffffffffu, lane < A && f[lane]);
            const unsigned hi = __ballot_sync(0xffffffffu, lane + 32 < A && f[lane + 32]);
            if (lane == 0)
                masks[k] = (unsigned long long)hi << 32 | lo;
        }
    };
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
        beam[nt] = xb_slot_beam(slots, 4 * nt + tig);
    if (dig) {
        /* the channel's digits as xb_digits_kernel made them, loaded
         * in one round with the scales before the masks: no
         * coefficient maths on the block's critical path (8.3 of the
         * one kernel's 25.8% at 128-channel buffers of 4 heaps went on
         * making them here, cbf-bench beam, 2026-11-25) */
        constexpr int PER = (int)(sizeof(bf_coefs_pol) / 16) / 128;
        static_assert(sizeof(bf_coefs_pol) % (16 * 128) == 0, "whole rounds of 16-byte copies");
        const uint4 *src = dig + (size_t)c * (sizeof(bf_coefs_pol) / 16);
        uint4 v[PER];
#pragma unroll
        for (int i = 0; i < PER; i++)
            v[i] = src[tid + 128 * i];
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
            if (beam[nt] >= 0)
                inv[nt] = dinv[beam[nt]];
        load_masks();
        uint4 *dst = reinterpret_cast<uint4 *>(&sc);
#pragma unroll
        for (int i = 0; i < PER; i++)
            dst[tid + 128 * i] = v[i];
    } else {
        xb_make_digits(bj, c, tid, slots, pmask, sc, s_part);
        load_masks();
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
            if (beam[nt] >= 0) {
                float scale;
                xb_scales(s_part, beam[nt], &scale, &inv[nt]);
            }
    }
    xb_sync_beams();

    /* done with stage s's slot (its samples are in registers, taken by the
     * products: the output work below does not hold the refill): the
     * reads before the refill, then one arrival per warp */
    auto release = [&](int s) {
        if (s + DEPTH >= n)
            return;
        fence_async_smem();
        __syncwarp();
        if (lane == 0)
            mbar_arrive(u.empty + 8u * (unsigned)(s % DEPTH));
    };
    /* the presence of batch bat: pm, allp */
    auto prep = [&](int bat) {
        if (bat != pbatch) {
            const unsigned long long m = masks[bat - u.batch];
            pm = 0;
#pragma unroll
            for (int kk = 0; kk < BF_KS; kk++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    pm |= (unsigned)((m >> (8 * kk + 4 * h + tig)) & 1ull) << (2 * kk + h);
            /* every antenna there (rows past the last one meet zero
             * coefficients): no masking, 64 instructions a stage fewer */
            allp = (~m & (A >= 64 ? ~0ull : (1ull << A) - 1ull)) == 0ull;
            pbatch = bat;
        }
    };
    /* stage s's products added into acc, once its copy has landed: rows of
     * antennas 16 kq + tig (+ 4, + 8, + 12): spectra t and t + 1, both
     * pols, zeros for an antenna missing (`masked`: prep's pm; else every
     * antenna is there); the next step's rows are loaded before this
     * step's products (18.9% extra on the single call against 23.8%
     * loading them after) */
    auto run = [&](int s, int (&acc)[2][BF_DIGITS][4], auto single, auto masked) {
        const unsigned slot = ring + (unsigned)(s % DEPTH) * RAW_BYTES + half;
        mbar_wait(bar0 + 8u * (unsigned)(s % DEPTH), (unsigned)(s / DEPTH) & 1u);
        auto rows = [&](int kq, uint2 (&w)[4]) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int row = 16 * kq + tig + 4 * q;
                w[q] = ld_shared8(slot + (unsigned)(row * 128 + ((chunk ^ (row & 7)) << 4) + in_chunk));
                if (decltype(masked)::on && !((pm >> (4 * kq + q)) & 1u))
                    w[q] = make_uint2(0u, 0u);
            }
        };
        uint2 w[4], wn[4];
        rows(0, w);
#pragma unroll
        for (int kq = 0; kq < BF_KQ; kq++) {
            if (kq + 1 < BF_KQ)
                rows(kq + 1, wn);
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
#pragma unroll
                for (int ps = 0; ps < (decltype(single)::on ? 1 : 2); ps++) {
                    /* pol p's (re, im) of antennas row, row + 4 in one word */
                    const int p = decltype(single)::on ? pol0[nt] : ps;
                    const unsigned sel = p ? 0x7632u : 0x5410u;
                    const unsigned a0 = __byte_perm(w[0].x, w[1].x, sel),
                                   a1 = __byte_perm(w[0].y, w[1].y, sel),
                                   a2 = __byte_perm(w[2].x, w[3].x, sel),
                                   a3 = __byte_perm(w[2].y, w[3].y, sel);
                    /* (the one-pol words kept in registers for the whole
                     * block instead: 28 bytes spilled, 14.5% / 24.0% / 51.3%
                     * against 12.9% / 22.7% / 47.3%, cbf-bench beam as
                     * stages() below says, 2026-11-25) */
                    const uint4 w01 = sc.d01[p][kq][nt][lane];
#pragma unroll
                    for (int d = 0; d < BF_DIGITS; d++) {
                        const uint2 wd = bf_digit_frag(w01, d);
                        cbf_mma_s8(acc[nt][d], a0, a1, a2, a3, wd.x, wd.y);
                    }
                }
            }
            if (kq + 1 < BF_KQ)
#pragma unroll
                for (int q = 0; q < 4; q++)
                    w[q] = wn[q];
        }
    };
    /* the same after prep(bat), with or without the masking */
    auto products = [&](int s, int bat, int (&acc)[2][BF_DIGITS][4], auto single) {
        prep(bat);
        if (allp)
            run(s, acc, single, xb_flag<false>{});
        else
            run(s, acc, single, xb_flag<true>{});
    };
    /* the output of a stage's sums (batch bat, step rr): both n-tiles'
     * bytes formed, then stored (no branch between the two n-tiles' work:
     * their hashes, conversions and roundings interleave); tile rows:
     * spectra t and t + 1 of the heap; n-tile nt holds the beam of slot
     * 4 nt + tig, z[nt] its dither state of spectrum t's draw (bf_pair;
     * the absolute spectrum t is even when `even`, else odd: a heap is
     * whole stages of an even count) */
    auto emit = [&](int bat, int rr, const int (&acc)[2][BF_DIGITS][4], const uint64_t (&z)[2], auto dith,
                    auto even) {
        const int t = rr * TS + 16 * warp + 2 * g;
        int8_t o[2][2][2];
        int clip[2][2];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            bf_cplx v[2];
            bf_pair<decltype(dith)::on, true, decltype(even)::on>(acc[nt], inv[nt], z[nt], dz, !decltype(even)::on,
                                                                  o[nt], v, clip[nt]); /* N <= 64: SMALL */
        }
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            const int b = beam[nt];
            if (b >= 0) {
                char2 *out = (char2 *)bj.out + (((size_t)bat * B + b) * C + c) * (size_t)T;
                *(char4 *)&out[t] = make_char4(o[nt][0][0], o[nt][0][1], o[nt][1][0], o[nt][1][1]);
                sat[nt] += (unsigned)(clip[nt][0] + clip[nt][1]);
            }
        }
    };
    auto next = [&](int &bat, int &rr) {
        if (++rr == u.steps) {
            rr = 0;
            bat++;
        }
    };

    /* every n-tile's beams on one pol (the usual beams): one pass of
     * products per n-tile; else both pols' for each. (Stage s + 1's
     * products issued beside stage s's output, in one basic block, timed
     * worse twice: 27.6% / 32.0% / 29.2% against 18.9% / 26.7% / 21.7%
     * with three digits, 16 bytes spilled at 104 registers; with two,
     * 19.9% / 37.5% / 61.9% against 12.4% / 26.0% / 41.8% (single call,
     * 128-channel buffers of 4 heaps, 1024 of 32), 20 bytes spilled;
     * cbf-bench beam, 2026-11-25.) */
    auto stages = [&](auto single, auto dith, auto even) {
        int bat = batch, rr = r;
        /* the dither states of the first stage's spectrum t's draws, then
         * a step of TS / 2 draws per stage (the counter is linear in the
         * draw, and a heap is whole stages): an add instead of three
         * 64-bit products */
        const uint64_t sp = bj.first_spectrum + (uint64_t)bat * T + rr * TS + 16 * warp + 2 * g;
        uint64_t z[2];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) /* beam -1: unused */
            z[nt] = cbf_dither_state(bj.dither_key,
                                     bf_dither_counter(sp, bj.first_channel + c, bj.total_channels, B, beam[nt]));
        const uint64_t zstep = (uint64_t)(TS / 2) * dz;
        for (int s = 0; s < n; s++) {
            int acc[2][BF_DIGITS][4] = {};
            products(s, bat, acc, single);
            release(s);
            emit(bat, rr, acc, z, dith, even);
            z[0] += zstep;
            z[1] += zstep;
            next(bat, rr);
        }
    };
    const bool one_pol = npol[0] <= 1 && npol[1] <= 1;
    const bool dither = bj.dither;
    /* every lane's first spectrum is even where the job's first is (heaps
     * and stages hold even counts): one draw per pair, not two */
    const bool even = !(bj.first_spectrum & 1u);
    auto by_dither = [&](auto single) {
        if (dither && even)
            stages(single, xb_flag<true>{}, xb_flag<true>{});
        else if (dither)
            stages(single, xb_flag<true>{}, xb_flag<false>{});
        else
            stages(single, xb_flag<false>{}, xb_flag<true>{});
    };
    if (one_pol)
        by_dither(xb_flag<true>{});
    else
        by_dither(xb_flag<false>{});
    /* done with the ring: the correlator's flush may stage its products
     * there (corr_run waits at barrier 3; an arrival does not wait) */
    asm volatile("barrier.arrive 3, %0;\n" ::"n"(THREADS + 128) : "memory");
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
        if (sat[nt])
            atomicAdd((unsigned long long *)&bj.saturated[beam[nt]], (unsigned long long)sat[nt]);
}
#endif

/* The digits of every channel of bj, made once for many calls of the one
 * kernel (cbf_xb_cuda_run keeps them while the job's coef_version says the
 * coefficients hold): block c makes channel c's into shared memory as
 * xb_beams would and copies them out to dig[c]; block 0 also writes each
 * beam's 1 / s_b to dinv. */
__global__ void __launch_bounds__(128, 1)
    xb_digits_kernel(const __grid_constant__ cbf_beam_job bj, uint4 *__restrict__ dig, float *__restrict__ dinv)
{
#ifdef CBF_SM90_DEVICE
    __shared__ bf_coefs_pol sc;
    __shared__ float s_part[4][BF_GROUP];
    const int tid = threadIdx.x, lane = tid & 31, B = bj.shape.n_beams, c = blockIdx.x;
    const unsigned pmask = __ballot_sync(0xffffffffu, lane < B && bj.pol[lane]);
    unsigned ntpol;
    const unsigned slots = xb_slots(B, pmask, ntpol);
    /* slots no beam takes: zeros rather than what shared memory held */
    uint4 *w = reinterpret_cast<uint4 *>(&sc);
    for (int i = tid; i < (int)(sizeof sc / 16); i += 128)
        w[i] = make_uint4(0u, 0u, 0u, 0u);
    xb_sync_beams();
    xb_make_digits(bj, c, tid, slots, pmask, sc, s_part);
    xb_sync_beams();
    uint4 *out = dig + (size_t)c * (sizeof sc / 16);
    for (int i = tid; i < (int)(sizeof sc / 16); i += 128)
        out[i] = w[i];
    if (c == 0 && tid < B) {
        float scale;
        xb_scales(s_part, tid, &scale, &dinv[tid]);
    }
#else
    __trap();
#endif
}

__global__ void __launch_bounds__(XB_THREADS, 1)
    xb_wgmma(const __grid_constant__ CUtensorMap map, long long *__restrict__ accum,
             const int2 *__restrict__ tiles, int channels, int steps, long long niter, int unit,
             const __grid_constant__ cbf_beam_job bj, const uint4 *__restrict__ dig,
             const float *__restrict__ dinv)
{
#ifdef CBF_SM90_DEVICE
    extern __shared__ unsigned char smem_dyn[];
    __shared__ float s_part[4][BF_GROUP];
    corr_unit u = corr_unit_of(smem_dyn, accum, tiles, 1, bj.shape.n_ants, channels, steps, 0,
                               niter, unit);
    /* the ring's mbarriers (one arrival: the copy's) and the beams' (one
     * per beam warp), then the only barrier of all 384 threads */
    unsigned char *sb = smem_dyn + (u.sbase - (unsigned)__cvta_generic_to_shared(smem_dyn));
    u.empty = (unsigned)__cvta_generic_to_shared(sb + XB_COEF_OFS + sizeof(bf_coefs_pol));
    u.staged = 1;
    if (threadIdx.x == 0) {
        const unsigned bar0 = u.sbase + 2 * BSW_BYTES + DEPTH * RAW_BYTES;
        for (int d = 0; d < DEPTH; d++) {
            mbar_init(bar0 + 8u * d, 1);
            mbar_init(u.empty + 8u * d, 4); /* one arrival per beam warp */
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x < THREADS) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(XB_REGS_CORR));
        corr_tile<8>(u, &map);
    } else {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(XB_REGS_BEAM));
        xb_beams(u, bj, *(bf_coefs_pol *)(sb + XB_COEF_OFS), (unsigned long long *)(sb + XB_MASK_OFS), s_part,
                 dig, dinv);
    }
#else
    __trap(); /* wgmma needs sm_90a */
#endif
}

/* ---- Small arrays: 64 < N <= SM_ANTS, one block per channel ------------
 *
 * With 64 x 64 tiles, N = 80 takes three blocks per channel (the diagonal
 * tile, the 16-antenna edge strip and its 16 x 16 corner), each of which
 * copies and unpacks whole stages: two of them mostly padding, and the
 * input read twice from L2. Here one block holds every antenna of its
 * channel and builds each antenna's operand once per stage: rows (re, im)
 * and (-im, re) for each (antenna, pol), in groups of 4 antennas (16 rows:
 * 8 (re, im) rows, then their 8 (-im, re) rows; sm_row). The (re, im) rows
 * of 32 antennas, read with 8-row groups 2048 bytes apart, are A (from
 * shared memory: no A fragments in registers), and any run of whole groups
 * is B: the accumulator's even 8-column groups are Re, odd ones Im. Work:
 *   warpgroup 0: antennas 0..31 x 0..63 (n256) and x 64..79 (n64);
 *   warpgroup 1: antennas 32..63 x 32..79 (n192) and 64..95 x 64..79 (n64)
 * (products with a1 > a2 or past the last antenna are not stored): 160 and
 * 128 accumulators, 576 of the 704 columns three tiles would multiply.
 *
 * Time: a block takes an equal share of the (channel, stage) range, so the
 * grid is whole waves; where its share crosses a channel it flushes and
 * goes on with the next (at most 1023 stages per flush, as above). */
#define SM_ANTS 80                   /* antennas a block holds: the whole array */
#define SM_HALF (SM_ANTS * 128)      /* one bulk copy: 32 spectra of every antenna */
#define SM_RAW (2 * SM_HALF)         /* one ring slot: a stage */
#define SM_ROW_ANTS 96               /* rows for antennas 0..95: A's third set */
#define SM_BUF (SM_ROW_ANTS * 4 * 128) /* the operand rows of one stage */
#define SM_SMEM (2 * SM_BUF + DEPTH * SM_RAW + 8 * DEPTH + 1024)

#ifdef CBF_SM90_DEVICE
/* Operand row of (antenna a, pol p), q = 0: (re, im), 1: (-im, re). Bit 0
 * of a goes to bit 2 of the row, so the two neighbouring antennas that one
 * quarter-warp stores meet different banks through the swizzle. */
__device__ __forceinline__ int sm_row(int a, int p, int q)
{
    return 16 * (a >> 2) + 8 * q + 4 * (a & 1) + 2 * ((a >> 1) & 1) + p;
}

/* One segment (one channel, u.n stages) of warpgroup WG's work; g0: stages
 * this block ran before (ring slot and mbarrier phase). */
template <int WG, int BITS>
__device__ __forceinline__ void small_seg(corr_unit &u, const CUtensorMap *map, int g0)
{
    constexpr int NH = BITS / 4; /* copies per stage (see corr_run) */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* Copies are issued by warpgroup 1, whose MMAs are the shorter. */
    constexpr int ISSUER = THREADS / 2;
    const unsigned buf0 = u.sbase, ring = u.sbase + 2 * SM_BUF;
    const unsigned bar0 = ring + DEPTH * SM_RAW;
    auto slot_of = [&](int st) { return ring + (unsigned)((g0 + st) % DEPTH) * SM_RAW; };
    auto bar_of = [&](int st) { return bar0 + 8u * (unsigned)((g0 + st) % DEPTH); };
    auto issue = [&](int st) {
        const unsigned slot = slot_of(st), bar = bar_of(st);
        mbar_expect_tx(bar, NH * SM_HALF);
        for (int h = 0; h < NH; h++)
            tma_load(slot + h * SM_HALF, map, u.r * TS * BITS / 2 + h * 128, u.chan, 0, u.batch,
                     bar);
    };
    auto wait_stage = [&](int st) {
        mbar_wait(bar_of(st), (unsigned)((g0 + st) / DEPTH) & 1u);
    };

    /* Thread builds chunk bj (spectra 8 bj .. 8 bj + 7) of both pols of
     * antennas bn and bn + 32 and of pol bn / 16 of antenna 64 + bn % 16:
     * the same share for every thread, straight-line code (antennas past
     * the last are built from zeros). Lanes as corr_run's build_b: the
     * quarter-warp's two antennas differ in bit 0, so its loads meet
     * different banks through the copy's swizzle, and (sm_row) its stores
     * too. 4-bit: as corr_run's too (a quarter-warp is one antenna's eight
     * chunks, each one raw chunk). */
    const int jlo = lane & 3, aodd = (lane >> 2) & 1, jhi = (lane >> 3) & 1;
    const int bn = BITS == 8 ? 4 * warp + 2 * (lane >> 4) + aodd : 4 * warp + (lane >> 3);
    const int bj = BITS == 8 ? jlo + 4 * jhi : lane & 7;
    const int an[3] = {bn, bn + 32, 64 + (bn & 15)}, p3 = bn >> 4;
    unsigned rd[3][2], st[5];
#pragma unroll
    for (int q = 0; q < 3; q++)
#pragma unroll
        for (int e = 0; e < 2; e++)
            rd[q][e] = BITS == 8 ? (unsigned)(jhi * SM_HALF + an[q] * 128 +
                                              (((2 * jlo + e) ^ (bn & 7)) << 4))
                                 : (unsigned)(an[q] * 128 + ((bj ^ (bn & 7)) << 4));
#pragma unroll
    for (int k = 0; k < 5; k++) { /* (antenna, pol) k: an[k / 2], pol k % 2; k = 4: p3 */
        const int row = sm_row(an[k >> 1], k < 4 ? k & 1 : p3, 0);
        st[k] = (unsigned)(row * 128 + ((bj ^ (row & 7)) << 4));
    }
    auto build = [&](unsigned slot, unsigned buf) {
        if constexpr (BITS == 4) {
#pragma unroll
            for (int q = 0; q < 3; q++) {
                const ci4_chunk e = ci4_expand(ld_shared16(slot + rd[q][0]));
#pragma unroll
                for (int k = 2 * q; k < (q < 2 ? 2 * q + 2 : 5); k++)
                    ci4_store(e, k < 4 ? k & 1 : p3, buf + st[k], buf + st[k] + 8 * 128);
            }
        } else {
            uint4 rb[6];
#pragma unroll
            for (int q = 0; q < 3; q++) {
                rb[2 * q] = ld_shared16(slot + rd[q][0]);
                rb[2 * q + 1] = ld_shared16(slot + rd[q][1]);
            }
#pragma unroll
            for (int k = 0; k < 5; k++) {
                const uint4 x0 = rb[2 * (k >> 1)], x1 = rb[2 * (k >> 1) + 1];
                const unsigned sel = (k < 4 ? k & 1 : p3) ? 0x7632 : 0x5410;
                const unsigned r0 = __byte_perm(x0.x, x0.y, sel), r1 = __byte_perm(x0.z, x0.w, sel);
                const unsigned r2 = __byte_perm(x1.x, x1.y, sel), r3 = __byte_perm(x1.z, x1.w, sel);
                st_shared16(buf + st[k], r0, r1, r2, r3);
                st_shared16(buf + st[k] + 8 * 128, cbf_corr_conj_perm(r0), cbf_corr_conj_perm(r1),
                            cbf_corr_conj_perm(r2), cbf_corr_conj_perm(r3));
            }
        }
    };

    constexpr int NACC = WG ? 128 : 160;
    int acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; i++)
        acc[i] = 0;
    const int n = u.n;
    if (tid == ISSUER)
        for (int d = 0; d < DEPTH; d++) {
            if (d < n)
                issue(d);
            next_stage(u);
        }
    wait_stage(0);
    build(slot_of(0), buf0);
    fence_async_smem();
    corr_sync();

    for (int s = 0; s < n; s++) {
        const unsigned buf = buf0 + (unsigned)(s & 1) * SM_BUF;
#pragma unroll
        for (int i = 0; i < NACC; i++)
            keep(acc[i]);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const unsigned k = buf + 32 * ks, g16 = 16 * 128; /* g16: 4 antennas' rows */
            if constexpr (WG == 0) {
                wgmma_ss_n256(acc, sw128_desc(k, 2048), sw128_desc(k));
                wgmma_ss_n64(acc + 128, sw128_desc(k, 2048), sw128_desc(k + 16 * g16));
            } else {
                wgmma_ss_n192(acc, sw128_desc(k + 8 * g16, 2048), sw128_desc(k + 8 * g16));
                wgmma_ss_n64(acc + 96, sw128_desc(k + 16 * g16, 2048), sw128_desc(k + 16 * g16));
            }
        }
        wg_commit();
        if (tid == ISSUER) {
            if (s + DEPTH < n)
                issue(s + DEPTH);
            next_stage(u);
        }
        /* stage s + 1 into the other buffer (its readers, stage s - 1's
         * MMAs, were waited for) while the tensor cores run stage s */
        if (s + 1 < n) {
            wait_stage(s + 1);
            build(slot_of(s + 1), buf0 + (unsigned)((s + 1) & 1) * SM_BUF);
        }
        fence_async_smem();
        wg_wait0();
#pragma unroll
        for (int i = 0; i < NACC; i++)
            keep(acc[i]);
        corr_sync();
    }

    /* Accumulators: row 16 w + g is antenna a0 + 8 w + i(g), pol g % 2, row
     * + 8 the antenna 4 higher; columns 8 j + 2 t, + 1 are antenna c0 +
     * 4 (j / 2) + i(2 t), pols 0 and 1, Re for even j and Im for odd j
     * (i inverts sm_row's order). */
    const int w = warp & 3, g = lane >> 2, t = lane & 3;
    const int a1b = 8 * w + (((g >> 2) & 1) | (((g >> 1) & 1) << 1)), p1 = g & 1;
    const int it = (t >> 1) | ((t & 1) << 1);
    auto flush = [&](const int *d, int a0, int c0, int pairs) {
#pragma unroll
        for (int jp = 0; jp < pairs; jp++) {
            const int a2 = c0 + 4 * jp + it;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int a1 = a0 + a1b + 4 * r;
                if (a2 >= u.n_ants || a1 > a2)
                    continue;
                unsigned long long *o = reinterpret_cast<unsigned long long *>(
                    u.out + (((size_t)a2 * (a2 + 1) / 2 + a1) * 4 + p1) * 2);
#pragma unroll
                for (int p2 = 0; p2 < 2; p2++) {
                    atomicAdd(o + 4 * p2, (unsigned long long)(long long)d[8 * jp + 2 * r + p2]);
                    atomicAdd(o + 4 * p2 + 1,
                              (unsigned long long)(long long)d[8 * jp + 4 + 2 * r + p2]);
                }
            }
        }
    };
    if constexpr (WG == 0) {
        flush(acc, 0, 0, 16);
        flush(acc + 128, 0, 64, 4);
    } else {
        flush(acc, 32, 32, 12);
        flush(acc + 96, 64, 64, 4);
    }
}
#endif

template <int BITS>
__global__ void __launch_bounds__(THREADS, 1)
    corr_wgmma_small(const __grid_constant__ CUtensorMap map, long long *__restrict__ accum,
                     int n_ants, int steps, long long b_begin, long long niter, long long total,
                     int len)
{
#ifdef CBF_SM90_DEVICE
    extern __shared__ unsigned char smem_dyn[];
    corr_unit u;
    u.sbase = ((unsigned)__cvta_generic_to_shared(smem_dyn) + 1023u) & ~1023u;
    u.tile = make_int2(0, 0);
    u.n_ants = n_ants;
    u.steps = steps;
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int d = 0; d < DEPTH; d++)
            mbar_init(u.sbase + 2 * SM_BUF + DEPTH * SM_RAW + 8u * d, 1);
        mbar_init_fence();
    }
    /* Operand rows of antennas 80..95 (A rows of the third set): zeros,
     * once. */
    for (int i = tid; i < 2 * (SM_ROW_ANTS - SM_ANTS) * 4 * 8; i += THREADS) {
        const int rows = (SM_ROW_ANTS - SM_ANTS) * 4, b = i / (rows * 8);
        const int row = SM_ANTS * 4 + (i >> 3) % rows;
        st_shared16(u.sbase + b * SM_BUF + row * 128 + (i & 7) * 16, 0, 0, 0, 0);
    }
    fence_async_smem();
    __syncthreads();
    const long long k1 = min(((long long)blockIdx.x + 1) * len, total);
    int g0 = 0;
    for (long long k = (long long)blockIdx.x * len; k < k1;) {
        const long long chan = k / niter, st = k - chan * niter;
        const long long e = min(k1, (chan + 1) * niter), q = st / steps;
        u.chan = (int)chan;
        u.n = (int)(e - k);
        u.batch = (int)(b_begin + q);
        u.r = (int)(st - q * steps);
        u.out = accum + (size_t)chan * ((size_t)n_ants * (n_ants + 1) / 2) * 8;
        if (tid >> 7)
            small_seg<1, BITS>(u, &map, g0);
        else
            small_seg<0, BITS>(u, &map, g0);
        g0 += (int)(e - k);
        k = e;
    }
#else
    __trap(); /* wgmma needs sm_90a */
#endif
}

/* cuTensorMapEncodeTiled from the driver, found once (no libcuda link). */
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void)
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                             cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            p = nullptr;
        }
        return (PFN_cuTensorMapEncodeTiled_v12000)p;
    }();
    return fn;
}

int cbf_corr_sm90_fits(const cbf_corr_shape *s)
{
    return (s->bits == 8 || s->bits == 4) && s->spectra_per_heap % TS == 0;
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
    if (!tensor_map_encoder())
        return cudaErrorNotSupported; /* a driver without bulk tensor copies */
    const void *big[2] = {(const void *)corr_wgmma<8>, (const void *)corr_wgmma<4>};
    const void *small[2] = {(const void *)corr_wgmma_small<8>, (const void *)corr_wgmma_small<4>};
    cudaError_t e2 = cudaSuccess;
    for (int i = 0; i < 2 && e2 == cudaSuccess; i++) {
        e2 = cudaFuncSetAttribute(big[i], cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
        if (e2 == cudaSuccess)
            e2 = cudaFuncSetAttribute(small[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      SM_SMEM);
    }
    if (e2 == cudaSuccess)
        e2 = cudaFuncSetAttribute(xb_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, XB_SMEM);
    return e2;
}

/* The small-array kernel serves 64 < N <= SM_ANTS (N <= 64 is one tile). */
static int small_array(int n_ants) { return n_ants > TILE && n_ants <= SM_ANTS; }

const char *cbf_corr_sm90_kernel(int n_ants)
{
    return small_array(n_ants) ? "wgmma 80x80 (small)" : "wgmma 64x64";
}

/* Stages per piece: at most UNIT_MAX, and among the piece counts that allow,
 * the one whose blocks best fill whole waves of `sms` blocks (one block per
 * SM), counting `fixed` stages per block for the pipeline's start and the
 * flush; pieces of fewer than min_unit stages only where UNIT_MAX asks.
 * corr_wgmma counts 10: the waves are not even (diagonal tiles, pieces of
 * two lengths), and on the H100 fewer, longer pieces timed faster than the
 * best fill of 4 chose (one sweep: N = 512 in pieces of 512 stages 3.93 ms,
 * of 128 3.97-4.00; N = 1024 of 342 7.28 ms, of 256 7.36-7.81). */
static int pick_unit(long long niter, long long items, int sms, int min_unit, double fixed)
{
    const long long pmin = (niter + UNIT_MAX - 1) / UNIT_MAX;
    long long best_unit = (niter + pmin - 1) / pmin;
    double best = -1.0;
    for (long long p = pmin; p <= pmin + 16; p++) {
        const long long unit = (niter + p - 1) / p, pieces = (niter + unit - 1) / unit;
        const long long blocks = items * pieces;
        if ((unit < min_unit && p > pmin) || blocks > 0x7FFFFFFFLL)
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

/* Blocks of the small-array kernel: whole waves of `sms`, each block an
 * equal share (len stages, at most UNIT_MAX) of the channels x niter
 * (channel, stage) range; among wave counts that allow, the fewest stages
 * per SM, counting a few stages' worth per segment (pipeline start and
 * flush) for the channels a share crosses. */
static long long pick_share(long long niter, long long total, int sms)
{
    const double fixed = 4.0;
    long long w = (total + (long long)sms * UNIT_MAX - 1) / ((long long)sms * UNIT_MAX);
    long long best_len = 0;
    double best = 0.0;
    for (long long waves = w < 1 ? 1 : w, last = waves + 16; waves <= last; waves++) {
        const long long len = (total + waves * sms - 1) / (waves * sms);
        if (len > UNIT_MAX)
            continue;
        const long long blocks = (total + len - 1) / len, segs = 1 + (len + niter - 2) / niter;
        const double cost = (double)((blocks + sms - 1) / sms) * ((double)len + fixed * segs);
        if (!best_len || cost < best * 0.995) {
            best = cost;
            best_len = len;
        }
        if (len == 1)
            break;
    }
    return best_len;
}

/* The input as a 4-D byte tensor: (spectrum bytes, channel, antenna,
 * batch); a box is 128 bytes (32 spectra of 8-bit input, 64 of 4-bit) of
 * one channel of box_ants antennas, 128-byte swizzle. Antennas past the
 * last come back as zeros. */
static cudaError_t encode_map(CUtensorMap *map, const cbf_corr_job *job, unsigned box_ants)
{
    const cbf_corr_shape *s = &job->shape;
    const cuuint64_t row = (cuuint64_t)s->spectra_per_heap * (cuuint64_t)(s->bits / 2);
    const cuuint64_t dims[4] = {row, (cuuint64_t)s->channels, (cuuint64_t)s->n_ants,
                                (cuuint64_t)job->batch_end};
    const cuuint64_t strides[3] = {row, row * s->channels, row * s->channels * s->n_ants};
    const cuuint32_t box[4] = {128, 1, box_ants, 1}, one[4] = {1, 1, 1, 1};
    if (tensor_map_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, (void *)job->in, dims,
                             strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

cudaError_t cbf_corr_sm90_launch(const cbf_corr_job *job, const int2 *tiles, int ntiles, int sms,
                                 cudaStream_t stream)
{
    const cbf_corr_shape *s = &job->shape;
    const long long steps = s->spectra_per_heap / TS;
    const long long niter = (long long)(job->batch_end - job->batch_begin) * steps;
    if (job->batch_end > 0x7FFFFFFF || (uintptr_t)job->in % 16)
        return cudaErrorInvalidConfiguration;
    CUtensorMap map;
    cudaError_t e;
    if (small_array(s->n_ants)) {
        const long long total = niter * s->channels, len = pick_share(niter, total, sms);
        const long long blocks = (total + len - 1) / len;
        if (blocks > 0x7FFFFFFFLL)
            return cudaErrorInvalidConfiguration;
        if ((e = encode_map(&map, job, SM_ANTS)) != cudaSuccess)
            return e;
        (s->bits == 4 ? corr_wgmma_small<4> : corr_wgmma_small<8>)<<<(unsigned)blocks, THREADS,
                                                                     SM_SMEM, stream>>>(
            map, (long long *)job->accum, s->n_ants, (int)steps, (long long)job->batch_begin,
            niter, total, (int)len);
        return cudaGetLastError();
    }
    const long long items = (long long)ntiles * s->channels;
    const int unit = pick_unit(niter, items, sms, 16, 10.0);
    const long long blocks = items * ((niter + unit - 1) / unit);
    if (blocks > 0x7FFFFFFFLL)
        return cudaErrorInvalidConfiguration;
    if ((e = encode_map(&map, job, TILE)) != cudaSuccess)
        return e;
    (s->bits == 4 ? corr_wgmma<4> : corr_wgmma<8>)<<<(unsigned)blocks, THREADS, SMEM_BYTES,
                                                     stream>>>(
        map, (long long *)job->accum, tiles, ntiles, s->n_ants, s->channels, (int)steps,
        (long long)job->batch_begin, niter, unit);
    return cudaGetLastError();
}

int cbf_corr_sm90_xb_shape_fits(const cbf_corr_shape *s, const cbf_beam_shape *b)
{
    return s->bits == 8 && s->n_ants <= TILE && b->n_ants == s->n_ants && b->n_beams <= BF_GROUP &&
           b->channels == s->channels && b->spectra_per_heap == s->spectra_per_heap;
}

int cbf_corr_sm90_xb_fits(const cbf_corr_job *job, const cbf_beam_job *bj)
{
    const cbf_corr_shape *s = &job->shape;
    int t0, t1;
    cbf_beam_job_span(bj, &t0, &t1);
    return cbf_corr_sm90_xb_shape_fits(s, &bj->shape) && bj->in == job->in && job->batch_begin == 0 && bj->batches == job->batch_end && !bj->raw &&
           t0 == 0 && t1 == s->spectra_per_heap && (uintptr_t)bj->out % 4 == 0 &&
           (uintptr_t)job->in % 16 == 0 && job->batch_end <= 0x7FFFFFFF;
}

size_t cbf_corr_sm90_xb_digits_bytes(const cbf_beam_shape *b)
{
    return (size_t)b->channels * sizeof(bf_coefs_pol) + BF_GROUP * sizeof(float);
}

cudaError_t cbf_corr_sm90_xb_digits(const cbf_beam_job *bj, void *digits, cudaStream_t stream)
{
    uint4 *dig = (uint4 *)digits;
    float *dinv = (float *)((char *)digits + (size_t)bj->shape.channels * sizeof(bf_coefs_pol));
    xb_digits_kernel<<<(unsigned)bj->shape.channels, 128, 0, stream>>>(*bj, dig, dinv);
    return cudaGetLastError();
}

cudaError_t cbf_corr_sm90_xb_launch(const cbf_corr_job *job, const cbf_beam_job *bj, const void *digits,
                                    const int2 *tiles, int sms, cudaStream_t stream)
{
    const cbf_corr_shape *s = &job->shape;
    if (!cbf_corr_sm90_xb_fits(job, bj))
        return cudaErrorInvalidConfiguration;
    const long long steps = s->spectra_per_heap / TS, niter = (long long)job->batch_end * steps;
    const int unit = pick_unit(niter, s->channels, sms, XB_MIN_UNIT, 4.0);
    const long long blocks = (long long)s->channels * ((niter + unit - 1) / unit);
    if (blocks > 0x7FFFFFFFLL)
        return cudaErrorInvalidConfiguration;
    CUtensorMap map;
    cudaError_t e = encode_map(&map, job, TILE);
    if (e != cudaSuccess)
        return e;
    const uint4 *dig = (const uint4 *)digits;
    const float *dinv =
        digits ? (const float *)((const char *)digits + (size_t)s->channels * sizeof(bf_coefs_pol)) : nullptr;
    xb_wgmma<<<(unsigned)blocks, XB_THREADS, XB_SMEM, stream>>>(
        map, (long long *)job->accum, tiles, s->channels, (int)steps, niter, unit, *bj, dig, dinv);
    return cudaGetLastError();
}
