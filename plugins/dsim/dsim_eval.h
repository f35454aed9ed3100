/* dsim_eval.h: one output of a signal-language program (dsim_lang.h) as
 * sample values, for a period P and a sample rate fs, with the meaning
 * katgpucbf's dsim gives each term.
 *
 * katgpucbf computes a signal for one period and replays it, so every
 * output repeats every P samples and sample t is the output at the period
 * index i = t mod P (phases are 0 at every multiple of P). With
 * w(f) = max(1, round(P f / fs)) (half to even) whole waves per period:
 *
 *   number c          c
 *   cw(A, f)          A cos(2 pi w(f) i / P)
 *   multicw(m, a0, da, f0, df)
 *                     sum over k < m of cw(a0 + k da, f0 + k df)
 *   comb(A, f)        A at i = round(c P / w(f)) (half to even) for c = 0 .. w(f) - 1,
 *                     0 elsewhere; A at every sample when w(f) >= P
 *   wgn(s, e)         s x a standard Gaussian of (e mod 2^64, i): the same entropy
 *                     gives the same noise, whatever s, input or dsim
 *   delay(x, d)       x at i - d (mod P)
 *   x + y, x - y, x * y, nodither(x)   sample by sample
 *
 * in units of full scale. Evaluation is exact in its phases (w i mod P in
 * integers) and good to ~1e-12 of the amplitude. */
#ifndef CBF_DSIM_EVAL_H
#define CBF_DSIM_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cbf/error.h>

#include "dsim_lang.h"

typedef struct cbf_dsim_eval cbf_dsim_eval;

/* What one output may expand to, its variables written out: terms, tones
 * (each multicw has m), and partial results held at once (2 for a sum or
 * product written left to right; more only for operations nested in a
 * right operand). */
#define CBF_DSIM_MAX_CODE 65536
#define CBF_DSIM_MAX_TONES (1 << 20)
#define CBF_DSIM_MAX_STACK 16

/* Output `output` of p for period (>= 1) and fs (Hz). CBF_EINVAL when
 * the output expands beyond CBF_DSIM_MAX_CODE. */
int cbf_dsim_eval_create(const cbf_dsim_prog *p, int output, double fs, int64_t period,
                         cbf_dsim_eval **out, cbf_error *err);
void cbf_dsim_eval_free(cbf_dsim_eval *e);

/* False for an output wrapped in nodither(...). */
bool cbf_dsim_eval_dither(const cbf_dsim_eval *e);
int64_t cbf_dsim_eval_period(const cbf_dsim_eval *e);

/* The values of samples [first, first + n) (any first, negative too).
 * Thread-safe: e is only read; uses 64 KiB of the caller's stack. */
void cbf_dsim_eval_run(const cbf_dsim_eval *e, int64_t first, size_t n, double *out);

/* w(f): whole waves per period, as a double (it may be beyond 2^63). */
double cbf_dsim_eval_waves(double f, double fs, int64_t period);

#endif
