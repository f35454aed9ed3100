/* beamctl.c: see beamctl.h. katgpucbf (xbgpu/engine.py) is the model for
 * the requests' arguments and the sensors' names and text; its changes
 * take effect "soon", ours at the timestamp a request names, under
 * stage/timed.h's rules, per beam and per kind: a pending weights change
 * for one beam holds back neither another beam nor that beam's delays. */
#include "beamctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Changes waiting per beam and kind, as fft_post's gains. */
#define BF_MAX_PENDING 16

static const char *const bf_kind_request[BF_KINDS] = {"beam-weights", "beam-delays",
                                                      "beam-quant-gains"};
static const char *const bf_text_suffix[BF_TEXTS] = {"weight", "delay", "quantiser-gain",
                                                     "beng-clip-cnt"};
static const unsigned bf_text_type[BF_TEXTS] = {0, 0, CBF_SENSOR_FLOAT, CBF_SENSOR_INTEGER};
static const char *const bf_text_doc[BF_TEXTS] = {
    "The summing weights applied to all the inputs of this beam",
    "The delay settings of the inputs for this beam. Each input has a delay [s] and phase [rad]: (loadmcnt, "
    "delay0, phase0, delay1, phase1, ...)",
    "Non-complex post-summation quantiser gain applied to this beam",
    "Number of complex samples that saturated."};

#define BF_BEAM_ARG                                                                              \
    {.name = "beam", .type = CBF_PARAM_STRING,                                                   \
     .doc = "the beam: its name (parameter `names`, default beam0, beam1, ...) or its index"}
/* As fft_post's gain declares it: the control plane's conversions of `at`
 * apply to every timed request alike. */
#define BF_AT_ARG                                                                                \
    {.name = "at", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1, .max = 9.2e18, \
     .doc = "digitiser timestamp from which spectra use the new values; -1: the next spectrum", \
     .flags = CBF_PARAM_TIMESTAMP},                                                            \
    CBF_TIMED_CANCEL_ARG

static const cbf_param_decl bf_weights_args[] = {
    BF_BEAM_ARG,
    {.name = "weights", .type = CBF_PARAM_FLOAT_LIST, .def = "[]", .has_range = 1, .min = -1e9,
     .max = 1e9, .doc = "one real weight per antenna (required unless cancel)"},
    BF_AT_ARG,
};
static const cbf_param_decl bf_delays_args[] = {
    BF_BEAM_ARG,
    {.name = "delays", .type = CBF_PARAM_FLOAT_LIST, .def = "[]", .has_range = 1, .min = -1e9,
     .max = 1e9, .doc = "(required unless cancel) per antenna a delay (s) and a fringe offset (rad, at the band centre): 2 x n_ants "
            "values, delay0, phase0, delay1, phase1, ..."},
    BF_AT_ARG,
};
static const cbf_param_decl bf_qgain_args[] = {
    BF_BEAM_ARG,
    {.name = "gain", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = -1e9, .max = 1e9,
     .doc = "the beam's quantisation gain (real; required unless cancel)"},
    BF_AT_ARG,
};

const cbf_request_decl cbf_beamctl_requests[CBF_BEAMCTL_N_REQUESTS] = {
    {.name = "beam-weights", .args = bf_weights_args, .n_args = CBF_COUNT_OF(bf_weights_args),
     .doc = "set one beam's weights (one real per antenna) from a timestamp on"},
    {.name = "beam-delays", .args = bf_delays_args, .n_args = CBF_COUNT_OF(bf_delays_args),
     .doc = "set one beam's delay and fringe offset per antenna from a timestamp on"},
    {.name = "beam-quant-gains", .args = bf_qgain_args, .n_args = CBF_COUNT_OF(bf_qgain_args),
     .doc = "set one beam's quantisation gain from a timestamp on"},
};

/* ---- sensor text, as katgpucbf's Python writes it ---- */

/* open, then values ", "-separated, then close; NULL when out of memory. */
static char *bf_join(const char *open, const double *v, size_t count, const char *close)
{
    const size_t cap = strlen(open) + count * 32 + strlen(close) + 1;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t l = (size_t)snprintf(s, cap, "%s", open);
    for (size_t i = 0; i < count; i++) {
        char r[40];
        cbf_format_repr(v[i], r, sizeof r);
        l += (size_t)snprintf(s + l, cap - l, "%s%s", i ? ", " : "", r);
    }
    snprintf(s + l, cap - l, "%s", close);
    return s;
}

/* The sensor of `kind` for beam b, from the values in force. */
static void bf_show(cbf_beamctl *c, int b, int kind)
{
    const size_t A = (size_t)c->A;
    char *s = NULL, open[40];
    switch (kind) {
    case BF_WEIGHTS:
        s = bf_join("[", c->w + (size_t)b * A, A, "]");
        break;
    case BF_DELAYS:
        /* katgpucbf's (loadmcnt, delay0, phase0, delay1, phase1, ...) */
        snprintf(open, sizeof open, "(%lld, ", (long long)c->delay_at[b]);
        s = bf_join(open, c->d + (size_t)b * A * 2, A * 2, ")");
        break;
    default:
        s = bf_join("", &c->qg[b], 1, "");
        break;
    }
    if (s)
        cbf_text_set(c->t[b * BF_TEXTS + kind], s, CBF_STATUS_NOMINAL);
    free(s);
}

static double bf_mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A clip count is `warn` while it has risen within CBF_RISE_HOLD_S, the
 * core's rule for counters (a text's status is the plugin's to set, so
 * it is re-set when the rule's answer changes). */
void cbf_beamctl_clips(cbf_beamctl *c, const uint64_t *sat)
{
    const double now = bf_mono_now();
    for (int b = 0; b < c->B; b++) {
        c->clips[b] += sat[b];
        if (sat[b])
            c->rose[b] = now;
        const uint8_t warn = c->rose[b] != 0 && now - c->rose[b] < CBF_RISE_HOLD_S;
        if (!sat[b] && warn == c->clip_warn[b])
            continue;
        c->clip_warn[b] = warn;
        char v[24];
        snprintf(v, sizeof v, "%llu", (unsigned long long)c->clips[b]);
        cbf_text_set(c->t[b * BF_TEXTS + BF_T_CLIP], v, warn ? CBF_STATUS_WARN : CBF_STATUS_NOMINAL);
    }
}

/* ---- start-up ---- */

/* Value for (beam b, antenna a) of a per-antenna list: [] gives def,
 * n_ants values are shared by every beam, beams x n_ants are beam-major. */
static double bf_list_at(const cbf_params *p, const char *name, size_t b, size_t a, size_t n_ants,
                         double def)
{
    const size_t n = cbf_params_len(p, name);
    if (!n)
        return def;
    return cbf_params_float_at(p, name, n == n_ants ? a : b * n_ants + a);
}

static int bf_check_list(const cbf_params *p, const char *name, size_t beams, size_t n_ants,
                         cbf_error *err)
{
    const size_t n = cbf_params_len(p, name);
    if (n && n != n_ants && n != beams * n_ants)
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: '%s' has %zu values; want 0, %zu (one per antenna) or %zu "
                             "(beams x antennas)", cbf_params_where(p, name), name, n, n_ants,
                             beams * n_ants);
    return 0;
}

static int bf_name_ok(const char *s, size_t len)
{
    if (!len || len >= CBF_BEAM_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '-' || s[i] == '_'))
            return 0;
    return 1;
}

/* `names`: "" for beam0, beam1, ...; else B names, comma separated, each
 * usable in a katcp sensor name (letters, digits, '.', '-', '_'). */
static int bf_names(cbf_beamctl *c, const cbf_params *p, cbf_error *err)
{
    const char *s = cbf_params_string(p, "names");
    const char *where = cbf_params_where(p, "names");
    int b = 0;
    while (*s == ' ')
        s++;
    if (!*s) {
        for (; b < c->B; b++)
            snprintf(c->names[b], CBF_BEAM_NAME_MAX, "beam%d", b);
        return 0;
    }
    for (;;) {
        size_t len = strcspn(s, ",");
        const char *next = s + len;
        while (len && s[len - 1] == ' ')
            len--;
        if (!bf_name_ok(s, len))
            return cbf_error_set(err, CBF_ECONFIG, "%s: names: '%.*s' is not a beam name (1 to %d "
                                 "letters, digits, '.', '-' or '_')", where, (int)len, s,
                                 CBF_BEAM_NAME_MAX - 1);
        if (b == c->B)
            return cbf_error_set(err, CBF_ECONFIG, "%s: names: more names than the %d beams", where,
                                 c->B);
        memcpy(c->names[b], s, len);
        c->names[b][len] = '\0';
        for (int o = 0; o < b; o++)
            if (!strcmp(c->names[o], c->names[b]))
                return cbf_error_set(err, CBF_ECONFIG, "%s: names: '%s' names two beams", where,
                                     c->names[b]);
        b++;
        if (!*next)
            break;
        s = next + 1;
        while (*s == ' ')
            s++;
    }
    if (b != c->B)
        return cbf_error_set(err, CBF_ECONFIG, "%s: names: %d names for %d beams", where, b, c->B);
    return 0;
}

int cbf_beamctl_init(cbf_beamctl *c, cbf_node *node, const cbf_params *p, int A, int B, int64_t sbs,
                double spacing, double first, double centre, cbf_error *err)
{
    memset(c, 0, sizeof *c);
    c->A = A;
    c->B = B;
    c->sbs = sbs;
    c->spacing = spacing;
    c->first = first;
    c->centre = centre;
    const size_t nA = (size_t)A, nB = (size_t)B;
    c->names = calloc(nB, sizeof *c->names);
    c->w = calloc(nB * nA, sizeof *c->w);
    c->d = calloc(nB * nA * 2, sizeof *c->d);
    c->qg = calloc(nB, sizeof *c->qg);
    c->delay_at = calloc(nB, sizeof *c->delay_at);
    c->dirty = calloc(nB, 1);
    c->q = calloc(nB * BF_KINDS, sizeof *c->q);
    c->t = calloc(nB * BF_TEXTS, sizeof *c->t);
    c->clips = calloc(nB, sizeof *c->clips);
    c->rose = calloc(nB, sizeof *c->rose);
    c->clip_warn = calloc(nB, 1);
    if (!c->names || !c->w || !c->d || !c->qg || !c->delay_at || !c->dirty || !c->q || !c->t ||
        !c->clips || !c->rose || !c->clip_warn)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc;
    if ((rc = bf_names(c, p, err)) || (rc = bf_check_list(p, "weights", nB, nA, err)) ||
        (rc = bf_check_list(p, "delays", nB, nA, err)) ||
        (rc = bf_check_list(p, "fringe_offsets", nB, nA, err)))
        return rc;
    for (size_t b = 0; b < nB; b++) {
        c->qg[b] = cbf_params_field(p, "beams", b, "quant_gain");
        c->dirty[b] = 1;
        for (size_t a = 0; a < nA; a++) {
            c->w[b * nA + a] = bf_list_at(p, "weights", b, a, nA, 1.0);
            c->d[(b * nA + a) * 2] = bf_list_at(p, "delays", b, a, nA, 0.0);
            c->d[(b * nA + a) * 2 + 1] = bf_list_at(p, "fringe_offsets", b, a, nA, 0.0);
        }
        for (int k = 0; k < BF_TEXTS; k++) {
            char name[CBF_BEAM_NAME_MAX + 32];
            snprintf(name, sizeof name, "%s.%s", c->names[b], bf_text_suffix[k]);
            c->t[b * BF_TEXTS + (size_t)k] = cbf_node_text(node, name);
            /* katgpucbf's engine-level BEAM.NAME too (the beam is its stream), typed as there */
            cbf_text_katcp(c->t[b * BF_TEXTS + (size_t)k], name,
                           CBF_SENSOR_ENGINE | bf_text_type[k]);
            cbf_text_describe(c->t[b * BF_TEXTS + (size_t)k], "", bf_text_doc[k]);
        }
        for (int k = 0; k < BF_KINDS; k++)
            bf_show(c, (int)b, k);
        cbf_text_set(c->t[b * BF_TEXTS + BF_T_CLIP], "0", CBF_STATUS_NOMINAL);
    }
    return 0;
}

void cbf_beamctl_free(cbf_beamctl *c)
{
    if (c->q)
        for (int i = 0; i < c->B * BF_KINDS; i++)
            cbf_timed_destroy(c->q[i]);
    free(c->names);
    free(c->w);
    free(c->d);
    free(c->qg);
    free(c->delay_at);
    free(c->dirty);
    free(c->q);
    free(c->t);
    free(c->clips);
    free(c->rose);
    free(c->clip_warn);
    memset(c, 0, sizeof *c);
}

/* ---- the data path's side ---- */

int cbf_beamctl_coef(cbf_beamctl *c, cbf_beam_coef *coef, cbf_error *err)
{
    const size_t A = (size_t)c->A;
    int any = 0;
    for (int b = 0; b < c->B; b++) {
        if (!c->dirty[b])
            continue;
        for (size_t a = 0; a < A; a++) {
            const double *d = &c->d[((size_t)b * A + a) * 2];
            if (cbf_beam_coef_set(&coef[(size_t)b * A + a], c->w[(size_t)b * A + a], c->qg[b], d[0],
                                  d[1], c->spacing, c->first, c->centre))
                return cbf_error_set(err, CBF_ECONFIG,
                                     "beam %s antenna %zu: weight, gain, delay or fringe offset "
                                     "is not finite (or too large)", c->names[b], a);
        }
        c->dirty[b] = 0;
        any = 1;
    }
    return any;
}

static size_t bf_payload_len(const cbf_beamctl *c, int kind)
{
    return kind == BF_WEIGHTS ? (size_t)c->A : kind == BF_DELAYS ? 2 * (size_t)c->A : 1;
}

/* The values in force of one beam and kind. */
static double *bf_in_force(cbf_beamctl *c, int b, int kind)
{
    const size_t A = (size_t)c->A;
    return kind == BF_WEIGHTS ? c->w + (size_t)b * A
           : kind == BF_DELAYS ? c->d + (size_t)b * A * 2
                               : &c->qg[b];
}

void cbf_beamctl_apply(cbf_beamctl *c, int64_t upto)
{
    for (int i = 0; i < c->B * BF_KINDS; i++) {
        cbf_timed *q = c->q[i];
        const int b = i / BF_KINDS, kind = i % BF_KINDS;
        int n = 0;
        while (q && n < cbf_timed_count(q) && cbf_timed_at(q, n) <= upto) {
            memcpy(bf_in_force(c, b, kind), cbf_timed_payload(q, n),
                   bf_payload_len(c, kind) * sizeof(double));
            if (kind == BF_DELAYS)
                c->delay_at[b] = cbf_timed_at(q, n);
            n++;
        }
        if (!n)
            continue;
        cbf_timed_pop(q, n);
        c->dirty[b] = 1;
        bf_show(c, b, kind);
    }
}

int64_t cbf_beamctl_next_change(const cbf_beamctl *c)
{
    int64_t first = INT64_MAX;
    for (int i = 0; i < c->B * BF_KINDS; i++)
        if (c->q[i] && cbf_timed_count(c->q[i]) && cbf_timed_at(c->q[i], 0) < first)
            first = cbf_timed_at(c->q[i], 0);
    return first;
}

void cbf_beamctl_processed(cbf_beamctl *c, int64_t next)
{
    c->next = next;
    c->have_next = 1;
    for (int i = 0; i < c->B * BF_KINDS; i++)
        if (c->q[i])
            cbf_timed_processed(c->q[i], next);
}

/* ---- requests ---- */

static int bf_find_beam(const cbf_beamctl *c, const char *name, cbf_error *err)
{
    for (int b = 0; b < c->B; b++)
        if (!strcmp(c->names[b], name))
            return b;
    char *end;
    long i = strtol(name, &end, 10);
    if (*name >= '0' && *name <= '9' && !*end && i < c->B)
        return (int)i;
    char list[256] = "";
    for (int b = 0; b < c->B; b++) {
        size_t l = strlen(list);
        if (l + strlen(c->names[b]) + 8 >= sizeof list) {
            snprintf(list + l, sizeof list - l, ", ...");
            break;
        }
        snprintf(list + l, sizeof list - l, "%s%s", b ? ", " : "", c->names[b]);
    }
    return cbf_error_set(err, CBF_EINVAL, "no beam '%s' (beams: %s)", name, list);
}

static int bf_queue(cbf_beamctl *c, int b, int kind, cbf_timed **out, cbf_error *err)
{
    cbf_timed **q = &c->q[b * BF_KINDS + kind];
    if (!*q) {
        static const char *const nouns[BF_KINDS] = {"beam-weights change", "beam-delays change",
                                                    "beam-quant-gains change"};
        const cbf_timed_config tc = {.noun = nouns[kind],
                                     .payload = bf_payload_len(c, kind) * sizeof(double),
                                     .max_pending = BF_MAX_PENDING};
        int rc = cbf_timed_create(&tc, q, err);
        if (rc)
            return rc;
        if (c->have_next)
            cbf_timed_processed(*q, c->next);
    }
    *out = *q;
    return 0;
}

int cbf_beamctl_request(cbf_beamctl *c, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    const char *name = cbf_request_name(req);
    const cbf_params *p = cbf_request_args(req);
    int kind = 0;
    while (kind < BF_KINDS && strcmp(name, bf_kind_request[kind]))
        kind++;
    if (kind == BF_KINDS)
        return cbf_error_set(err, CBF_EINTERNAL, "no request '%s'", name);
    const int b = bf_find_beam(c, cbf_params_string(p, "beam"), err);
    if (b < 0)
        return cbf_error_prefix(err, "%s", name);
    const size_t want = bf_payload_len(c, kind);
    const char *list = kind == BF_WEIGHTS ? "weights" : "delays";
    const char *value = kind == BF_QGAIN ? "gain" : list;
    cbf_timed *q;
    int rc;
    if (cbf_params_bool(p, "cancel")) {
        if (cbf_params_given(p, value))
            return cbf_error_set(err, CBF_EINVAL, "%s: cancel drops pending changes: give no %s", name,
                                 value);
        if ((rc = bf_queue(c, b, kind, &q, err)))
            return rc;
        const int64_t from = cbf_timed_resolve(q, cbf_params_int(p, "at"));
        cbf_timed_cancel(q, from);
        cbf_reply_string(reply, "beam", c->names[b]);
        cbf_reply_int(reply, "at", from);
        cbf_timed_reply(q, reply);
        return 0;
    }
    if (!cbf_params_given(p, value))
        return cbf_error_set(err, CBF_EINVAL, "%s: give '%s' (or cancel)", name, value);
    double gain = 0;
    if (kind == BF_QGAIN) {
        gain = cbf_params_float(p, "gain");
        if (!isfinite(gain))
            return cbf_error_set(err, CBF_EINVAL, "%s: the gain is not finite", name);
    } else {
        if (cbf_params_len(p, list) != want)
            return cbf_error_set(err, CBF_EINVAL, "%s: %zu values: give %zu (%s)", name,
                                 cbf_params_len(p, list), want,
                                 kind == BF_WEIGHTS ? "one weight per antenna"
                                                    : "a delay and a fringe offset per antenna");
        for (size_t i = 0; i < want; i++)
            if (!isfinite(cbf_params_float_at(p, list, i)))
                return cbf_error_set(err, CBF_EINVAL, "%s: value %zu is not finite", name, i + 1);
    }
    if ((rc = bf_queue(c, b, kind, &q, err)))
        return rc;
    const int64_t at = cbf_timed_resolve(q, cbf_params_int(p, "at"));
    if (cbf_timed_check(q, at, err))
        return cbf_error_prefix(err, "%s", name);
    int merged;
    double *pay = cbf_timed_push(q, at, &merged);
    for (size_t i = 0; i < want; i++)
        pay[i] = kind == BF_QGAIN ? gain : cbf_params_float_at(p, list, i);
    cbf_reply_string(reply, "beam", c->names[b]);
    cbf_reply_int(reply, "at", at);
    cbf_reply_int(reply, "spectrum", (at + c->sbs - 1) / c->sbs);
    cbf_timed_reply(q, reply);
    return 0;
}
