/* pfb.cu: the FIR on the GPU, decode fused in.
 *
 * One thread owns one column j of one polarisation for a section of
 * consecutive spectra: its `taps` weights and a sliding window of `taps`
 * samples live in registers (TAPS is a template parameter so every window
 * index is a compile-time constant), and each new spectrum costs one decoded
 * sample, TAPS FMAs and one float store. Neighbouring threads take
 * neighbouring columns, so loads and stores are coalesced along a row; the
 * unzipped store order keeps runs of 32 / n floats contiguous. Columns are
 * cut into sections of spectra only to give the GPU enough threads. A warp
 * loads its 32 packed samples of a row as whole words, one per lane, and
 * shares them with shuffles (fir_load); the next TAPS rows are in flight
 * while the current ones are filtered (fir_turn). docs/notes/performance-history.md,
 * "Fused FFT + post with cuFFTDx", has the measurements behind each choice. */
#include "pfb.h"

#include "cbf_cplx.h"
#include "cuda_check.h"

#include <cuda_runtime.h>

struct cbf_pfb_cuda {
    int channels, taps;
    float *weights;                /* device, step x taps */
    unsigned long long *power;     /* device, 2 sums */
    unsigned long long *power_host; /* pinned */
};

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("pfb", call)

/* A column's samples all sit at the same bit position within their bytes
 * (step x bits is a whole number of bytes), so a thread finds its shift once
 * and then walks down the column by a fixed byte stride. Two bytes always
 * hold a sample (widths up to 10, 12, 16); the top bit of the first is the
 * sample's first bit after the shift. Used for the window's first TAPS - 1
 * rows only; the turns load words (fir_load). */
__device__ __forceinline__ int decode_at(const uint8_t *__restrict__ p, int off, int sh, int bits)
{
    unsigned v = ((unsigned)__ldg(p + off) << 8) | __ldg(p + off + 1);
    return (int)(short)(unsigned short)(v << sh) >> (16 - bits);
}

__device__ __forceinline__ void add_power(unsigned long long *pw, int v)
{
    unsigned a = (unsigned)abs(v);
    *pw += (unsigned long long)a * a;
}

/* Warp-cooperative loads: a warp's 32 samples of a row lie in at most 18
 * aligned 32-bit words (32 x 16 bits plus the offsets), the same for every
 * row. Lane k loads word k of the row (lanes past the last word load
 * nothing), one load and one register per row instead of two byte loads
 * and two registers; fir_sum then fetches each lane's two bytes from the
 * word(s) holding them with two shuffles. np walks down the column's rows
 * (one row_words step per row), so an address costs one add. */
template <int TAPS, bool TAIL>
__device__ __forceinline__ void fir_load(const unsigned *__restrict__ &np, int row_words, bool ld,
                                         int s, int len, unsigned (&v)[TAPS])
{
#pragma unroll
    for (int u = 0; u < TAPS; u++) {
        v[u] = ((!TAIL || s + u < len) && ld) ? __ldg(np) : 0u;
        /* One 64-bit add per row: written as a plain += the compiler
         * rebuilds each address as np + u x row_words (three instructions). */
        unsigned long long a = (unsigned long long)np;
        asm("add.s64 %0, %0, %1;" : "+l"(a) : "l"(4LL * row_words));
        np = (const unsigned *)a;
    }
}

/* The filter of TAPS spectra from one turn of loaded words. The window is
 * a ring of TAPS registers indexed (row mod TAPS), unrolled by TAPS so
 * every ring index is a constant. A sample: the word(s) holding its first
 * byte (word k) and the next (word k or k + 1), the two bytes put at the
 * top of 32 bits by sel, shifted by sh and sign-extended by one arithmetic
 * shift. Power: the squares of samples of rows < len; ALL: every sample of
 * the turn counts (no test); !WIDE: the turn's squares summed in 32 bits
 * (16 x (2^11)^2 < 2^32 for widths up to 12 bits) and widened once. */
template <int TAPS, bool TAIL, bool ALL, bool WIDE>
__device__ __forceinline__ void fir_sum(const unsigned (&v)[TAPS], int s, int len, int k,
                                        unsigned sel, int sh, int bits, float (&win)[TAPS],
                                        const float (&wr)[TAPS], float *o, int step,
                                        unsigned long long &pw)
{
    unsigned sq = 0;
#pragma unroll
    for (int u = 0; u < TAPS; u++) {
        if (TAIL && s + u >= len) /* len is the block's: the shuffles stay uniform */
            break;
        unsigned lo = __shfl_sync(0xffffffffu, v[u], k), hi = __shfl_sync(0xffffffffu, v[u], k + 1);
        int x = (int)(__byte_perm(lo, hi, sel) << sh) >> (32 - bits);
        if (ALL || s + u + TAPS - 1 < len) {
            if (WIDE)
                add_power(&pw, x);
            else
                sq += (unsigned)(x * x);
        }
        win[(u + TAPS - 1) % TAPS] = (float)x;
        float acc = 0.0f;
#pragma unroll
        for (int t = 0; t < TAPS; t++)
            acc = fmaf(wr[t], win[(u + t) % TAPS], acc);
        o[(long long)(s + u) * step] = acc;
    }
    if (!WIDE)
        pw += sq;
}

/* One turn from spectrum s: the next turn's rows are loaded into nxt
 * first, so they are in flight while cur is filtered (at 4096 channels
 * 1.12 ms against 1.14-1.18 without; docs/notes/performance-history.md). false: the
 * section is done (a last turn of fewer than TAPS spectra filtered). */
template <int TAPS, bool WIDE>
__device__ __forceinline__ bool fir_turn(const unsigned (&cur)[TAPS], unsigned (&nxt)[TAPS],
                                         const unsigned *__restrict__ &np, int row_words,
                                         bool ld, int &s, int len, int k, unsigned sel, int sh,
                                         int bits, float (&win)[TAPS], const float (&wr)[TAPS],
                                         float *o, int step, unsigned long long &pw)
{
    if (s + TAPS > len) {
        if (s < len)
            fir_sum<TAPS, true, false, WIDE>(cur, s, len, k, sel, sh, bits, win, wr, o, step, pw);
        return false;
    }
    if (s + 2 * TAPS <= len)
        fir_load<TAPS, false>(np, row_words, ld, s + TAPS, len, nxt);
    else
        fir_load<TAPS, true>(np, row_words, ld, s + TAPS, len, nxt);
    if (s + 2 * TAPS - 1 <= len)
        fir_sum<TAPS, false, true, WIDE>(cur, s, len, k, sel, sh, bits, win, wr, o, step, pw);
    else
        fir_sum<TAPS, false, false, WIDE>(cur, s, len, k, sel, sh, bits, win, wr, o, step, pw);
    s += TAPS;
    return true;
}

/* WIDE: 16-bit samples, whose squares are summed in 64 bits each. */
template <int TAPS, bool WIDE>
__global__ void __launch_bounds__(128, 5) fir_kernel(
    const uint8_t *__restrict__ in0, const uint8_t *__restrict__ in1, long long start0,
    long long start1, int bits, const float *__restrict__ w, int step, int log_n, int m,
    long long spectra, int section, float *__restrict__ out, long long pol_stride,
    unsigned long long *power)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    const int pol = blockIdx.z;
    const long long s0 = (long long)blockIdx.y * section;
    const int len = (int)min((long long)section, spectra - s0);
    const uint8_t *in = pol ? in1 : in0;
    const long long first = (pol ? start1 : start0) + s0 * step;
    const long long bit0 = (first + j) * bits;
    const uint8_t *p = in + (bit0 >> 3);
    const int sh = (int)(bit0 & 7), row_bytes = step / 8 * bits, row_words = row_bytes / 4;
    /* The warp's words: from the aligned word holding lane 0's first byte
     * (row_bytes is a multiple of 4, so the same in every row). rel: this
     * lane's first byte from there; lane 31's second byte is the last one
     * the warp needs. */
    const uint8_t *b0 = in + (((first + j - lane) * bits) >> 3);
    const unsigned *wp = (const unsigned *)(b0 - ((size_t)b0 & 3));
    const int rel = (int)(p - (const uint8_t *)wp), k = rel >> 2, b = rel & 3;
    const bool ld = lane <= ((__shfl_sync(0xffffffffu, rel, 31) + 1) >> 2);
    const unsigned sel = ((unsigned)b << 12) | ((unsigned)(b + 1) << 8);
    const unsigned *__restrict__ np = wp + lane + (TAPS - 1) * row_words;

    float wr[TAPS], win[TAPS];
#pragma unroll
    for (int t = 0; t < TAPS; t++)
        wr[t] = __ldg(w + (long long)t * step + j);
    unsigned long long pw = 0;
#pragma unroll
    for (int t = 0; t < TAPS - 1; t++) {
        int v = decode_at(p, t * row_bytes, sh, bits);
        win[t] = (float)v;
        if (t < len)
            add_power(&pw, v);
    }
    const int i = j >> 1, q = i >> log_n, r = i & ((1 << log_n) - 1);
    float *o = out + pol * pol_stride + s0 * step + 2 * (r * m + q) + (j & 1);
    /* Two turns per iteration, the word buffers swapping roles, so no
     * register moves between turns. */
    unsigned va[TAPS], vb[TAPS];
    int s = 0;
    fir_load<TAPS, true>(np, row_words, ld, 0, len, va);
    while (fir_turn<TAPS, WIDE>(va, vb, np, row_words, ld, s, len, k, sel, sh, bits, win, wr, o,
                                step, pw) &&
           fir_turn<TAPS, WIDE>(vb, va, np, row_words, ld, s, len, k, sel, sh, bits, win, wr, o,
                                step, pw))
        ;
    for (int off = 16; off; off >>= 1)
        pw += __shfl_down_sync(0xffffffffu, pw, off);
    if ((threadIdx.x & 31) == 0 && pw)
        atomicAdd(power + pol, pw);
}

typedef void (*fir_fn)(const uint8_t *, const uint8_t *, long long, long long, int,
                       const float *, int, int, int, long long, int, float *, long long,
                       unsigned long long *);

#define FIR_ROW(WIDE)                                                                        \
    {                                                                                        \
        fir_kernel<1, WIDE>, fir_kernel<2, WIDE>, fir_kernel<3, WIDE>, fir_kernel<4, WIDE>,  \
        fir_kernel<5, WIDE>, fir_kernel<6, WIDE>, fir_kernel<7, WIDE>, fir_kernel<8, WIDE>,  \
        fir_kernel<9, WIDE>, fir_kernel<10, WIDE>, fir_kernel<11, WIDE>,                     \
        fir_kernel<12, WIDE>, fir_kernel<13, WIDE>, fir_kernel<14, WIDE>,                    \
        fir_kernel<15, WIDE>, fir_kernel<16, WIDE>                                           \
    }

static fir_fn pick(int taps, int bits)
{
    static const fir_fn table[2][CBF_PFB_MAX_TAPS] = {FIR_ROW(false), FIR_ROW(true)};
    return table[bits > 12][taps - 1];
}
#undef FIR_ROW

extern "C" int cbf_pfb_cuda_create(int channels, int taps, const float *weights_host,
                                   cbf_pfb_cuda **out, char *msg, size_t msglen)
{
    cbf_pfb_job shape = {};
    shape.channels = channels;
    shape.taps = taps;
    shape.bits = 8;
    shape.unzip = 1;
    int rc = cbf_pfb_job_check(&shape, msg, msglen);
    if (rc)
        return rc;
    cbf_pfb_cuda *p = (cbf_pfb_cuda *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    p->channels = channels;
    p->taps = taps;
    size_t bytes = 2 * (size_t)channels * taps * sizeof(float);
    cudaError_t e = cudaMalloc((void **)&p->weights, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->power, 2 * sizeof(unsigned long long));
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&p->power_host, 2 * sizeof(unsigned long long));
    if (e == cudaSuccess)
        e = cudaMemcpy(p->weights, weights_host, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemset(p->power, 0, 2 * sizeof(unsigned long long));
    if (e != cudaSuccess) {
        cbf_pfb_cuda_destroy(p);
        return cbf_kern_cuda(e, msg, msglen, "pfb", "allocating the CUDA plan");
    }
    *out = p;
    return 0;
}

/* What both runs check before queueing: the job's own check (its code
 * `rc`, the message already in msg), then the job's shape against the
 * plan's. 0 to queue the kernel, 1 when there are no spectra (nothing to
 * queue), or the failure's negative code. */
static int check_run(int rc, const cbf_pfb_cuda *plan, int channels, int taps, size_t spectra,
                     char *msg, size_t msglen)
{
    if (rc)
        return rc;
    if (channels != plan->channels || taps != plan->taps)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "pfb: job has %d channels x %d taps, plan %d x %d", channels, taps,
                             plan->channels, plan->taps);
    return spectra ? 0 : 1;
}

/* Spectra per section (blockIdx.y): enough threads to fill the GPU several
 * times over (about 2^21, `lanes` threads per spectrum), but sections of at
 * least 4 x taps spectra so the reloaded overlap stays small, and no more
 * than 65535 sections. */
static long long section_length(long long spectra, long long lanes, int taps)
{
    long long sections = ((1 << 21) + lanes - 1) / lanes;
    long long section = (spectra + sections - 1) / sections;
    if (section < 4 * taps)
        section = 4 * taps;
    if (spectra / section >= 65535)
        section = (spectra + 65534) / 65535;
    return section;
}

extern "C" int cbf_pfb_cuda_run(cbf_pfb_cuda *plan, const cbf_pfb_job *job, void *stream,
                                char *msg, size_t msglen)
{
    int rc = check_run(cbf_pfb_job_check(job, msg, msglen), plan, job->channels, job->taps,
                       job->spectra, msg, msglen);
    if (rc)
        return rc < 0 ? rc : 0;
    const int step = 2 * job->channels, block = 128;
    long long section = section_length((long long)job->spectra, 2LL * step, job->taps);
    /* Byte offsets down a column are 32-bit. */
    long long row_bytes = (long long)step / 8 * job->bits;
    if ((section + job->taps) * row_bytes >= (1LL << 31)) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "pfb: %zu spectra of %d channels: too many for one call", job->spectra,
                             job->channels);
    }
    dim3 grid(step / block, (unsigned)(((long long)job->spectra + section - 1) / section), 2);
    int log_n = job->unzip == 4 ? 2 : job->unzip == 2 ? 1 : 0;
    pick(job->taps, job->bits)<<<grid, block, 0, (cudaStream_t)stream>>>(
        job->in[0], job->in[1], job->start[0], job->start[1], job->bits, plan->weights, step,
        log_n, job->channels / job->unzip, (long long)job->spectra, (int)section, job->out,
        (long long)job->out_pol_stride, plan->power);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

/* Narrowband FIR on complex float input: one thread per float column f of
 * the 2 x step floats of a spectrum (re and im are independent real
 * streams; the weight is complex sample f / 2's), the same register ring as
 * the packed kernel, unrolled by TAPS. Loads and stores run along a row.
 * A turn loads TAPS rows (cfir_load) and then filters TAPS spectra
 * (cfir_sum), each stored to o[u * ostride] as soon as it is summed. */
template <int TAPS, bool TAIL>
__device__ __forceinline__ void cfir_load(const float *__restrict__ p, long long row, int s,
                                          int len, float *v)
{
#pragma unroll
    for (int u = 0; u < TAPS; u++)
        v[u] = (!TAIL || s + u < len) ? __ldg(p + (long long)(s + u + TAPS - 1) * row) : 0.0f;
}

template <int TAPS, bool TAIL>
__device__ __forceinline__ void cfir_sum(const float *v, int s, int len, float *win,
                                         const float *wr, float *o, long long ostride)
{
#pragma unroll
    for (int u = 0; u < TAPS; u++) {
        if (TAIL && s + u >= len)
            break;
        win[(u + TAPS - 1) % TAPS] = v[u];
        float acc = 0.0f;
#pragma unroll
        for (int t = 0; t < TAPS; t++)
            acc = fmaf(wr[t], win[(u + t) % TAPS], acc);
        o[u * ostride] = acc;
    }
}

template <int TAPS>
__device__ __forceinline__ void cfir_natural(
    const float *__restrict__ in0, const float *__restrict__ in1, long long start0,
    long long start1, const float *__restrict__ w, int step, long long spectra, int section,
    float *__restrict__ out, long long pol_stride)
{
    const int f = blockIdx.x * blockDim.x + threadIdx.x;
    const int pol = blockIdx.z;
    const long long row = 2LL * step, s0 = (long long)blockIdx.y * section;
    const int len = (int)min((long long)section, spectra - s0);
    const float *p = (pol ? in1 : in0) + 2 * (pol ? start1 : start0) + s0 * row + f;
    float wr[TAPS], win[TAPS];
#pragma unroll
    for (int t = 0; t < TAPS; t++)
        wr[t] = __ldg(w + (long long)t * step + (f >> 1));
#pragma unroll
    for (int t = 0; t < TAPS - 1; t++)
        win[t] = __ldg(p + t * row);
    float *o = out + pol * pol_stride + s0 * row + f;
    float v[TAPS];
    int s = 0;
    for (; s + TAPS <= len; s += TAPS) {
        cfir_load<TAPS, false>(p, row, s, len, v);
        cfir_sum<TAPS, false>(v, s, len, win, wr, o + s * row, row);
    }
    if (s < len) {
        cfir_load<TAPS, true>(p, row, s, len, v);
        cfir_sum<TAPS, true>(v, s, len, win, wr, o + s * row, row);
    }
}

/* The same FIR with the first radix-NU stage of the step-point transform
 * after it (pfb.h: u_j[q] = exp(-2 pi i q j / step) sum_r y[q + r m]
 * exp(-2 pi i r j / NU), m = step / NU). A block of 128 threads filters Q =
 * 64 / NU consecutive complex columns q of each of the NU sub-sequences r
 * (thread: re / im bit 0, q next, r on top, so each warp loads 128
 * contiguous bytes), parks a turn's TAPS rows in shared memory, loads the
 * next turn's rows (so they are in flight during what follows), and then
 * the same thread, as output j = its r, sums the NU values of its q
 * (powers of -i: no multiplies), turns them by its twiddle, fixed for all
 * its spectra, and stores its part: again 128 contiguous bytes per warp.
 * The twiddle's argument 2 q j / step is exact in float (q j < step <=
 * 2^17). */
template <int TAPS, int NU>
__device__ __forceinline__ void cfir_unzip(
    const float *__restrict__ in0, const float *__restrict__ in1, long long start0,
    long long start1, const float *__restrict__ w, int step, long long spectra, int section,
    float *__restrict__ out, long long pol_stride)
{
    constexpr int Q = 64 / NU;
    __shared__ float buf[TAPS][128];
    const int tid = threadIdx.x, e = tid & 1, ql = (tid >> 1) & (Q - 1), r = tid / (2 * Q);
    const int m = step / NU, q = blockIdx.x * Q + ql, col = r * m + q;
    const int pol = blockIdx.z;
    const long long row = 2LL * step, s0 = (long long)blockIdx.y * section;
    const int len = (int)min((long long)section, spectra - s0);
    const float *p = (pol ? in1 : in0) + 2 * (pol ? start1 : start0) + s0 * row + 2 * col + e;
    float wr[TAPS], win[TAPS], v[TAPS];
#pragma unroll
    for (int t = 0; t < TAPS; t++)
        wr[t] = __ldg(w + (long long)t * step + col);
#pragma unroll
    for (int t = 0; t < TAPS - 1; t++)
        win[t] = __ldg(p + t * row);
    const float2 tw = expi_pi(-2.0f * (float)(q * r) / (float)step);
    float *o = out + pol * pol_stride + s0 * row + 2 * col + e; /* col = j m + q, j = r */
    /* len, s: the same in the whole block, so the barriers are uniform. */
    cfir_load<TAPS, true>(p, row, 0, len, v);
    for (int s = 0; s < len; s += TAPS) {
        if (s + TAPS <= len)
            cfir_sum<TAPS, false>(v, s, len, win, wr, &buf[0][tid], 128);
        else
            cfir_sum<TAPS, true>(v, s, len, win, wr, &buf[0][tid], 128);
        __syncthreads();
        if (s + 2 * TAPS <= len)
            cfir_load<TAPS, false>(p, row, s + TAPS, len, v);
        else if (s + TAPS < len)
            cfir_load<TAPS, true>(p, row, s + TAPS, len, v);
#pragma unroll
        for (int u = 0; u < TAPS; u++) {
            if (s + u >= len)
                break;
            float2 a = make_float2(0.f, 0.f);
#pragma unroll
            for (int rr = 0; rr < NU; rr++) {
                float2 y = make_float2(buf[u][rr * 2 * Q + 2 * ql], buf[u][rr * 2 * Q + 2 * ql + 1]);
                y = rot_quarter(y, (rr * r) % NU * (4 / NU));
                a.x += y.x;
                a.y += y.y;
            }
            a = cmul(tw, a);
            o[(long long)(s + u) * row] = e ? a.y : a.x;
        }
        __syncthreads();
    }
}

template <int TAPS, int NU>
__global__ void __launch_bounds__(128) cfir_kernel(
    const float *__restrict__ in0, const float *__restrict__ in1, long long start0,
    long long start1, const float *__restrict__ w, int step, long long spectra, int section,
    float *__restrict__ out, long long pol_stride)
{
    if constexpr (NU == 1)
        cfir_natural<TAPS>(in0, in1, start0, start1, w, step, spectra, section, out, pol_stride);
    else
        cfir_unzip<TAPS, NU>(in0, in1, start0, start1, w, step, spectra, section, out,
                             pol_stride);
}

typedef void (*cfir_fn)(const float *, const float *, long long, long long, const float *, int,
                        long long, int, float *, long long);

#define CFIR_ROW(NU)                                                                         \
    {                                                                                        \
        cfir_kernel<1, NU>, cfir_kernel<2, NU>, cfir_kernel<3, NU>, cfir_kernel<4, NU>,      \
        cfir_kernel<5, NU>, cfir_kernel<6, NU>, cfir_kernel<7, NU>, cfir_kernel<8, NU>,      \
        cfir_kernel<9, NU>, cfir_kernel<10, NU>, cfir_kernel<11, NU>, cfir_kernel<12, NU>,   \
        cfir_kernel<13, NU>, cfir_kernel<14, NU>, cfir_kernel<15, NU>, cfir_kernel<16, NU>   \
    }

static cfir_fn pick_complex(int taps, int unzip)
{
    static const cfir_fn table[3][CBF_PFB_MAX_TAPS] = {CFIR_ROW(1), CFIR_ROW(2), CFIR_ROW(4)};
    return table[unzip == 4 ? 2 : unzip == 2 ? 1 : 0][taps - 1];
}
#undef CFIR_ROW

extern "C" int cbf_pfb_cuda_run_complex(cbf_pfb_cuda *plan, const cbf_pfb_cjob *job,
                                        void *stream, char *msg, size_t msglen)
{
    int rc = check_run(cbf_pfb_cjob_check(job, msg, msglen), plan, job->channels, job->taps,
                       job->spectra, msg, msglen);
    if (rc)
        return rc < 0 ? rc : 0;
    const int step = 2 * job->channels, block = 128;
    long long section = section_length((long long)job->spectra, 4LL * step, job->taps);
    dim3 grid(2 * step / block, (unsigned)(((long long)job->spectra + section - 1) / section), 2);
    pick_complex(job->taps, job->unzip)<<<grid, block, 0, (cudaStream_t)stream>>>(
        job->in[0], job->in[1], job->start[0], job->start[1], plan->weights, step,
        (long long)job->spectra, (int)section, job->out, (long long)job->out_pol_stride);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

extern "C" int cbf_pfb_cuda_power(cbf_pfb_cuda *plan, void *stream, uint64_t power[2],
                                  char *msg, size_t msglen)
{
    cudaStream_t s = (cudaStream_t)stream;
    CUDA_TRY(cudaMemcpyAsync(plan->power_host, plan->power, 2 * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, s));
    CUDA_TRY(cudaMemsetAsync(plan->power, 0, 2 * sizeof(unsigned long long), s));
    CUDA_TRY(cudaStreamSynchronize(s));
    power[0] = plan->power_host[0];
    power[1] = plan->power_host[1];
    return 0;
}

extern "C" int cbf_pfb_cuda_power_async(cbf_pfb_cuda *plan, void *stream, uint64_t dst[2],
                                        char *msg, size_t msglen)
{
    static_assert(sizeof(uint64_t) == sizeof(unsigned long long), "sums are 64-bit");
    cudaStream_t s = (cudaStream_t)stream;
    CUDA_TRY(cudaMemcpyAsync(dst, plan->power, 2 * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, s));
    CUDA_TRY(cudaMemsetAsync(plan->power, 0, 2 * sizeof(unsigned long long), s));
    return 0;
}

extern "C" void cbf_pfb_cuda_destroy(cbf_pfb_cuda *plan)
{
    if (!plan)
        return;
    cudaFree(plan->weights);
    cudaFree(plan->power);
    cudaFreeHost(plan->power_host);
    free(plan);
}
