/* dsim_signal.c: see dsim_signal.h. */
#include "dsim_signal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields of each record, in the order a request's flat list gives them. */
#define TONE_FIELDS 4      /* frequency, amplitude, phase_x, phase_y */
#define COMB_FIELDS 5      /* frequency, amplitude, harmonics, phase_x, phase_y */
#define IMPULSE_FIELDS 3   /* period, amplitude, offset */

/* The arguments and parameters of cbf's own form. */
static const char *const cbf_form[] = {"tones", "combs", "impulses", "constants", "noise",
                                       "common_noise"};

static void lang_free(cbf_dsim_spec *s)
{
    for (int i = 0; s->lang && i < s->inputs; i++)
        cbf_dsim_prog_unref(s->lang[i].prog);
    free(s->lang);
    free(s->lang_text);
    s->lang = NULL;
    s->lang_text = NULL;
}

void cbf_dsim_spec_free(cbf_dsim_spec *s)
{
    free(s->tones);
    free(s->combs);
    free(s->impulses);
    free(s->constants);
    lang_free(s);
    memset(s, 0, sizeof *s);
}

static int spec_alloc(cbf_dsim_spec *s, int inputs, bool constants, cbf_error *err)
{
    s->tones = calloc((size_t)s->n_tones + 1, sizeof *s->tones);
    s->combs = calloc((size_t)s->n_combs + 1, sizeof *s->combs);
    s->impulses = calloc((size_t)s->n_impulses + 1, sizeof *s->impulses);
    s->constants = constants ? calloc((size_t)inputs, sizeof *s->constants) : NULL;
    if (!s->tones || !s->combs || !s->impulses || (constants && !s->constants)) {
        cbf_dsim_spec_free(s);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    return 0;
}

/* Whether some input plays cbf's form. */
static bool uses_cbf_form(const cbf_dsim_spec *s)
{
    for (int i = 0; s->lang && i < s->inputs; i++)
        if (!s->lang[i].prog)
            return true;
    return !s->lang;
}

/* One value for every input, or one per input; [] none. */
static void spec_constants(cbf_dsim_spec *s, const cbf_params *p, int inputs)
{
    const size_t n = cbf_params_len(p, "constants");
    for (int i = 0; n && i < inputs; i++)
        s->constants[i] = cbf_params_float_at(p, "constants", n == 1 ? 0 : (size_t)i);
}

/* where: the YAML place, or the request's name. */
static int check_constants(const cbf_params *p, const char *where, int inputs, cbf_error *err)
{
    const size_t n = cbf_params_len(p, "constants");
    if (n > 1 && n != (size_t)inputs)
        return cbf_error_set(err, CBF_EINVAL, "%s: constants has %zu values: give 1 (every "
                             "input) or %d (one per input, 2 x antenna + pol)",
                             where, n, inputs);
    return 0;
}

/* ---- katgpucbf's language ---- */

/* Input i plays output o of prog (taking one more reference to it). */
static void lang_set(cbf_dsim_spec *s, int i, cbf_dsim_prog *prog, int o, int64_t period)
{
    cbf_dsim_prog_ref(prog);
    cbf_dsim_prog_unref(s->lang[i].prog);
    s->lang[i] = (cbf_dsim_lang_input){prog, o, period};
}

/* The language part of s from text: antenna's two inputs (antenna >= 0;
 * the others as in base), or every input: one output per input, or two
 * (one_ok: or one) per antenna, each antenna from its own parse so that
 * a wgn without entropy differs between antennas. */
static int lang_assign(cbf_dsim_spec *s, const char *text, int antenna, int64_t period,
                       const cbf_dsim_spec *base, bool one_ok, const cbf_dsim_lang_ctx *lc,
                       cbf_error *err)
{
    const int inputs = s->inputs, antennas = inputs / 2;
    if (!(s->lang = calloc((size_t)inputs, sizeof *s->lang)) || !(s->lang_text = strdup(text)))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (int i = 0; antenna >= 0 && base->lang && i < inputs; i++)
        if (base->lang[i].prog)
            lang_set(s, i, base->lang[i].prog, base->lang[i].output, base->lang[i].period);
    cbf_dsim_prog *prog;
    int rc = cbf_dsim_prog_parse(text, lc->entropy, lc->entropy_ctx, &prog, err);
    if (rc)
        return rc;
    const int n = prog->n_outputs;
    if (antenna >= 0 && n == 2) {
        for (int p = 0; p < 2; p++)
            lang_set(s, 2 * antenna + p, prog, p, period);
    } else if (antenna < 0 && n == inputs && inputs > 2) {
        for (int i = 0; i < inputs; i++)
            lang_set(s, i, prog, i, period);
    } else if (antenna < 0 && (n == 2 || (n == 1 && one_ok))) {
        for (int a = 0; a < antennas && !rc; a++) {
            cbf_dsim_prog *pa = prog;
            if (a > 0 && (rc = cbf_dsim_prog_parse(text, lc->entropy, lc->entropy_ctx, &pa, err)))
                break;
            for (int p = 0; p < 2; p++)
                lang_set(s, 2 * a + p, pa, n == 1 ? 0 : p, period);
            if (a > 0)
                cbf_dsim_prog_unref(pa);
        }
    } else {
        char also[64] = "";
        if (antenna < 0 && inputs > 2)
            snprintf(also, sizeof also, " (or %d, one per input)", inputs);
        rc = cbf_error_set(err, CBF_EINVAL, "expected %s2 signals%s, received %d",
                           one_ok ? "1 or " : "", also, n);
    }
    cbf_dsim_prog_unref(prog);
    return rc;
}

int cbf_dsim_spec_from_params(const cbf_params *p, int inputs, int64_t period,
                              const cbf_dsim_lang_ctx *lc, cbf_dsim_spec *out, cbf_error *err)
{
    const char *text = cbf_params_string(p, "signals");
    if (text[0]) {
        for (size_t k = 0; k < sizeof cbf_form / sizeof cbf_form[0]; k++)
            if (cbf_params_given(p, cbf_form[k]))
                return cbf_error_set(err, CBF_ECONFIG, "%s: %s: give signals (katgpucbf's "
                                     "language) or cbf's form (tones, combs, impulses, constants, "
                                     "noise, common_noise), not both",
                                     cbf_params_where(p, cbf_form[k]), cbf_form[k]);
        cbf_dsim_spec s = {.inputs = inputs, .period = lc->replay ? period : 0};
        int rc = spec_alloc(&s, inputs, false, err);
        if (!rc && (rc = lang_assign(&s, text, -1, period, NULL, true, lc, err))) {
            cbf_dsim_spec_free(&s);
            cbf_error_prefix(err, "%s: signals", cbf_params_where(p, "signals"));
        }
        if (rc)
            return rc == CBF_EINVAL ? CBF_ECONFIG : rc;
        *out = s;
        return 0;
    }
    cbf_dsim_spec s = {
        .n_tones = (int)cbf_params_len(p, "tones"),
        .n_combs = (int)cbf_params_len(p, "combs"),
        .n_impulses = (int)cbf_params_len(p, "impulses"),
        .noise = cbf_params_float(p, "noise"),
        .common_noise = cbf_params_float(p, "common_noise"),
        .period = lc->replay ? period : 0,
        .inputs = inputs,
    };
    int rc = check_constants(p, cbf_params_where(p, "constants"), inputs, err);
    if (rc || (rc = spec_alloc(&s, inputs, cbf_params_len(p, "constants") > 0, err)))
        return rc == CBF_EINVAL ? CBF_ECONFIG : rc;
    for (int k = 0; k < s.n_tones; k++)
        s.tones[k] = (cbf_dsim_tone){
            .frequency = cbf_params_field(p, "tones", (size_t)k, "frequency"),
            .amplitude = cbf_params_field(p, "tones", (size_t)k, "amplitude"),
            .phase = {cbf_params_field(p, "tones", (size_t)k, "phase_x"),
                      cbf_params_field(p, "tones", (size_t)k, "phase_y")}};
    for (int k = 0; k < s.n_combs; k++)
        s.combs[k] = (cbf_dsim_comb){
            .frequency = cbf_params_field(p, "combs", (size_t)k, "frequency"),
            .amplitude = cbf_params_field(p, "combs", (size_t)k, "amplitude"),
            .harmonics = (int)cbf_params_field(p, "combs", (size_t)k, "harmonics"),
            .phase = {cbf_params_field(p, "combs", (size_t)k, "phase_x"),
                      cbf_params_field(p, "combs", (size_t)k, "phase_y")}};
    for (int k = 0; k < s.n_impulses; k++)
        s.impulses[k] = (cbf_dsim_impulse){
            .period = (int64_t)cbf_params_field(p, "impulses", (size_t)k, "period"),
            .amplitude = cbf_params_field(p, "impulses", (size_t)k, "amplitude"),
            .offset = (int64_t)cbf_params_field(p, "impulses", (size_t)k, "offset")};
    spec_constants(&s, p, inputs);
    *out = s;
    return 0;
}

/* A copy of base's cbf form (the language left out). */
static int copy_cbf_form(const cbf_dsim_spec *base, int inputs, cbf_dsim_spec *s, cbf_error *err)
{
    *s = (cbf_dsim_spec){.n_tones = base->n_tones, .n_combs = base->n_combs,
                         .n_impulses = base->n_impulses, .noise = base->noise,
                         .common_noise = base->common_noise, .period = base->period,
                         .inputs = inputs};
    int rc = spec_alloc(s, inputs, base->constants != NULL, err);
    if (rc)
        return rc;
    if (s->n_tones)
        memcpy(s->tones, base->tones, (size_t)s->n_tones * sizeof *s->tones);
    if (s->n_combs)
        memcpy(s->combs, base->combs, (size_t)s->n_combs * sizeof *s->combs);
    if (s->n_impulses)
        memcpy(s->impulses, base->impulses, (size_t)s->n_impulses * sizeof *s->impulses);
    if (base->constants)
        memcpy(s->constants, base->constants, (size_t)inputs * sizeof *s->constants);
    return 0;
}

static int lang_request(const cbf_params *a, const cbf_dsim_spec *base, int inputs,
                        const cbf_dsim_lang_ctx *lc, cbf_dsim_spec *out, cbf_error *err)
{
    for (size_t k = 0; k < sizeof cbf_form / sizeof cbf_form[0]; k++)
        if (cbf_params_given(a, cbf_form[k]))
            return cbf_error_set(err, CBF_EINVAL, "signals: give signals (katgpucbf's language) "
                                 "or %s (cbf's form), not both", cbf_form[k]);
    const int64_t antenna = cbf_params_int(a, "antenna");
    if (antenna >= inputs / 2)
        return cbf_error_set(err, CBF_EINVAL, "signals: antenna %lld of %d", (long long)antenna,
                             inputs / 2);
    const int64_t period = cbf_params_given(a, "period") ? cbf_params_int(a, "period")
                                                         : lc->max_period;
    if (period < 1 || lc->max_period % period)
        return cbf_error_set(err, CBF_EINVAL, "signals: period %lld does not divide max-period "
                             "%lld", (long long)period, (long long)lc->max_period);
    /* One antenna changed: the others keep what they play, cbf's form too. */
    cbf_dsim_spec s;
    cbf_dsim_spec empty = {.period = base->period};
    int rc = copy_cbf_form(antenna >= 0 && uses_cbf_form(base) ? base : &empty, inputs, &s, err);
    if (rc)
        return rc;
    if ((rc = lang_assign(&s, cbf_params_string(a, "signals"), (int)antenna, period, base, false,
                          lc, err))) {
        cbf_dsim_spec_free(&s);
        return cbf_error_prefix(err, "signals");
    }
    *out = s;
    return 0;
}

/* A flat list of records of `fields` numbers each: how many records, or
 * -1 (with the message) when the length is not whole records. */
static int flat_count(const cbf_params *a, const char *name, int fields, const char *what,
                      cbf_error *err)
{
    const size_t n = cbf_params_len(a, name);
    if (n % (size_t)fields) {
        cbf_error_set(err, CBF_EINVAL, "signals: %s has %zu values, not whole groups of %d (%s)",
                      name, n, fields, what);
        return -1;
    }
    return (int)(n / (size_t)fields);
}

static double at(const cbf_params *a, const char *name, int k, int fields, int f)
{
    return cbf_params_float_at(a, name, (size_t)k * (size_t)fields + (size_t)f);
}

int cbf_dsim_spec_from_request(const cbf_params *a, const cbf_dsim_spec *base, int inputs,
                               const cbf_dsim_lang_ctx *lc, cbf_dsim_spec *out, cbf_error *err)
{
    if (cbf_params_given(a, "signals"))
        return lang_request(a, base, inputs, lc, out, err);
    if (cbf_params_given(a, "antenna"))
        return cbf_error_set(err, CBF_EINVAL, "signals: antenna picks the antenna of a signal in "
                             "katgpucbf's language (the signals argument); cbf's form is every "
                             "antenna's");
    const bool gt = cbf_params_given(a, "tones"), gc = cbf_params_given(a, "combs"),
               gi = cbf_params_given(a, "impulses"), gk = cbf_params_given(a, "constants");
    /* The cbf form in force (empty when every input played the language),
     * on every input from now on. */
    cbf_dsim_spec s = {.n_tones = base->n_tones, .n_combs = base->n_combs,
                       .n_impulses = base->n_impulses, .noise = base->noise,
                       .common_noise = base->common_noise, .period = base->period,
                       .inputs = inputs};
    if (gt && (s.n_tones = flat_count(a, "tones", TONE_FIELDS,
                                      "frequency, amplitude, phase_x, phase_y", err)) < 0)
        return CBF_EINVAL;
    if (gc && (s.n_combs = flat_count(a, "combs", COMB_FIELDS,
                                      "frequency, amplitude, harmonics, phase_x, phase_y",
                                      err)) < 0)
        return CBF_EINVAL;
    if (gi && (s.n_impulses = flat_count(a, "impulses", IMPULSE_FIELDS,
                                         "period, amplitude, offset", err)) < 0)
        return CBF_EINVAL;
    if (gk && check_constants(a, "signals", inputs, err))
        return CBF_EINVAL;
    if (cbf_params_given(a, "noise"))
        s.noise = cbf_params_float(a, "noise");
    if (cbf_params_given(a, "common_noise"))
        s.common_noise = cbf_params_float(a, "common_noise");
    if (s.period && cbf_params_given(a, "period"))
        s.period = cbf_params_int(a, "period");
    if (s.period && (s.period < 4096 || (s.period & (s.period - 1))))
        return cbf_error_set(err, CBF_EINVAL, "signals: period %lld: cbf's form in replay mode "
                             "takes a power of two of at least 4096", (long long)s.period);
    const bool constants = gk ? cbf_params_len(a, "constants") > 0 : base->constants != NULL;
    int rc = spec_alloc(&s, inputs, constants, err);
    if (rc)
        return rc;
    for (int k = 0; k < s.n_tones; k++)
        s.tones[k] = gt ? (cbf_dsim_tone){.frequency = at(a, "tones", k, TONE_FIELDS, 0),
                                          .amplitude = at(a, "tones", k, TONE_FIELDS, 1),
                                          .phase = {at(a, "tones", k, TONE_FIELDS, 2),
                                                    at(a, "tones", k, TONE_FIELDS, 3)}}
                        : base->tones[k];
    for (int k = 0; k < s.n_combs; k++)
        s.combs[k] = gc ? (cbf_dsim_comb){.frequency = at(a, "combs", k, COMB_FIELDS, 0),
                                          .amplitude = at(a, "combs", k, COMB_FIELDS, 1),
                                          .harmonics = (int)at(a, "combs", k, COMB_FIELDS, 2),
                                          .phase = {at(a, "combs", k, COMB_FIELDS, 3),
                                                    at(a, "combs", k, COMB_FIELDS, 4)}}
                        : base->combs[k];
    for (int k = 0; k < s.n_impulses; k++)
        s.impulses[k] =
            gi ? (cbf_dsim_impulse){.period = (int64_t)at(a, "impulses", k, IMPULSE_FIELDS, 0),
                                    .amplitude = at(a, "impulses", k, IMPULSE_FIELDS, 1),
                                    .offset = (int64_t)at(a, "impulses", k, IMPULSE_FIELDS, 2)}
               : base->impulses[k];
    if (gk)
        spec_constants(&s, a, inputs);
    else if (constants)
        memcpy(s.constants, base->constants, (size_t)inputs * sizeof *s.constants);
    *out = s;
    return 0;
}

/* ---- building ---- */

/* The `signals` sensor: every input as katgpucbf writes a signal, "; "
 * between and ";" after (an input on cbf's form is written `cbf`), cut
 * with "..." past the text sensor's length. */
static char *signals_text(const cbf_dsim_spec *s)
{
    const size_t cap = CBF_TEXT_MAX;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    size_t len = 0;
    bool fits = true;
    t[0] = '\0';
    for (int i = 0; i < s->inputs && fits; i++) {
        const cbf_dsim_lang_input *in = s->lang ? &s->lang[i] : NULL;
        if (in && in->prog)
            fits = cbf_dsim_prog_format(in->prog, in->output, t, &len, cap);
        else
            fits = (len += (size_t)snprintf(t + len, cap - len, "cbf")) < cap;
        fits = fits && (len += (size_t)snprintf(t + len, cap - len, i + 1 < s->inputs ? "; " : ";")) < cap;
    }
    if (!fits)
        memcpy(t + cap - 4, "...", 4);
    return t;
}

int cbf_dsim_signal_build(cbf_dsim_signal *sig, cbf_dsim_spec *spec, const cbf_dsim_config *fixed,
                          cbf_dsim_workers *w, cbf_error *err)
{
    memset(sig, 0, sizeof *sig);
    sig->spec = *spec;
    memset(spec, 0, sizeof *spec);
    const cbf_dsim_spec *s = &sig->spec;
    cbf_dsim_config cfg = *fixed;
    cfg.n_tones = s->n_tones;
    cfg.tones = s->tones;
    cfg.n_combs = s->n_combs;
    cfg.combs = s->combs;
    cfg.n_impulses = s->n_impulses;
    cfg.impulses = s->impulses;
    cfg.constants = s->constants;
    cfg.noise = s->noise;
    cfg.common_noise = s->common_noise;
    cfg.period = s->period;
    cfg.lang = s->lang;
    /* Replay's packed period holds a whole number of every part's period
     * (all powers of two): the longest, at least a heap. The gauge says
     * after how long the signal repeats: the language's longest period
     * when every input plays it, else cbf's form's (0 in compute mode). */
    const bool cbf = uses_cbf_form(s);
    int64_t lang = 0;
    for (int i = 0; s->lang && i < s->inputs; i++)
        if (s->lang[i].prog && s->lang[i].period > lang)
            lang = s->lang[i].period;
    int64_t table = 0;
    if (s->period) {   /* replay */
        table = cbf ? s->period : CBF_DSIM_HEAP_SAMPLES;
        table = lang > table ? lang : table;
    }
    sig->repeat = cbf ? table : lang;
    char msg[256];
    int rc = cbf_dsim_model_create(&cfg, &sig->model, msg, sizeof msg);
    if (rc) {
        cbf_dsim_signal_free(sig);
        return cbf_error_set(err, rc == -2 ? CBF_ENOMEM : CBF_EINVAL, "%s", msg);
    }
    if (!(sig->text = signals_text(s))) {
        cbf_dsim_signal_free(sig);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    if (table && cbf_dsim_period_build(&sig->per, sig->model, 2 * cfg.antennas, table, cfg.bits, w)) {
        const int inputs = 2 * cfg.antennas;
        cbf_dsim_signal_free(sig);
        return cbf_error_set(err, CBF_ENOMEM,
                             "out of memory for one period (%d streams of %lld samples)", inputs,
                             (long long)table);
    }
    return 0;
}

void cbf_dsim_signal_free(cbf_dsim_signal *sig)
{
    cbf_dsim_period_free(&sig->per);
    cbf_dsim_model_free(sig->model);
    sig->model = NULL;
    free(sig->text);
    sig->text = NULL;
    cbf_dsim_spec_free(&sig->spec);
}
