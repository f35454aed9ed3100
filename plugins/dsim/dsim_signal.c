/* dsim_signal.c: see dsim_signal.h. */
#include "dsim_signal.h"

#include <stdlib.h>
#include <string.h>

/* Fields of each record, in the order a request's flat list gives them. */
#define TONE_FIELDS 4      /* frequency, amplitude, phase_x, phase_y */
#define COMB_FIELDS 5      /* frequency, amplitude, harmonics, phase_x, phase_y */
#define IMPULSE_FIELDS 3   /* period, amplitude, offset */

void cbf_dsim_spec_free(cbf_dsim_spec *s)
{
    free(s->tones);
    free(s->combs);
    free(s->impulses);
    free(s->constants);
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

int cbf_dsim_spec_from_params(const cbf_params *p, int inputs, int64_t period,
                              cbf_dsim_spec *out, cbf_error *err)
{
    cbf_dsim_spec s = {
        .n_tones = (int)cbf_params_len(p, "tones"),
        .n_combs = (int)cbf_params_len(p, "combs"),
        .n_impulses = (int)cbf_params_len(p, "impulses"),
        .noise = cbf_params_float(p, "noise"),
        .common_noise = cbf_params_float(p, "common_noise"),
        .period = period,
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
                               cbf_dsim_spec *out, cbf_error *err)
{
    const bool gt = cbf_params_given(a, "tones"), gc = cbf_params_given(a, "combs"),
               gi = cbf_params_given(a, "impulses"), gk = cbf_params_given(a, "constants");
    cbf_dsim_spec s = *base;
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
    if (s.period & (s.period - 1))
        return cbf_error_set(err, CBF_EINVAL, "signals: period %lld is not a power of two",
                             (long long)s.period);
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
    char msg[256];
    int rc = cbf_dsim_model_create(&cfg, &sig->model, msg, sizeof msg);
    if (rc) {
        cbf_dsim_signal_free(sig);
        return cbf_error_set(err, rc == -2 ? CBF_ENOMEM : CBF_EINVAL, "%s", msg);
    }
    if (s->period && cbf_dsim_period_build(&sig->per, sig->model, 2 * cfg.antennas, s->period,
                                           cfg.bits, w)) {
        const int inputs = 2 * cfg.antennas;
        const long long period = (long long)s->period;
        cbf_dsim_signal_free(sig);
        return cbf_error_set(err, CBF_ENOMEM,
                             "out of memory for one period (%d streams of %lld samples)", inputs,
                             period);
    }
    return 0;
}

void cbf_dsim_signal_free(cbf_dsim_signal *sig)
{
    cbf_dsim_period_free(&sig->per);
    cbf_dsim_model_free(sig->model);
    sig->model = NULL;
    cbf_dsim_spec_free(&sig->spec);
}
