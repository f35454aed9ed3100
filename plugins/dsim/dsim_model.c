/* dsim_model.c: see dsim_model.h.
 *
 * Tones: sin/cos of every sample would dominate the cost (2^20 samples x
 * pols x antennas x tones per chunk). Instead each tone keeps a table of
 * exp(2 pi i r j), r = f / fs, for j within a block of CBF_DSIM_HEAP_SAMPLES,
 * and each block starts from a phasor computed exactly at its first sample,
 * so a sample costs two multiplies per tone and errors never accumulate
 * across blocks. Blocks sit at absolute multiples of the block length, so
 * the value of sample t depends on t alone, not on the chunking. */
#include "dsim_model.h"

#include <cbf/error.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsim_eval.h"

#define BLOCK CBF_DSIM_HEAP_SAMPLES

struct cbf_dsim_model {
    cbf_dsim_config cfg;
    double full_scale;
    int32_t lo, hi;
    double *rate;          /* [tone] cycles per sample, f / fs rounded to double */
    double *rate_lo;       /* [tone] what that rounding lost: f / fs = rate + rate_lo */
    double *offset;        /* [antenna][pol][tone] cycles: -r d_a + phi / 2 pi */
    double *table;         /* [tone][BLOCK][2]: amplitude x FS x exp(2 pi i r j) */
    int64_t *shift;        /* [antenna] common-noise and impulse delay in whole samples */
    int n_tones;           /* tones and comb harmonics */
    cbf_dsim_impulse *impulses;
    double *constants;     /* [input] x FS; NULL: none */
    cbf_dsim_eval **lang;  /* [input]: the language output it plays; NULL: none does */
    uint64_t *dither_key;  /* [input], with lang */
};

static int oom(char *msg, size_t msglen)
{
    if (msg && msglen)
        snprintf(msg, msglen, "dsim model: out of memory");
    return -2;
}

/* frac((r + r_lo) x t) to within a few ulps for any t < 2^53: r x t is
 * split exactly into hi + lo with an FMA, and hi's integer part dropped
 * before the small parts are added; r_lo (f / fs beyond double precision)
 * matters once t x 1e-16 is no longer negligible, i.e. after hours. */
static double frac_product2(double r, double r_lo, int64_t t)
{
    const double td = (double)t;
    const double hi = r * td;
    const double lo = fma(r, td, -hi);
    const double small = r_lo * td;
    double f = (hi - floor(hi)) + (lo + (small - floor(small)));
    return f - floor(f);
}

static double frac_product(double r, int64_t t)
{
    return frac_product2(r, 0.0, t);
}

static double frac1(double x)
{
    return x - floor(x);
}

static int bad(char *msg, size_t msglen, const char *what)
{
    if (msg && msglen)
        snprintf(msg, msglen, "dsim model: %s", what);
    return -1;
}

/* A comb's harmonic count: as given, or all up to fs / 2 (0 when the
 * fundamental is not a positive frequency). */
static int comb_harmonics(const cbf_dsim_comb *c, double fs, int64_t period)
{
    const double g = cbf_dsim_grid_frequency(c->frequency, fs, period);
    if (!(g > 0))
        return 0;
    if (c->harmonics > 0)
        return c->harmonics;
    const double n = floor(fs / 2 / g);
    return n > CBF_DSIM_MAX_HARMONICS + 1 ? CBF_DSIM_MAX_HARMONICS + 1 : (int)n;
}

/* The tones and every comb harmonic as one list of tones (a harmonic is a
 * tone at n times the fundamental, on the grid when periodic); NULL with a
 * message when a comb or impulse does not fit. */
static cbf_dsim_tone *expand_tones(const cbf_dsim_config *cfg, int *n, char *msg, size_t msglen)
{
    int total = cfg->n_tones;
    for (int c = 0; c < cfg->n_combs; c++) {
        const int h = comb_harmonics(&cfg->combs[c], cfg->adc_sample_rate, cfg->period);
        if (h <= 0) {
            bad(msg, msglen, "a comb's fundamental must be above 0 Hz (on the replay grid)");
            return NULL;
        }
        total += h;
    }
    if (total - cfg->n_tones > CBF_DSIM_MAX_HARMONICS) {
        if (msg && msglen)
            snprintf(msg, msglen, "dsim model: combs with %d harmonics; at most %d (give "
                     "harmonics, or a higher fundamental)", total - cfg->n_tones,
                     CBF_DSIM_MAX_HARMONICS);
        return NULL;
    }
    for (int i = 0; i < cfg->n_impulses; i++)
        if (cfg->impulses[i].period < 1 ||
            (cfg->period && cfg->period % cfg->impulses[i].period)) {
            bad(msg, msglen, cfg->period ? "an impulse period must divide the replay period"
                                         : "an impulse period must be at least 1 sample");
            return NULL;
        }
    cbf_dsim_tone *t = calloc((size_t)total + 1, sizeof *t);
    if (!t) {
        if (msg && msglen)
            snprintf(msg, msglen, "dsim model: out of memory");
        return NULL;
    }
    for (int k = 0; k < cfg->n_tones; k++)
        t[k] = cfg->tones[k];
    int k = cfg->n_tones;
    for (int c = 0; c < cfg->n_combs; c++) {
        const cbf_dsim_comb *cb = &cfg->combs[c];
        const double g = cbf_dsim_grid_frequency(cb->frequency, cfg->adc_sample_rate, cfg->period);
        const int h = comb_harmonics(cb, cfg->adc_sample_rate, cfg->period);
        for (int j = 1; j <= h; j++)
            t[k++] = (cbf_dsim_tone){.frequency = g * j, .amplitude = cb->amplitude,
                                     .phase = {cb->phase[0], cb->phase[1]}};
    }
    *n = total;
    return t;
}

static uint64_t mix64(uint64_t z);

static uint64_t dither_key(uint64_t seed, int input)
{
    return mix64(seed ^ mix64((uint64_t)(input + 1) * 0x2545f4914f6cdd1dull + 0x5851f42d4c957f2dull));
}

/* The inputs that play a language output: each one's output compiled for
 * the language period, and its dither key. */
static int lang_create(cbf_dsim_model *m, const cbf_dsim_config *cfg, char *msg, size_t msglen)
{
    if (!cfg->lang)
        return 0;
    const int inputs = 2 * cfg->antennas;
    m->lang = calloc((size_t)inputs, sizeof *m->lang);
    m->dither_key = calloc((size_t)inputs, sizeof *m->dither_key);
    if (!m->lang || !m->dither_key)
        return oom(msg, msglen);
    for (int i = 0; i < inputs; i++) {
        const cbf_dsim_lang_input *in = &cfg->lang[i];
        m->dither_key[i] = dither_key(cfg->dither_seed, i);
        if (!in->prog)
            continue;
        cbf_error err;
        cbf_error_clear(&err);
        int rc = cbf_dsim_eval_create(in->prog, in->output, cfg->adc_sample_rate, in->period,
                                      &m->lang[i], &err);
        if (rc) {
            if (msg && msglen)
                snprintf(msg, msglen, "input %d: %s", i, err.msg);
            return rc == CBF_ENOMEM ? -2 : -1;
        }
    }
    return 0;
}

int cbf_dsim_model_create(const cbf_dsim_config *cfg, cbf_dsim_model **out, char *msg,
                          size_t msglen)
{
    if (cfg->antennas < 1 || cfg->bits < 2 || cfg->bits > 16 || !(cfg->adc_sample_rate > 0) ||
        cfg->n_tones < 0 || cfg->period < 0 || (cfg->period & (cfg->period - 1))) {
        if (msg && msglen)
            snprintf(msg, msglen,
                     "dsim model: bad configuration (antennas %d, bits %d, period %lld)",
                     cfg->antennas, cfg->bits, (long long)cfg->period);
        return -1;
    }
    int n_all = 0;
    cbf_dsim_tone *all = expand_tones(cfg, &n_all, msg, msglen);
    if (!all)
        return -1;
    cbf_dsim_model *m = calloc(1, sizeof *m);
    if (!m) {
        free(all);
        return oom(msg, msglen);
    }
    m->cfg = *cfg;
    m->cfg.tones = NULL;
    m->cfg.combs = NULL;
    m->cfg.impulses = NULL;
    m->cfg.constants = NULL;
    m->cfg.delays = NULL;
    m->cfg.lang = NULL;
    m->n_tones = n_all;
    m->lo = -((int32_t)1 << (cfg->bits - 1));
    m->hi = ((int32_t)1 << (cfg->bits - 1)) - 1;
    m->full_scale = (double)m->hi;
    const size_t nt = (size_t)n_all, na = (size_t)cfg->antennas;
    m->rate = calloc(nt + 1, sizeof *m->rate);
    m->rate_lo = calloc(nt + 1, sizeof *m->rate_lo);
    m->offset = calloc(na * 2 * nt + 1, sizeof *m->offset);
    m->table = calloc(nt * BLOCK * 2 + 1, sizeof *m->table);
    m->shift = calloc(na, sizeof *m->shift);
    m->impulses = calloc((size_t)cfg->n_impulses + 1, sizeof *m->impulses);
    m->constants = cfg->constants ? calloc(2 * na, sizeof *m->constants) : NULL;
    if (!m->rate || !m->rate_lo || !m->offset || !m->table || !m->shift || !m->impulses ||
        (cfg->constants && !m->constants)) {
        free(all);
        cbf_dsim_model_free(m);
        return oom(msg, msglen);
    }
    for (int i = 0; i < cfg->n_impulses; i++)
        m->impulses[i] = cfg->impulses[i];
    for (size_t i = 0; m->constants && i < 2 * na; i++)
        m->constants[i] = cfg->constants[i] * m->full_scale;
    for (size_t k = 0; k < nt; k++) {
        const cbf_dsim_tone *tn = &all[k];
        const double f = cbf_dsim_grid_frequency(tn->frequency, cfg->adc_sample_rate, cfg->period);
        /* On a power-of-two grid r = bin / P exactly, so r t is exact and
         * the tone repeats bit for bit every P samples. */
        const double r = cfg->period ? nearbyint(tn->frequency / cfg->adc_sample_rate *
                                                 (double)cfg->period) / (double)cfg->period
                                     : f / cfg->adc_sample_rate;
        const double amp = tn->amplitude * m->full_scale;
        m->rate[k] = r;
        /* f - r fs is exact (FMA), so this is f / fs - r to double precision. */
        m->rate_lo[k] = cfg->period ? 0.0 : fma(-r, cfg->adc_sample_rate, f) / cfg->adc_sample_rate;
        for (size_t j = 0; j < BLOCK; j++) {
            const double ph = 2.0 * M_PI * frac_product(r, (int64_t)j);
            m->table[(k * BLOCK + j) * 2] = amp * cos(ph);
            m->table[(k * BLOCK + j) * 2 + 1] = amp * sin(ph);
        }
        for (size_t a = 0; a < na; a++) {
            const double d = cfg->delays ? cfg->delays[a] : 0.0;
            for (int p = 0; p < 2; p++)
                m->offset[(a * 2 + (size_t)p) * nt + k] =
                    frac1(-r * d + tn->phase[p] / (2.0 * M_PI));
        }
    }
    free(all);
    for (size_t a = 0; a < na; a++)
        m->shift[a] = cfg->delays ? (int64_t)llrint(cfg->delays[a]) : 0;
    int rc = lang_create(m, cfg, msg, msglen);
    if (rc) {
        cbf_dsim_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

double cbf_dsim_grid_frequency(double f, double fs, int64_t period)
{
    if (!period)
        return f;
    return nearbyint(f / fs * (double)period) * fs / (double)period;
}

void cbf_dsim_model_free(cbf_dsim_model *m)
{
    if (!m)
        return;
    free(m->rate);
    free(m->rate_lo);
    free(m->offset);
    free(m->table);
    free(m->shift);
    free(m->impulses);
    free(m->constants);
    for (int i = 0; m->lang && i < 2 * m->cfg.antennas; i++)
        cbf_dsim_eval_free(m->lang[i]);
    free(m->lang);
    free(m->dither_key);
    free(m);
}

static uint64_t mix64(uint64_t z)
{
    /* splitmix64's finaliser: a bijection with full avalanche. */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, int stream, int pol)
{
    const uint64_t id = ((uint64_t)(int64_t)(stream + 1) << 1) | (uint64_t)pol;
    return mix64(seed ^ mix64(id + 0x632be59bd9b4e019ull));
}

/* Two independent standard Gaussians for pair q of a stream, by
 * Marsaglia's polar method: no sin/cos, and the rejection loop stays
 * counter-based because attempt j of pair q hashes (q, j). Samples 2q and
 * 2q + 1 share one draw. */
static void gauss_pair(uint64_t key, int64_t q, double *g0, double *g1)
{
    const uint64_t c = key + (uint64_t)q * 0x3c6ef372fe94f82aull;
    for (uint64_t j = 0;; j++) {
        const uint64_t h1 = mix64(c + 0x9e3779b97f4a7c15ull + j * 0xd1b54a32d192ed03ull);
        const uint64_t h2 = mix64(c + 0x7f4a7c159e3779b9ull + j * 0xd1b54a32d192ed03ull);
        /* Uniform in (-1, 1) from 53 bits each. */
        const double u = ((double)(h1 >> 11) + 0.5) * 0x1p-52 - 1.0;
        const double v = ((double)(h2 >> 11) + 0.5) * 0x1p-52 - 1.0;
        const double s = u * u + v * v;
        if (s < 1.0 && s > 0.0) {
            const double r = sqrt(-2.0 * log(s) / s);
            *g0 = u * r;
            *g1 = v * r;
            return;
        }
    }
}

static int64_t floor_half(int64_t t)
{
    return (t - (t & 1)) / 2;
}

double cbf_dsim_gauss(uint64_t seed, int stream, int pol, int64_t t)
{
    double g[2];
    gauss_pair(stream_key(seed, stream, pol), floor_half(t), &g[0], &g[1]);
    return g[t & 1];
}

uint64_t cbf_dsim_noise_key(uint64_t entropy)
{
    /* Its own domain: no (seed, stream, pol) key of the YAML noise is one. */
    return mix64(mix64(entropy) ^ 0x6a09e667f3bcc909ull);
}

static double dither_at(uint64_t key, int64_t i)
{
    /* 24 bits, as numpy's float32 uniforms: [-0.5, 0.5) on a 2^-24 grid. */
    return (double)(mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ull) >> 40) * 0x1p-24 - 0.5;
}

static int64_t wrap(int64_t t, int64_t period)
{
    const int64_t r = t % period;
    return r < 0 ? r + period : r;
}

double cbf_dsim_dither(uint64_t seed, int input, int64_t t, int64_t period)
{
    return dither_at(dither_key(seed, input), wrap(t, period));
}

/* Adds scale x Gaussian(stream, pol, t) for t in [first, first + n). */
static void add_noise(double *v, uint64_t key, int64_t first, size_t n, double scale)
{
    size_t i = 0;
    double g[2];
    if (first & 1) {
        gauss_pair(key, floor_half(first), &g[0], &g[1]);
        v[i++] += scale * g[1];
    }
    for (; i + 1 < n; i += 2) {
        gauss_pair(key, floor_half(first + (int64_t)i), &g[0], &g[1]);
        v[i] += scale * g[0];
        v[i + 1] += scale * g[1];
    }
    if (i < n) {
        gauss_pair(key, floor_half(first + (int64_t)i), &g[0], &g[1]);
        v[i] += scale * g[0];
    }
}

/* add_noise over a signal of that period (0: none): indices wrap, and a
 * range that crosses the wrap is cut there. */
static void add_noise_wrapped(double *v, uint64_t key, int64_t first, size_t n, double scale,
                              int64_t period)
{
    if (!period) {
        add_noise(v, key, first, n, scale);
        return;
    }
    int64_t t = ((first % period) + period) % period;
    for (size_t i = 0; i < n;) {
        const size_t len = (size_t)(period - t) < n - i ? (size_t)(period - t) : n - i;
        add_noise(v + i, key, t, len, scale);
        i += len;
        t = 0;
    }
}

void cbf_dsim_noise_add(double *v, uint64_t key, int64_t first, size_t n, double scale,
                        int64_t period)
{
    add_noise_wrapped(v, key, first, n, scale, period);
}

/* A language input: its values, dithered unless nodither, clipped to
 * [-FS, FS] and rounded as katgpucbf's quantiser; saturated means at
 * either extreme. */
static uint64_t lang_generate(const cbf_dsim_model *m, int input, int64_t first, size_t n,
                              int16_t *out)
{
    const cbf_dsim_eval *e = m->lang[input];
    const bool dither = cbf_dsim_eval_dither(e);
    const int64_t P = cbf_dsim_eval_period(e);
    const uint64_t key = m->dither_key[input];
    const double fs = m->full_scale;
    double v[BLOCK];
    uint64_t saturated = 0;
    for (size_t done = 0; done < n;) {
        const size_t len = n - done < BLOCK ? n - done : BLOCK;
        const int64_t t = first + (int64_t)done;
        cbf_dsim_eval_run(e, t, len, v);
        int64_t i = wrap(t, P);
        for (size_t j = 0; j < len; j++) {
            double x = v[j] * fs + (dither ? dither_at(key, i) : 0.0);
            x = x < fs ? (x > -fs ? x : -fs) : fs;   /* NaN (inf - inf) clips high */
            const double r = rint(x);
            saturated += fabs(r) >= fs;
            out[done + j] = (int16_t)r;
            if (++i == P)
                i = 0;
        }
        done += len;
    }
    return saturated;
}

/* Adds the pulses of one train that fall in [first, first + n) of the
 * delayed index. */
static void add_impulses(double *v, const cbf_dsim_impulse *im, int64_t first, size_t n,
                         double full_scale)
{
    const int64_t L = im->period;
    const int64_t r = ((first - im->offset) % L + L) % L;
    for (int64_t i = r ? L - r : 0; i < (int64_t)n; i += L)
        v[i] += im->amplitude * full_scale;
}

uint64_t cbf_dsim_model_generate(const cbf_dsim_model *m, int antenna, int pol, int64_t first,
                                 size_t n, int16_t *out)
{
    if (m->lang && m->lang[2 * antenna + pol])
        return lang_generate(m, 2 * antenna + pol, first, n, out);
    const cbf_dsim_config *c = &m->cfg;
    const size_t nt = (size_t)m->n_tones;
    const double *off = &m->offset[((size_t)antenna * 2 + (size_t)pol) * nt];
    const double fs = m->full_scale;
    const uint64_t nkey = stream_key(c->seed, antenna, pol);
    const uint64_t ckey = stream_key(c->seed, -1, pol);
    double v[BLOCK];
    uint64_t saturated = 0;
    size_t done = 0;
    while (done < n) {
        const int64_t t = first + (int64_t)done;
        /* The block holding t, anchored at an absolute multiple of BLOCK. */
        const int64_t anchor = t - (((t % BLOCK) + BLOCK) % BLOCK);
        const size_t j0 = (size_t)(t - anchor);
        const size_t len = (BLOCK - j0 < n - done) ? BLOCK - j0 : n - done;
        for (size_t i = 0; i < len; i++)
            v[i] = 0.0;
        for (size_t k = 0; k < nt; k++) {
            const double ph = 2.0 * M_PI * frac1(frac_product2(m->rate[k], m->rate_lo[k], anchor) + off[k]);
            const double zr = cos(ph), zi = sin(ph);
            const double *w = &m->table[(k * BLOCK + j0) * 2];
            for (size_t i = 0; i < len; i++)
                v[i] += zr * w[2 * i] - zi * w[2 * i + 1];
        }
        if (c->noise > 0.0)
            add_noise_wrapped(v, nkey, t, len, c->noise * fs, c->period);
        if (c->common_noise > 0.0)
            add_noise_wrapped(v, ckey, t - m->shift[antenna], len, c->common_noise * fs,
                              c->period);
        if (m->constants) {
            const double k = m->constants[2 * antenna + pol];
            for (size_t i = 0; i < len; i++)
                v[i] += k;
        }
        for (int q = 0; q < c->n_impulses; q++)
            add_impulses(v, &m->impulses[q], t - m->shift[antenna], len, fs);
        for (size_t i = 0; i < len; i++) {
            /* rint rounds half to even in the default rounding mode. */
            double r = rint(v[i]);
            if (r > m->hi) {
                r = m->hi;
                saturated++;
            } else if (r < m->lo) {
                r = m->lo;
                saturated++;
            }
            out[done + i] = (int16_t)r;
        }
        done += len;
    }
    return saturated;
}
