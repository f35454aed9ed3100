/* dsim_eval.c: see dsim_eval.h. An output is compiled into postfix code
 * (its variables written out, each delay folded into the shift of the
 * leaves below it, since every operation is sample by sample) and run
 * block by block on a stack of blocks. Tones start each block from a
 * phasor computed exactly (w i mod P in integers) and rotate from there,
 * so nothing drifts; noise is dsim_model's counter-based Gaussian. */
#include "dsim_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsim_model.h"

/* Samples a stack slot holds: the stack (CBF_DSIM_MAX_STACK slots) lives
 * on the caller's thread stack, 64 KiB, so a run allocates nothing and
 * cannot fail. */
#define BLOCK 512

typedef struct tone {
    uint64_t w;          /* waves per period, mod P */
    double amp, c1, s1;  /* amplitude; cos and sin of one sample's rotation */
} tone;

typedef struct ins {
    cbf_dsim_op op;      /* CONST, CW (tones), COMB, WGN; ADD, SUB, MUL */
    int64_t shift;       /* the leaf plays t - shift (delays), mod P */
    double amp;          /* CONST value, COMB amplitude, WGN std */
    uint64_t w;          /* COMB: pulses per period (< P); P or more: every sample */
    uint64_t key;        /* WGN */
    int tone0, n_tones;  /* CW and MULTICW: their tones */
} ins;

struct cbf_dsim_eval {
    int64_t period;
    double fs;
    bool dither;
    int n_code, cap_code, depth, max_depth;
    ins *code;
    int n_tones, cap_tones;
    tone *tones;
};

double cbf_dsim_eval_waves(double f, double fs, int64_t period)
{
    /* nearbyint rounds half to even in the default mode, as Python's round. */
    const double w = nearbyint((double)period * f / fs);
    return w > 1 ? w : 1;
}

static int64_t mod_p(int64_t x, int64_t p)
{
    const int64_t r = x % p;
    return r < 0 ? r + p : r;
}

static bool push_ins(cbf_dsim_eval *e, ins i)
{
    if (e->n_code >= e->cap_code) {
        int c = e->cap_code ? e->cap_code * 2 : 16;
        ins *n = realloc(e->code, (size_t)c * sizeof *n);
        if (!n)
            return false;
        e->code = n;
        e->cap_code = c;
    }
    e->code[e->n_code++] = i;
    if (i.op == CBF_DSIM_ADD || i.op == CBF_DSIM_SUB || i.op == CBF_DSIM_MUL)
        e->depth--;
    else if (++e->depth > e->max_depth)
        e->max_depth = e->depth;
    return true;
}

static bool add_tone(cbf_dsim_eval *e, double amp, double f)
{
    if (e->n_tones >= e->cap_tones) {
        int c = e->cap_tones ? e->cap_tones * 2 : 16;
        tone *n = realloc(e->tones, (size_t)c * sizeof *n);
        if (!n)
            return false;
        e->tones = n;
        e->cap_tones = c;
    }
    /* fmod of a whole double by a power of two or any P below 2^53 is exact. */
    const uint64_t w = (uint64_t)fmod(cbf_dsim_eval_waves(f, e->fs, e->period), (double)e->period);
    const double ph = 2.0 * M_PI * ((double)w / (double)e->period);
    e->tones[e->n_tones++] = (tone){w, amp, cos(ph), sin(ph)};
    return true;
}

/* Emits term i of p, played `shift` samples late. */
static int emit(cbf_dsim_eval *e, const cbf_dsim_prog *p, int i, int64_t shift, cbf_error *err)
{
    const cbf_dsim_term *t = &p->terms[i];
    if (e->n_code >= CBF_DSIM_MAX_CODE)
        return cbf_error_set(err, CBF_EINVAL, "an output expands to more than %d terms (variables "
                             "used many times over)", CBF_DSIM_MAX_CODE);
    ins in = {.op = t->op, .shift = shift};
    int rc;
    switch (t->op) {
    case CBF_DSIM_DELAY:
        return emit(e, p, t->a, mod_p(shift + mod_p(t->delay, e->period), e->period), err);
    case CBF_DSIM_NODITHER:
        return emit(e, p, t->a, shift, err);
    case CBF_DSIM_ADD:
    case CBF_DSIM_SUB:
    case CBF_DSIM_MUL:
        if ((rc = emit(e, p, t->a, shift, err)) || (rc = emit(e, p, t->b, shift, err)))
            return rc;
        in.shift = 0;
        break;
    case CBF_DSIM_CONST:
        in.amp = t->arg[0];
        break;
    case CBF_DSIM_CW:
    case CBF_DSIM_MULTICW: {
        in.op = CBF_DSIM_CW;
        in.tone0 = e->n_tones;
        const bool multi = t->op == CBF_DSIM_MULTICW;
        const int m = multi ? (int)t->arg[0] : 1;
        if (e->n_tones + m > CBF_DSIM_MAX_TONES)
            return cbf_error_set(err, CBF_EINVAL, "an output expands to more than %d tones",
                                 CBF_DSIM_MAX_TONES);
        for (int k = 0; k < m; k++) {
            /* As katgpucbf: amplitude0 + k amplitude_step, frequency k step + frequency0. */
            const double amp = multi ? t->arg[1] + k * t->arg[2] : t->arg[0];
            const double f = multi ? k * t->arg[4] + t->arg[3] : t->arg[1];
            if (!add_tone(e, amp, f))
                return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        }
        in.n_tones = m;
        break;
    }
    case CBF_DSIM_COMB: {
        const double w = cbf_dsim_eval_waves(t->arg[1], e->fs, e->period);
        in.amp = t->arg[0];
        in.w = w >= (double)e->period ? (uint64_t)e->period : (uint64_t)w;
        break;
    }
    case CBF_DSIM_WGN:
        in.amp = t->arg[0];
        in.key = cbf_dsim_noise_key(t->entropy);
        break;
    }
    if (!push_ins(e, in))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    return 0;
}

int cbf_dsim_eval_create(const cbf_dsim_prog *p, int output, double fs, int64_t period,
                         cbf_dsim_eval **out, cbf_error *err)
{
    if (period < 1 || !(fs > 0) || output < 0 || output >= p->n_outputs)
        return cbf_error_set(err, CBF_EINVAL, "signal: bad period %lld, rate %g or output %d",
                             (long long)period, fs, output);
    cbf_dsim_eval *e = calloc(1, sizeof *e);
    if (!e)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    e->period = period;
    e->fs = fs;
    e->dither = !cbf_dsim_prog_nodither(p, output);
    int rc = emit(e, p, p->outputs[output], 0, err);
    if (!rc && e->max_depth > CBF_DSIM_MAX_STACK)
        rc = cbf_error_set(err, CBF_EINVAL, "an output needs more than %d partial results at once "
                           "(operations nested inside the right operand); write them left to right",
                           CBF_DSIM_MAX_STACK);
    if (rc) {
        cbf_dsim_eval_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void cbf_dsim_eval_free(cbf_dsim_eval *e)
{
    if (!e)
        return;
    free(e->code);
    free(e->tones);
    free(e);
}

bool cbf_dsim_eval_dither(const cbf_dsim_eval *e) { return e->dither; }
int64_t cbf_dsim_eval_period(const cbf_dsim_eval *e) { return e->period; }

/* Tones over period indices [i0, i0 + n), within one period. */
static void run_tones(const cbf_dsim_eval *e, const ins *in, int64_t i0, size_t n, double *v)
{
    for (size_t j = 0; j < n; j++)
        v[j] = 0.0;
    const uint64_t P = (uint64_t)e->period;
    for (int k = 0; k < in->n_tones; k++) {
        const tone *tn = &e->tones[in->tone0 + k];
        /* w < P and i0 < P, both below 2^31: the product fits. */
        const double ph = 2.0 * M_PI * ((double)(tn->w * (uint64_t)i0 % P) / (double)P);
        double zr = tn->amp * cos(ph), zi = tn->amp * sin(ph);
        for (size_t j = 0; j < n; j++) {
            v[j] += zr;
            const double r = zr * tn->c1 - zi * tn->s1;
            zi = zr * tn->s1 + zi * tn->c1;
            zr = r;
        }
    }
}

/* A comb's pulses over period indices [i0, i0 + n), within one period. */
static void run_comb(const cbf_dsim_eval *e, const ins *in, int64_t i0, size_t n, double *v)
{
    const uint64_t P = (uint64_t)e->period, w = in->w;
    for (size_t j = 0; j < n; j++)
        v[j] = w >= P ? in->amp : 0.0;
    if (w >= P)
        return;
    const uint64_t lo = (uint64_t)i0, hi = lo + n;
    uint64_t c = lo * w / P;
    c = c ? c - 1 : 0;
    const uint64_t c_end = (hi * w + P - 1) / P + 1;
    for (; c < c_end && c < w; c++) {
        /* round(c P / w), half to even, in integers. */
        uint64_t q = c * P / w;
        const uint64_t r = c * P % w;
        if (2 * r > w || (2 * r == w && (q & 1)))
            q++;
        if (q >= lo && q < hi)
            v[q - lo] = in->amp;
    }
}

/* A leaf over samples [u, u + n): cut where the period wraps. */
static void run_leaf(const cbf_dsim_eval *e, const ins *in, int64_t u, size_t n, double *v)
{
    const int64_t P = e->period;
    if (in->op == CBF_DSIM_CONST) {
        for (size_t j = 0; j < n; j++)
            v[j] = in->amp;
        return;
    }
    if (in->op == CBF_DSIM_WGN) {
        for (size_t j = 0; j < n; j++)
            v[j] = 0.0;
        cbf_dsim_noise_add(v, in->key, u, n, in->amp, P);
        return;
    }
    int64_t i = mod_p(u, P);
    for (size_t done = 0; done < n;) {
        const size_t len = (size_t)(P - i) < n - done ? (size_t)(P - i) : n - done;
        if (in->op == CBF_DSIM_CW)
            run_tones(e, in, i, len, v + done);
        else
            run_comb(e, in, i, len, v + done);
        done += len;
        i = 0;
    }
}

void cbf_dsim_eval_run(const cbf_dsim_eval *e, int64_t first, size_t n, double *out)
{
    const size_t blk = BLOCK;
    double stack[(CBF_DSIM_MAX_STACK - 1) * BLOCK];
    for (size_t done = 0; done < n; done += blk) {
        const size_t len = n - done < blk ? n - done : blk;
        const int64_t t = first + (int64_t)done;
        int sp = 0;
        for (int k = 0; k < e->n_code; k++) {
            const ins *in = &e->code[k];
            /* Slot 0 is the output itself, the others the scratch. */
#define SLOT(s) ((s) == 0 ? out + done : stack + (size_t)((s) - 1) * blk)
            if (in->op == CBF_DSIM_ADD || in->op == CBF_DSIM_SUB || in->op == CBF_DSIM_MUL) {
                double *a = SLOT(sp - 2);
                const double *b = SLOT(sp - 1);
                if (in->op == CBF_DSIM_ADD)
                    for (size_t j = 0; j < len; j++)
                        a[j] += b[j];
                else if (in->op == CBF_DSIM_SUB)
                    for (size_t j = 0; j < len; j++)
                        a[j] -= b[j];
                else
                    for (size_t j = 0; j < len; j++)
                        a[j] *= b[j];
                sp--;
            } else {
                run_leaf(e, in, t - in->shift, len, SLOT(sp));
                sp++;
            }
#undef SLOT
        }
    }
}
