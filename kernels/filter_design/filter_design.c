/* filter_design.c: the Remez exchange for symmetric FIR filters, written
 * from the algorithm (Parks and McClellan 1972; the barycentric form of the
 * Lagrange interpolation as in Rabiner, McClellan and Parks 1975).
 *
 * Symmetric taps have A(f) = Q(f) P(x), x = cos(2 pi f), P a polynomial of
 * degree L - 1 (L basis functions), Q = 1 for odd taps and cos(pi f) for
 * even taps. Fitting P to D / Q with weight W Q turns both cases into one
 * polynomial minimax problem; its solution alternates at L + 1 points. */
#include "filter_design.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITER 250

typedef struct grid {
    size_t n;
    double *f, *x, *d, *w; /* frequency, cos(2 pi f), desired and weight for P */
    int *band;             /* band index of each point: extrema never span a gap */
} grid;

static void grid_free(grid *g)
{
    free(g->f);
    free(g->x);
    free(g->d);
    free(g->w);
    free(g->band);
}

static double q_factor(int taps, double f)
{
    return taps % 2 ? 1.0 : cos(M_PI * f);
}

/* Points 0.5 / (density L) apart within each band.
 * Even taps cannot fit anything at 0.5 (Q = 0 there), so a band touching it
 * stops one step short, as the classic program does. */
static int grid_build(int taps, int L, const cbf_fd_band *b, int nb, int density, grid *g)
{
    const double step = 0.5 / ((double)density * L);
    size_t cap = 0;
    for (int i = 0; i < nb; i++)
        cap += (size_t)((b[i].hi - b[i].lo) / step) + 2;
    memset(g, 0, sizeof(*g));
    g->f = malloc(cap * sizeof(double));
    g->x = malloc(cap * sizeof(double));
    g->d = malloc(cap * sizeof(double));
    g->w = malloc(cap * sizeof(double));
    g->band = malloc(cap * sizeof(int));
    if (!g->f || !g->x || !g->d || !g->w || !g->band)
        return CBF_KERN_ENOMEM;
    for (int i = 0; i < nb; i++) {
        double lo = b[i].lo, hi = b[i].hi;
        if (taps % 2 == 0 && hi > 0.5 - step)
            hi = 0.5 - step;
        if (hi < lo)
            continue;
        /* lo, lo + step, ... up to hi, the last of them moved onto hi: the
         * worst error sits on the edges (McClellan's grid, so designs match
         * the published ones). */
        size_t pts = (size_t)((hi - lo) / step);
        for (size_t k = 0; k <= pts; k++) {
            double f = k == pts ? hi : lo + (double)k * step;
            double q = q_factor(taps, f);
            g->f[g->n] = f;
            g->x[g->n] = cos(2.0 * M_PI * f);
            g->d[g->n] = b[i].desired / q;
            g->w[g->n] = b[i].weight * q;
            g->band[g->n] = i;
            g->n++;
        }
    }
    return 0;
}

/* Barycentric weights 1 / prod_{j != k} (x_k - x_j) over n nodes. The
 * products over- or underflow for long filters, but both uses below are
 * ratios, so the weights are kept as logarithms and scaled by the largest. */
static void bary_weights(const double *x, int n, double *a)
{
    double top = -INFINITY;
    for (int k = 0; k < n; k++) {
        double lg = 0.0, sign = 1.0;
        for (int j = 0; j < n; j++) {
            if (j == k)
                continue;
            double d = x[k] - x[j];
            lg -= log(fabs(d));
            if (d < 0)
                sign = -sign;
        }
        a[k] = sign;
        a[n + k] = lg; /* scratch: the log magnitudes */
        if (lg > top)
            top = lg;
    }
    for (int k = 0; k < n; k++)
        a[k] *= exp(a[n + k] - top);
}

/* P(x) through (xs[k], c[k]), k < n, with barycentric weights a. */
static double bary_eval(const double *xs, const double *c, const double *a, int n, double x)
{
    double num = 0.0, den = 0.0;
    for (int k = 0; k < n; k++) {
        double d = x - xs[k];
        if (d == 0.0)
            return c[k];
        double t = a[k] / d;
        num += t * c[k];
        den += t;
    }
    return num / den;
}

typedef struct state {
    int L;
    int *ext;          /* L + 1 grid indices */
    double *xs, *c, *a; /* nodes, values, weights (2 (L + 1) scratch) */
    double delta;
} state;

/* delta and the interpolant through the first L extremals for the current
 * set: the error W (D - P) is +-delta, alternating, at every extremal. */
static void solve(const grid *g, state *s)
{
    const int r = s->L + 1;
    for (int k = 0; k < r; k++)
        s->xs[k] = g->x[s->ext[k]];
    bary_weights(s->xs, r, s->a);
    double num = 0.0, den = 0.0;
    for (int k = 0; k < r; k++) {
        num += s->a[k] * g->d[s->ext[k]];
        den += s->a[k] * (k % 2 ? -1.0 : 1.0) / g->w[s->ext[k]];
    }
    s->delta = num / den;
    for (int k = 0; k < s->L; k++)
        s->c[k] = g->d[s->ext[k]] - (k % 2 ? -1.0 : 1.0) * s->delta / g->w[s->ext[k]];
    bary_weights(s->xs, s->L, s->a);
}

static double err_at(const grid *g, const state *s, size_t i)
{
    return g->w[i] * (g->d[i] - bary_eval(s->xs, s->c, s->a, s->L, g->x[i]));
}

/* The next extremal set: local extrema of E inside each band with |E| at
 * least |delta|, reduced to an alternating sequence (keeping the larger of
 * two same-signed neighbours), then trimmed at the ends to L + 1, dropping
 * the end with the smaller error. Returns the count before trimming. */
static int exchange(const grid *g, const double *e, double floor_, int *cand, int L)
{
    int n = 0;
    for (size_t i = 0; i < g->n; i++) {
        int first = i == 0 || g->band[i - 1] != g->band[i];
        int last = i + 1 == g->n || g->band[i + 1] != g->band[i];
        double v = e[i];
        if (fabs(v) < floor_)
            continue;
        int peak = v > 0 ? (first || v >= e[i - 1]) && (last || v > e[i + 1])
                         : (first || v <= e[i - 1]) && (last || v < e[i + 1]);
        if (!peak)
            continue;
        if (n && (e[cand[n - 1]] > 0) == (v > 0)) {
            if (fabs(v) > fabs(e[cand[n - 1]]))
                cand[n - 1] = (int)i;
            continue;
        }
        cand[n++] = (int)i;
    }
    int found = n, lo = 0;
    while (n > L + 1) {
        if (fabs(e[cand[lo]]) < fabs(e[cand[lo + n - 1]]))
            lo++;
        n--;
    }
    if (lo)
        memmove(cand, cand + lo, (size_t)n * sizeof(int));
    return found;
}

/* Taps from the amplitude sampled at f = k / taps (frequency sampling):
 * h[n] = (1 / taps) sum_k A(k / taps) cos(2 pi k (n - (taps - 1) / 2) / taps),
 * the inverse DFT of A(f) exp(-i pi f (taps - 1)), which is real. */
static void taps_from(const grid *g, const state *s, int taps, double *h)
{
    (void)g;
    double *A = malloc((size_t)taps * sizeof(double));
    for (int k = 0; k < taps; k++) {
        double f = (double)k / taps;
        A[k] = q_factor(taps, f) * bary_eval(s->xs, s->c, s->a, s->L, cos(2.0 * M_PI * f));
    }
    const double mid = 0.5 * (taps - 1);
    for (int n = 0; n < (taps + 1) / 2; n++) {
        double acc = 0.0;
        for (int k = 0; k < taps; k++)
            acc += A[k] * cos(2.0 * M_PI * fmod((double)k * (n - mid), taps) / taps);
        h[n] = h[taps - 1 - n] = acc / taps;
    }
    free(A);
}

static int check_bands(int taps, const cbf_fd_band *b, int nb, char *msg, size_t msglen)
{
    if (taps < 3 || taps > CBF_FD_MAX_TAPS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "remez: taps %d: must be in [3, %d]",
                             taps, CBF_FD_MAX_TAPS);
    if (nb < 1 || !b)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "remez: no bands");
    for (int i = 0; i < nb; i++) {
        if (!(b[i].lo >= 0.0) || !(b[i].hi <= 0.5) || !(b[i].lo <= b[i].hi) ||
            (i && !(b[i].lo > b[i - 1].hi)))
            return cbf_kern_fail(
                msg, msglen, CBF_KERN_EINVAL,
                "remez: band %d [%g, %g]: edges must lie in [0, 0.5], increasing and "
                "disjoint",
                i, b[i].lo, b[i].hi);
        if (!(b[i].weight > 0.0) || !isfinite(b[i].weight) || !isfinite(b[i].desired))
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                                 "remez: band %d: weight %g must be positive", i, b[i].weight);
    }
    return 0;
}

int cbf_fd_remez(int taps, const cbf_fd_band *bands, int n_bands, int density, double *h,
                 cbf_fd_info *info, char *msg, size_t msglen)
{
    int rc = check_bands(taps, bands, n_bands, msg, msglen);
    if (rc)
        return rc;
    if (density <= 0)
        density = CBF_FD_DEFAULT_DENSITY;
    const int L = (taps + 1) / 2;
    grid g;
    state s = {.L = L};
    double *e = NULL;
    int *cand = NULL;
    rc = grid_build(taps, L, bands, n_bands, density, &g);
    if (!rc && g.n < (size_t)L + 1)
        rc = cbf_kern_fail(
            msg, msglen, CBF_KERN_EINVAL,
            "remez: the bands hold %zu grid points, fewer than the %d a %d-tap design "
            "needs: widen the bands or raise the density",
            g.n, L + 1, taps);
    if (!rc) {
        s.ext = malloc((size_t)(L + 1) * sizeof(int));
        s.xs = malloc((size_t)(L + 1) * sizeof(double));
        s.c = malloc((size_t)(L + 1) * sizeof(double));
        s.a = malloc(2 * (size_t)(L + 1) * sizeof(double));
        e = malloc(g.n * sizeof(double));
        cand = malloc(g.n * sizeof(int));
        if (!s.ext || !s.xs || !s.c || !s.a || !e || !cand)
            rc = cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                               "remez: out of memory (%zu grid points)", g.n);
    }
    int it = 0, done = 0;
    if (!rc) {
        for (int k = 0; k <= L; k++)
            s.ext[k] = (int)((double)k * (double)(g.n - 1) / L + 0.5);
        for (; it < MAX_ITER && !done; it++) {
            solve(&g, &s);
            double emax = 0.0;
            for (size_t i = 0; i < g.n; i++) {
                e[i] = err_at(&g, &s, i);
                if (fabs(e[i]) > emax)
                    emax = fabs(e[i]);
            }
            /* Rounding in P is relative to its own size, not to delta, which
             * can be 1e-8 of it: at the sharpest designs an extremum can
             * read a hair under |delta|. Lower floors then let it in. */
            int found = 0;
            for (int f = 0; f < 3 && found < L + 1; f++)
                found = exchange(&g, e, fabs(s.delta) * (f == 0 ? 1.0 - 1e-6 : f == 1 ? 0.9 : 0.5),
                                 cand, L);
            if (found < L + 1) {
                rc = cbf_kern_fail(
                    msg, msglen, CBF_KERN_EINVAL,
                    "remez: only %d alternation points at iteration %d (need %d): the "
                    "design is degenerate (check bands and taps)",
                    found, it, L + 1);
                break;
            }
            done = !memcmp(cand, s.ext, (size_t)(L + 1) * sizeof(int)) ||
                   emax - fabs(s.delta) <= 1e-12 * emax;
            memcpy(s.ext, cand, (size_t)(L + 1) * sizeof(int));
        }
        if (!rc && !done)
            rc = cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                               "remez: no convergence in %d iterations (%d taps): try fewer "
                               "taps or gentler weights", MAX_ITER, taps);
    }
    if (!rc) {
        solve(&g, &s);
        taps_from(&g, &s, taps, h);
        if (info)
            *info = (cbf_fd_info){fabs(s.delta), it, L + 1};
    }
    grid_free(&g);
    free(s.ext);
    free(s.xs);
    free(s.c);
    free(s.a);
    free(e);
    free(cand);
    return rc;
}

double cbf_fd_amplitude(const double *h, int taps, double f)
{
    const double mid = 0.5 * (taps - 1);
    double acc = taps % 2 ? h[taps / 2] : 0.0;
    for (int n = 0; n < taps / 2; n++)
        acc += 2.0 * h[n] * cos(2.0 * M_PI * f * (mid - n));
    return acc;
}

int cbf_fd_ddc_bands(int subsampling, double pass_weight, cbf_fd_band *bands, int max_bands)
{
    if (subsampling < 2 || !(pass_weight > 0.0) || !isfinite(pass_weight))
        return CBF_KERN_EINVAL;
    const double S = subsampling, half = 0.25 / S;
    int n = 0;
    if (n >= max_bands)
        return CBF_KERN_EINVAL;
    bands[n++] = (cbf_fd_band){0.0, half, 1.0, pass_weight};
    for (int k = 1; k / S - half < 0.5; k++) {
        if (n >= max_bands)
            return CBF_KERN_EINVAL;
        double hi = k / S + half;
        bands[n++] = (cbf_fd_band){k / S - half, hi > 0.5 ? 0.5 : hi, 0.0, 1.0};
    }
    return n;
}

int cbf_fd_ddc_report(const double *h, int taps, int subsampling, cbf_fd_report *rep,
                      char *msg, size_t msglen)
{
    cbf_fd_band *b = malloc(((size_t)subsampling / 2 + 2) * sizeof(cbf_fd_band));
    if (!b)
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM, "ddc filter report: out of memory");
    int nb = cbf_fd_ddc_bands(subsampling, 1.0, b, subsampling / 2 + 2);
    if (nb < 0 || taps < 1) {
        free(b);
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "ddc filter report: subsampling %d, taps %d", subsampling, taps);
    }
    const double step = 0.5 / (16.0 * taps);
    rep->pass_min = INFINITY;
    rep->pass_max = -INFINITY;
    rep->stop_max = 0.0;
    for (int i = 0; i < nb; i++) {
        size_t pts = (size_t)ceil((b[i].hi - b[i].lo) / step);
        for (size_t k = 0; k <= pts; k++) {
            double f = k == pts ? b[i].hi : b[i].lo + (double)k * step;
            double a = cbf_fd_amplitude(h, taps, f);
            if (i == 0) {
                rep->pass_min = fmin(rep->pass_min, a);
                rep->pass_max = fmax(rep->pass_max, a);
            } else {
                rep->stop_max = fmax(rep->stop_max, fabs(a));
            }
        }
    }
    free(b);
    rep->ripple_db = 20.0 * log10(rep->pass_max / rep->pass_min);
    rep->alias_db = -20.0 * log10(rep->stop_max / rep->pass_min);
    return 0;
}

int cbf_fd_ddc_design(int taps, int subsampling, double pass_weight, double *h,
                      cbf_fd_info *info, cbf_fd_report *rep, char *msg, size_t msglen)
{
    if (subsampling < 2 || subsampling > CBF_FD_MAX_TAPS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "ddc filter: subsampling %d: must be >= 2", subsampling);
    if (!(pass_weight > 0.0) || !isfinite(pass_weight))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "ddc filter: pass_weight %g: must be positive", pass_weight);
    const int max_bands = subsampling / 2 + 2;
    cbf_fd_band *b = malloc((size_t)max_bands * sizeof(cbf_fd_band));
    if (!b)
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM, "ddc filter: out of memory");
    int nb = cbf_fd_ddc_bands(subsampling, pass_weight, b, max_bands);
    int rc = nb < 0 ? cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "ddc filter: bad bands")
                    : cbf_fd_remez(taps, b, nb, 32, h, info, msg, msglen);
    free(b);
    if (!rc && rep)
        rc = cbf_fd_ddc_report(h, taps, subsampling, rep, msg, msglen);
    return rc;
}
