/* correlator.cu: tensor-core correlator (warp mma.sync m16n8k32, s8 x s8 ->
 * s32), after the ASTRON / katgpucbf design described in docs/xeng.md.
 *
 * Complex trick: for C = A B^H, row i of A holds x_i as (re, im) pairs along
 * k; B has two columns per input j, (re_j, im_j) and (-im_j, re_j), so the
 * two columns of C give Re and Im of x_i conj(x_j) side by side.
 *
 * Shared memory holds the input bytes exactly as they arrive (per antenna
 * [spectrum][pol][re, im]), so cp.async can stage them without passing
 * through registers. Fragments are built from it with byte permutes: row r
 * of a 16-row A fragment is (antenna r mod 8, pol r / 8), which lets one
 * 16-byte shared load feed both polarisation rows of a thread's antenna.
 * Along k, a thread's registers a0/a1 hold spectra 4t, 4t+1 and a2/a3 hold
 * 4t+2, 4t+3 (t = lane % 4); B uses the same order, and since k is summed
 * over, the order is free to choose.
 *
 * Products are int32 inside the tensor cores: 2047 stages of 32 spectra
 * keep |sum| <= 2047 x 32 x 2 x 128^2 < 2^31, so registers are flushed into
 * the int64 accumulators (read-add-write, one accumulator per blockIdx.z)
 * at least that often, and at the end of every call. */
#include "correlator.h"
#include "correlator_sm90.h"

#include "cuda_check.h"
#include "cbf_async.h"
#include "cbf_mma.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#define TT 32         /* spectra per shared-memory stage (CBF_CORR_SPECTRA_QUANTUM) */
#define NSTAGE 3      /* stages in flight: one computed, two being copied */
#define THREADS 128   /* 4 warps, 2 x 2 over the block's output tile */
#define FLUSH_ITERS 2047

struct cbf_corr_cuda {
    cbf_corr_shape shape;
    int ry, rx;   /* antennas per tile: rows (a1) and columns (a2) */
    int ntiles;
    int2 *tiles;  /* device: (a1 origin, a2 origin) of each tile */
    int sms;
    int sm90;     /* the wgmma kernel of correlator_sm90.cu serves this plan */
    /* cbf_xb_cuda_run's coefficient digits (device, xb_cap bytes) and the
     * job they were made from (version 0: none) */
    void *xb_digits;
    size_t xb_cap;
    uint64_t xb_version;
    const void *xb_coef, *xb_pol;
    cbf_beam_shape xb_shape;
};

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("correlator", call)

/* Four CI4 bytes -> their sign-extended high (re) and low (im) nibbles. */
__device__ __forceinline__ void expand4(unsigned x, unsigned &re, unsigned &im)
{
    re = __vsub4(((x >> 4) & 0x0F0F0F0Fu) ^ 0x08080808u, 0x08080808u);
    im = __vsub4((x & 0x0F0F0F0Fu) ^ 0x08080808u, 0x08080808u);
}

template <int BITS> struct Stage {
    static constexpr int ROWB = TT * BITS / 2; /* bytes per antenna per stage */
    static constexpr int CHUNKS = ROWB / 16;
    /* XOR swizzle of 16-byte chunks so that the 8 (4-bit: 16) lanes of one
     * shared-memory wavefront, reading neighbouring antennas, hit distinct
     * banks. */
    __device__ static int swz(int row, int c)
    {
        return BITS == 8 ? c ^ ((row & 1) << 2) : c ^ (((row >> 1) & 1) << 1);
    }
};

/* Fragment words of one antenna row for k-step ks: pol0/pol1 words for
 * spectra (4t, 4t+1) in [0] and (4t+2, 4t+3) in [1]. */
template <int BITS>
__device__ __forceinline__ void row_words(const unsigned char *stage, int row, int ks, int t,
                                          unsigned p0[2], unsigned p1[2])
{
    typedef Stage<BITS> S;
    const unsigned char *r = stage + row * S::ROWB;
    if (BITS == 8) {
        uint4 w = *reinterpret_cast<const uint4 *>(r + S::swz(row, ks * 4 + t) * 16);
        p0[0] = __byte_perm(w.x, w.y, 0x5410);
        p1[0] = __byte_perm(w.x, w.y, 0x7632);
        p0[1] = __byte_perm(w.z, w.w, 0x5410);
        p1[1] = __byte_perm(w.z, w.w, 0x7632);
    } else {
        uint2 w = *reinterpret_cast<const uint2 *>(r + S::swz(row, ks * 2 + (t >> 1)) * 16 +
                                                   (t & 1) * 8);
        unsigned re, im;
        expand4(w.x, re, im);
        p0[0] = __byte_perm(re, im, 0x6240);
        p1[0] = __byte_perm(re, im, 0x7351);
        expand4(w.y, re, im);
        p0[1] = __byte_perm(re, im, 0x6240);
        p1[1] = __byte_perm(re, im, 0x7351);
    }
}

template <int BITS, int RY, int RX>
__global__ void __launch_bounds__(THREADS)
    corr_kernel(const unsigned char *__restrict__ in, long long *__restrict__ accum,
                const int2 *__restrict__ tiles, int n_ants, int channels, int spectra,
                size_t b_begin, size_t b_end, size_t accum_len)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    typedef Stage<BITS> S;
    constexpr int ROWS = RY + RX, MF = RY / 16, NF = RX / 4;
    constexpr int SB = BITS / 2; /* bytes per spectrum, both pols */
    __shared__ __align__(16) unsigned char smem[NSTAGE][ROWS * S::ROWB];

    const int2 tile = tiles[blockIdx.x];
    const int chan = blockIdx.y;
    const size_t nb = b_end - b_begin, per = (nb + gridDim.z - 1) / gridDim.z;
    const size_t lo = b_begin + blockIdx.z * per;
    const size_t hi = lo + per < b_end ? lo + per : b_end;
    if (lo >= hi)
        return; /* uniform over the block */
    const int steps = spectra / TT;
    const long long niter = (long long)(hi - lo) * steps;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3, wy = warp >> 1, wx = warp & 1;
    const int row0 = wy * (RY / 2), col0 = RY + wx * (RX / 2); /* shared-memory rows */
    const int a1_0 = tile.x + wy * (RY / 2), a2_0 = tile.y + wx * (RX / 2);
    /* A warp whose rows all exceed its columns (below the diagonal) or that
     * lies past the last antenna only helps with the copies. */
    const bool active = a1_0 < n_ants && a2_0 < n_ants && a1_0 <= a2_0 + RX / 2 - 1;

    auto load = [&](long long it, int buf) {
        if (it < niter) {
            const size_t b = lo + (size_t)(it / steps);
            const int t0 = (int)(it % steps) * TT;
            const unsigned base = cbf_smem_addr(smem[buf]);
            for (int i = threadIdx.x; i < ROWS * S::CHUNKS; i += THREADS) {
                const int row = i / S::CHUNKS, c = i % S::CHUNKS;
                const int ant = row < RY ? tile.x + row : tile.y + row - RY;
                const bool ok = ant < n_ants;
                const unsigned char *src =
                    ok ? in + ((((size_t)b * n_ants + ant) * channels + chan) * spectra + t0) * SB +
                             c * 16
                       : in;
                cbf_cp_async16(base + row * S::ROWB + S::swz(row, c) * 16, src, ok ? 16 : 0);
            }
        }
        cbf_cp_commit(); /* empty groups keep the wait_group count uniform */
    };

    int acc[MF][NF][4];
#pragma unroll
    for (int mi = 0; mi < MF; mi++)
#pragma unroll
        for (int ni = 0; ni < NF; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[mi][ni][e] = 0;

    const size_t nbl = (size_t)n_ants * (n_ants + 1) / 2;
    long long *acc_out = accum + blockIdx.z * accum_len + (size_t)chan * nbl * 8;
    auto flush = [&]() {
#pragma unroll
        for (int mi = 0; mi < MF; mi++)
#pragma unroll
            for (int ni = 0; ni < NF; ni++) {
                const int a1 = a1_0 + mi * 8 + g, a2 = a2_0 + ni * 2 + (t >> 1), p2 = t & 1;
                if (a2 < n_ants && a1 <= a2) {
                    /* products (p1 = 0, p2) and (1, p2) are adjacent: re, im, re, im */
                    longlong2 *p = reinterpret_cast<longlong2 *>(
                        acc_out + (((size_t)a2 * (a2 + 1) / 2 + a1) * 4 + 2 * p2) * 2);
                    longlong2 v0 = p[0], v1 = p[1];
                    v0.x += acc[mi][ni][0];
                    v0.y += acc[mi][ni][1];
                    v1.x += acc[mi][ni][2];
                    v1.y += acc[mi][ni][3];
                    p[0] = v0;
                    p[1] = v1;
                }
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[mi][ni][e] = 0;
            }
    };

#pragma unroll
    for (int s = 0; s < NSTAGE - 1; s++)
        load(s, s);
    int since = 0;
    for (long long it = 0; it < niter; it++) {
        cbf_cp_wait<NSTAGE - 2>();
        __syncthreads(); /* stage it is in; everyone is done with stage it - 1 */
        load(it + NSTAGE - 1, (int)((it + NSTAGE - 1) % NSTAGE));
        const unsigned char *st = smem[it % NSTAGE];
        if (active) {
#pragma unroll
            for (int ks = 0; ks < TT / 16; ks++) {
                unsigned a[MF][4], b[NF][2];
#pragma unroll
                for (int mi = 0; mi < MF; mi++) {
                    unsigned p0[2], p1[2];
                    row_words<BITS>(st, row0 + mi * 8 + g, ks, t, p0, p1);
                    a[mi][0] = p0[0];
                    a[mi][1] = p1[0];
                    a[mi][2] = p0[1];
                    a[mi][3] = p1[1];
                }
#pragma unroll
                for (int ni = 0; ni < NF; ni++) {
                    unsigned p0[2], p1[2];
                    row_words<BITS>(st, col0 + ni * 2 + (g >> 2), ks, t, p0, p1);
                    /* column g: antenna g / 4, pol (g / 2) % 2, g odd: the
                     * (-im, re) column that yields the imaginary part */
                    unsigned w0 = (g & 2) ? p1[0] : p0[0], w1 = (g & 2) ? p1[1] : p0[1];
                    b[ni][0] = (g & 1) ? cbf_corr_conj_perm(w0) : w0;
                    b[ni][1] = (g & 1) ? cbf_corr_conj_perm(w1) : w1;
                }
#pragma unroll
                for (int mi = 0; mi < MF; mi++)
#pragma unroll
                    for (int ni = 0; ni < NF; ni++)
                        cbf_mma_s8(acc[mi][ni], a[mi][0], a[mi][1], a[mi][2], a[mi][3], b[ni][0],
                            b[ni][1]);
            }
        }
        if (++since == FLUSH_ITERS) {
            if (active)
                flush();
            since = 0;
        }
    }
    if (active && since)
        flush();
    cbf_cp_wait<0>();
#else
    __trap(); /* mma.sync s8 and cp.async need compute capability 8.0 */
#endif
}

extern "C" {

int cbf_corr_cuda_create(const cbf_corr_shape *shape, int block_ants, cbf_corr_cuda **out,
                         char *msg, size_t msglen)
{
    *out = NULL;
    int rc = cbf_corr_shape_check(shape, msg, msglen);
    if (rc)
        return rc;
    if (shape->channels > 65535) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "correlator: channels %d: the GPU grid takes at most 65535",
                             shape->channels);
    }
    /* block_ants 0 on an H100/H200 (compute capability 9.0), for 8- or
     * 4-bit input in whole 64-spectrum stages: the wgmma kernels (64 x 64 tiles,
     * or one block per channel for 64 < N <= 80; correlator_sm90.cu).
     * Anything else, or an explicit size: the mma.sync kernel. */
    int sm90 = 0;
#ifdef CBF_CORR_SM90
    if (block_ants == 0 && cbf_corr_sm90_fits(shape)) {
        sm90 = cbf_corr_sm90_prepare() == cudaSuccess;
        if (!sm90)
            (void)cudaGetLastError(); /* not this GPU: clear it, use the portable kernel */
    }
#endif
    if (sm90)
        block_ants = CBF_CORR_SM90_TILE;
    else if (block_ants == 0)
        block_ants = shape->n_ants <= 32 ? 32 : 64;
    if (block_ants != 32 && block_ants != 48 && block_ants != 64) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "correlator: block_ants %d: must be 32, 48 or 64", block_ants);
    }
    int dev, sms;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cbf_corr_cuda *p = (cbf_corr_cuda *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    p->shape = *shape;
    p->sms = sms;
    p->ry = block_ants;
    p->sm90 = sm90;
    /* mma.sync: 64 x 32 as katgpucbf's correlator does; wgmma: 64 x 64 */
    p->rx = block_ants == 64 && !sm90 ? 32 : block_ants;
    /* Triangular map: only tiles holding some a1 <= a2 are launched. */
    const int n = shape->n_ants, ny = (n + p->ry - 1) / p->ry, nx = (n + p->rx - 1) / p->rx;
    int2 *host = (int2 *)malloc(sizeof(int2) * (size_t)ny * nx);
    if (!host) {
        free(p);
        return CBF_KERN_ENOMEM;
    }
    for (int j = 0; j < nx; j++)
        for (int i = 0; i < ny && i * p->ry <= j * p->rx + p->rx - 1; i++)
            host[p->ntiles++] = make_int2(i * p->ry, j * p->rx);
    cudaError_t e = cudaMalloc(&p->tiles, sizeof(int2) * (size_t)p->ntiles);
    if (e == cudaSuccess)
        e = cudaMemcpy(p->tiles, host, sizeof(int2) * (size_t)p->ntiles, cudaMemcpyHostToDevice);
    free(host);
    if (e != cudaSuccess) {
        cbf_corr_cuda_destroy(p);
        return cbf_kern_cuda(e, msg, msglen, "correlator", "tile map");
    }
    *out = p;
    return 0;
}

/* The job is valid and of the plan's shape. */
static int plan_job_check(const cbf_corr_cuda *p, const cbf_corr_job *job, char *msg, size_t msglen)
{
    int rc = cbf_corr_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const cbf_corr_shape *s = &job->shape, *ps = &p->shape;
    if (s->n_ants != ps->n_ants || s->channels != ps->channels ||
        s->spectra_per_heap != ps->spectra_per_heap || s->bits != ps->bits) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "correlator: job shape differs from the plan's");
    }
    return 0;
}

int cbf_xb_cuda_fused(const cbf_corr_cuda *p, const cbf_corr_job *job, const cbf_beam_job *beams)
{
#ifdef CBF_CORR_SM90
    return p->sm90 && cbf_corr_sm90_xb_fits(job, beams);
#else
    (void)p, (void)job, (void)beams;
    return 0;
#endif
}

int cbf_xb_cuda_can_fuse(const cbf_corr_cuda *p, const cbf_beam_shape *beams)
{
#ifdef CBF_CORR_SM90
    return p->sm90 && cbf_corr_sm90_xb_shape_fits(&p->shape, beams);
#else
    (void)p, (void)beams;
    return 0;
#endif
}

int cbf_xb_cuda_prefer_fused(const cbf_corr_cuda *p, const cbf_beam_shape *beams)
{
    return cbf_xb_cuda_can_fuse(p, beams);
}

int cbf_xb_cuda_run(cbf_corr_cuda *p, const cbf_corr_job *job, const cbf_beam_job *beams, void *stream,
                    char *msg, size_t msglen)
{
    int rc = cbf_beam_job_check(beams, msg, msglen);
    if (rc)
        return rc;
    if (beams->in != job->in)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "xb: the beams' input is not the correlator's");
#ifdef CBF_CORR_SM90
    if (cbf_xb_cuda_fused(p, job, beams) && job->batch_end > 0) {
        if ((rc = plan_job_check(p, job, msg, msglen)))
            return rc;
        const void *dig = NULL;
        if (beams->coef_version) {
            const cbf_beam_shape *b = &beams->shape;
            const size_t need = cbf_corr_sm90_xb_digits_bytes(b);
            if (need > p->xb_cap) {
                /* cudaFree waits for the kernels that read the old ones */
                cudaFree(p->xb_digits);
                p->xb_digits = NULL;
                p->xb_cap = 0;
                p->xb_version = 0;
                CUDA_TRY(cudaMalloc(&p->xb_digits, need));
                p->xb_cap = need;
            }
            if (p->xb_version != beams->coef_version || p->xb_coef != beams->coef || p->xb_pol != beams->pol ||
                memcmp(&p->xb_shape, b, sizeof *b)) {
                p->xb_version = 0;
                CUDA_TRY(cbf_corr_sm90_xb_digits(beams, p->xb_digits, (cudaStream_t)stream));
                p->xb_version = beams->coef_version;
                p->xb_coef = beams->coef;
                p->xb_pol = beams->pol;
                p->xb_shape = *b;
            }
            dig = p->xb_digits;
        }
        CUDA_TRY(cbf_corr_sm90_xb_launch(job, beams, dig, p->tiles, p->sms, (cudaStream_t)stream));
        return 0;
    }
#endif
    if ((rc = cbf_corr_cuda_run(p, job, stream, msg, msglen)))
        return rc;
    return cbf_beam_cuda_run(beams, stream, msg, msglen);
}

int cbf_corr_cuda_auto_slices(const cbf_corr_cuda *plan, size_t batches)
{
    /* The wgmma kernel cuts the time range itself and adds into slice 0. */
    if (plan->sm90)
        return 1;
    /* About four blocks per SM in flight, never more slices than batches. */
    long want = 4L * plan->sms, have = (long)plan->ntiles * plan->shape.channels;
    long s = (want + have - 1) / have;
    if (s > (long)batches)
        s = (long)batches;
    if (s > 65535)
        s = 65535;
    return s < 1 ? 1 : (int)s;
}

int cbf_corr_cuda_run(cbf_corr_cuda *p, const cbf_corr_job *job, void *stream, char *msg,
                      size_t msglen)
{
    int rc = plan_job_check(p, job, msg, msglen);
    if (rc)
        return rc;
    const cbf_corr_shape *s = &job->shape;
    if (job->batch_end == job->batch_begin)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
#ifdef CBF_CORR_SM90
    if (p->sm90) {
        /* the tensor-copy engine reads the input: 16-byte aligned, batch
         * numbers that fit its 32-bit coordinates */
        if ((uintptr_t)job->in % 16 || job->batch_end > INT32_MAX) {
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                                 "correlator: input at %p, batches to %zu: the Hopper kernel "
                                 "needs 16-byte alignment and fewer than 2^31 batches",
                                 (const void *)job->in, job->batch_end);
        }
        CUDA_TRY(cbf_corr_sm90_launch(job, p->tiles, p->ntiles, p->sms, st));
        return 0;
    }
#endif
    dim3 grid((unsigned)p->ntiles, (unsigned)s->channels, (unsigned)job->slices);
    const size_t len = cbf_corr_accum_len(s);
    long long *acc = (long long *)job->accum;
#define LAUNCH(B, Y, X)                                                                         \
    corr_kernel<B, Y, X><<<grid, THREADS, 0, st>>>(job->in, acc, p->tiles, s->n_ants,          \
                                                    s->channels, s->spectra_per_heap,          \
                                                    job->batch_begin, job->batch_end, len)
    if (s->bits == 8) {
        if (p->ry == 32)
            LAUNCH(8, 32, 32);
        else if (p->ry == 48)
            LAUNCH(8, 48, 48);
        else
            LAUNCH(8, 64, 32);
    } else {
        if (p->ry == 32)
            LAUNCH(4, 32, 32);
        else if (p->ry == 48)
            LAUNCH(4, 48, 48);
        else
            LAUNCH(4, 64, 32);
    }
#undef LAUNCH
    CUDA_TRY(cudaGetLastError());
    return 0;
}

const char *cbf_corr_cuda_kernel(const cbf_corr_cuda *p)
{
#ifdef CBF_CORR_SM90
    if (p->sm90)
        return cbf_corr_sm90_kernel(p->shape.n_ants);
#endif
    return p->ry == 64 ? "mma.sync 64x32" : p->ry == 48 ? "mma.sync 48x48" : "mma.sync 32x32";
}

void cbf_corr_cuda_destroy(cbf_corr_cuda *p)
{
    if (!p)
        return;
    cudaFree(p->tiles);
    cudaFree(p->xb_digits);
    free(p);
}

} /* extern "C" */
