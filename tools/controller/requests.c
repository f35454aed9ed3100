/* requests.c: katsdpcontroller's product requests checked and split into
 * engine requests (requests.h). The checks and the engine forms follow
 * katsdpcontroller's product_controller.py (set_delays, gain, gain_all,
 * beam_*, dsim_*, capture_start_stop): a delay model per input, two to each
 * F-engine (its pair); a gain to the one F-engine of the input, with its pol;
 * gain-all, beam and capture requests to every engine of the stream. */
#include "requests.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_space(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* One real as Python's float() reads it (strtod, less hex forms, which
 * Python refuses); *end past it. */
static int py_real(const char *s, double *v, const char **end)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        return -1;
    char *e;
    errno = 0;
    *v = strtod(s, &e);
    if (e == s)
        return -1;
    *end = e;
    return 0;
}

int cbf_parse_py_complex(const char *text, double *re, double *im)
{
    const char *s = skip_space(text);
    int paren = *s == '(';
    if (paren)
        s = skip_space(s + 1);
    double a = 0, b = 0;
    const char *e;
    /* A bare "j", "+j", "-j": the unit imaginary. */
    if ((s[0] == 'j' || s[0] == 'J') || ((s[0] == '+' || s[0] == '-') && (s[1] == 'j' || s[1] == 'J'))) {
        b = s[0] == '-' ? -1 : 1;
        e = s + (s[0] == 'j' || s[0] == 'J' ? 1 : 2);
    } else {
        if (py_real(s, &a, &e))
            return -1;
        if (*e == 'j' || *e == 'J') {   /* imaginary alone */
            b = a;
            a = 0;
            e++;
        } else if (*e == '+' || *e == '-') {   /* real, then the imaginary part */
            double y;
            const char *f;
            if ((e[1] == 'j' || e[1] == 'J')) {
                y = *e == '-' ? -1 : 1;
                f = e + 1;
            } else if (py_real(e, &y, &f)) {
                return -1;
            }
            if (*f != 'j' && *f != 'J')
                return -1;
            b = y;
            e = f + 1;
        }
    }
    e = skip_space(e);
    if (paren) {
        if (*e != ')')
            return -1;
        e = skip_space(e + 1);
    }
    if (*e)
        return -1;
    *re = a;
    *im = b;
    return 0;
}

static int py_float(const char *text, double *v)
{
    const char *e;
    const char *s = skip_space(text);
    if (py_real(s, v, &e))
        return -1;
    return *skip_space(e) ? -1 : 0;
}

/* A whole number of at least min, the whole text; 0, or -1. */
static int whole(const char *text, long long min, long long *v)
{
    char *e;
    errno = 0;
    *v = strtoll(text, &e, 10);
    return e == text || *e || errno || *v < min ? -1 : 0;
}

/* "a,b" (two floats, for a delay or phase and its rate) or, with one_term,
 * "a". */
static int coeff_part(const char *s, size_t len, int terms)
{
    char buf[128];
    if (len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *comma = strchr(buf, ',');
    if ((terms == 2) != (comma != NULL))
        return -1;
    double v;
    if (comma) {
        *comma = '\0';
        if (strchr(comma + 1, ',') || py_float(comma + 1, &v))
            return -1;
    }
    return py_float(buf, &v);
}

/* "delay,rate:phase,rate" (terms 2), or "delay:phase" (terms 1). */
static int coefficient_set(const char *s, int terms)
{
    const char *colon = strchr(s, ':');
    if (!colon || strchr(colon + 1, ':'))
        return -1;
    if (coeff_part(s, (size_t)(colon - s), terms))
        return -1;
    return coeff_part(colon + 1, strlen(colon + 1), terms);
}

/* ---- the calls ---- */

static cbf_engine_call *add_call(cbf_fanout *f, cbf_task_type task, const cbf_product_stream *acv, int index)
{
    cbf_engine_call *c = realloc(f->calls, (size_t)(f->n + 1) * sizeof *c);
    if (!c)
        return NULL;
    f->calls = c;
    c = &f->calls[f->n++];
    *c = (cbf_engine_call){.task = task, .acv = acv, .index = index};
    return c;
}

static int add_arg(cbf_engine_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_arg(cbf_engine_call *c, const char *fmt, ...)
{
    char **a = realloc(c->args, (size_t)(c->n_args + 1) * sizeof *a);
    if (!a)
        return -1;
    c->args = a;
    va_list ap;
    va_start(ap, fmt);
    int rc = vasprintf(&a[c->n_args], fmt, ap);
    va_end(ap);
    if (rc < 0)
        return -1;
    c->n_args++;
    return 0;
}

/* Appends args[from..] to c. */
static int add_rest(cbf_engine_call *c, const cbf_product_request *r, int from)
{
    for (int i = from; i < r->n_args; i++)
        if (add_arg(c, "%s", r->args[i]))
            return -1;
    return 0;
}

void cbf_fanout_free(cbf_fanout *f)
{
    for (int i = 0; i < f->n; i++) {
        for (int j = 0; j < f->calls[i].n_args; j++)
            free(f->calls[i].args[j]);
        free(f->calls[i].args);
    }
    free(f->calls);
    memset(f, 0, sizeof *f);
}

#define NOMEM() cbf_error_set(err, CBF_ENOMEM, "%s: out of memory", r->name)

/* The stream argument, of the kind the request takes. */
static int want_stream(const cbf_product *p, const cbf_product_request *r, cbf_stream_kind k1, int k2,
                       const cbf_product_stream **out, cbf_error *err)
{
    if (r->n_args < 1)
        return cbf_error_set(err, CBF_EINVAL, "%s: the stream argument is missing", r->name);
    const cbf_product_stream *s = cbf_product_find(p, r->args[0]);
    if (!s || s->is_input)
        return cbf_error_set(err, CBF_EINVAL, "%s: argument 1: no stream named '%s' in this product",
                             r->name, r->args[0]);
    if (s->kind != k1 && (int)s->kind != k2)
        return cbf_error_set(err, CBF_EINVAL, "%s: argument 1: stream '%s' is of the wrong type (a %s)",
                             r->name, s->name, cbf_product_kind_name(s->kind, s->is_input));
    *out = s;
    return 0;
}

static int check_complex(const cbf_product_request *r, int from, cbf_error *err)
{
    for (int i = from; i < r->n_args; i++) {
        double re, im;
        if (cbf_parse_py_complex(r->args[i], &re, &im))
            return cbf_error_set(err, CBF_EINVAL, "%s: argument %d: '%s' is not a complex number "
                                 "(complex() arg is a malformed string)", r->name, i + 1, r->args[i]);
    }
    return 0;
}

/* A channeliser request: its stream, and at least `want` arguments (the
 * last of them named `missing` when absent). */
static int acv_request(const cbf_product *p, const cbf_product_request *r, int want, const char *missing,
                       const cbf_product_stream **s, cbf_error *err)
{
    int rc = want_stream(p, r, CBF_STREAM_ACV, -1, s, err);
    if (!rc && r->n_args < want)
        rc = cbf_error_set(err, CBF_EINVAL, "%s: the %s argument is missing", r->name, missing);
    return rc;
}

/* The four numbers of a model "delay,delay_rate:phase,phase_rate" that
 * coefficient_set has passed, parsed as it parses them. */
static int model_terms(const char *model, double v[4])
{
    char buf[256];
    if (strlen(model) >= sizeof buf)
        return -1;
    strcpy(buf, model);
    char *colon = strchr(buf, ':'), *c1 = strchr(buf, ','), *c2 = colon ? strchr(colon + 1, ',') : NULL;
    if (!colon || !c1 || c1 > colon || !c2)
        return -1;
    *colon = *c1 = *c2 = '\0';
    return py_float(buf, &v[0]) || py_float(c1 + 1, &v[1]) || py_float(colon + 1, &v[2]) ||
                   py_float(c2 + 1, &v[3])
               ? -1
               : 0;
}

/* v in the fewest digits that read back as v (as Python's repr). */
static const char *exact(double v, char buf[32])
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

/* The model moved from its reference time by dt seconds: the same straight
 * lines, each value taken dt later. */
static int rereference(cbf_engine_call *c, const char *model, double dt)
{
    double v[4];
    char b[4][32];
    if (dt == 0)
        return add_arg(c, "%s", model);
    if (model_terms(model, v))
        return -1;
    return add_arg(c, "%s,%s:%s,%s", exact(v[0] + v[1] * dt, b[0]), exact(v[1], b[1]),
                   exact(v[2] + v[3] * dt, b[2]), exact(v[3], b[3]));
}

/* A START before the product's sync time is taken as the models' reference
 * time, in force from the first sample: the engines (as katgpucbf's) take
 * no time before their sync time, so each model goes to them moved to the
 * sync time, exactly (linear). katgpucbf's qualification suite loads its
 * delays 5 s before the dsim's time (tied_array_channelised_voltage/
 * test_delay.py), which is before the sync time of a product configured
 * less than 5 s earlier. */
static int plan_delays(const cbf_product *p, const cbf_product_request *r, cbf_fanout *f, cbf_error *err)
{
    const cbf_product_stream *s;
    int rc = acv_request(p, r, 2, "time", &s, err);
    if (rc)
        return rc;
    const cbf_product_acv *a = &s->u.acv;
    double t;
    if (py_float(r->args[1], &t))
        return cbf_error_set(err, CBF_EINVAL, "delays: argument 2: '%s' is not a time (UNIX seconds)",
                             r->args[1]);
    int n = r->n_args - 2;
    if (n != a->n_inputs)
        return cbf_error_set(err, CBF_EINVAL, "delays: Wrong number of coefficient sets (%d, expected %d)", n,
                             a->n_inputs);
    for (int i = 0; i < n; i++)
        if (coefficient_set(r->args[2 + i], 2))
            return cbf_error_set(err, CBF_EINVAL, "delays: argument %d (input %s): Invalid coefficient-set "
                                 "'%s' (delay,delay_rate:phase,phase_rate)", i + 3, a->input_labels[i],
                                 r->args[2 + i]);
    const double dt = t < a->sync_time ? a->sync_time - t : 0;
    char tb[32];
    for (int e = 0; e < a->n_fengs; e++) {
        cbf_engine_call *c = add_call(f, CBF_TASK_F, s, e);
        if (!c || add_arg(c, "delays") || add_arg(c, "%s", s->name) ||
            (dt > 0 ? add_arg(c, "%s", exact(a->sync_time, tb)) : add_arg(c, "%s", r->args[1])) ||
            rereference(c, r->args[2 + 2 * e], dt) || rereference(c, r->args[3 + 2 * e], dt))
            return NOMEM();
    }
    return 0;
}

static int plan_gain(const cbf_product *p, const cbf_product_request *r, cbf_fanout *f, cbf_error *err)
{
    const cbf_product_stream *s;
    int rc = acv_request(p, r, 2, "input", &s, err);
    if (rc)
        return rc;
    const cbf_product_acv *a = &s->u.acv;
    int n = r->n_args - 2;
    if (n != 0 && n != 1 && n != a->n_chans)
        return cbf_error_set(err, CBF_EINVAL, "gain: Expected 0, 1, or %d values, received %d", a->n_chans, n);
    int idx = -1;
    for (int i = 0; i < a->n_inputs && idx < 0; i++)
        if (!strcmp(a->input_labels[i], r->args[1]))
            idx = i;
    if (idx < 0)
        return cbf_error_set(err, CBF_EINVAL, "gain: argument 2: Unknown input '%s'", r->args[1]);
    if ((rc = check_complex(r, 2, err)))
        return rc;
    cbf_engine_call *c = add_call(f, CBF_TASK_F, s, idx / 2);
    if (!c || add_arg(c, "gain") || add_arg(c, "%s", s->name) || add_arg(c, "%d", idx % 2) || add_rest(c, r, 2))
        return NOMEM();
    f->reply_from_first = 1;
    return 0;
}

static int plan_gain_all(const cbf_product *p, const cbf_product_request *r, cbf_fanout *f, cbf_error *err)
{
    const cbf_product_stream *s;
    int rc = want_stream(p, r, CBF_STREAM_ACV, -1, &s, err);
    if (rc)
        return rc;
    int n = r->n_args - 1;
    if (n != 1 && n != s->u.acv.n_chans)
        return cbf_error_set(err, CBF_EINVAL, "gain-all: Expected 1, or %d values, received %d",
                             s->u.acv.n_chans, n);
    if (!(n == 1 && !strcmp(r->args[1], "default")) && (rc = check_complex(r, 1, err)))
        return rc;
    for (int e = 0; e < s->u.acv.n_fengs; e++) {
        cbf_engine_call *c = add_call(f, CBF_TASK_F, s, e);
        if (!c || add_arg(c, "gain-all") || add_rest(c, r, 0))
            return NOMEM();
    }
    return 0;
}

/* beam-weights, beam-delays, beam-quant-gains: to every X/B-engine. */
static int plan_beam(const cbf_product *p, const cbf_product_request *r, cbf_fanout *f, cbf_error *err)
{
    const cbf_product_stream *s;
    int rc = want_stream(p, r, CBF_STREAM_TACV, -1, &s, err);
    if (rc)
        return rc;
    int n = r->n_args - 1;
    int ants = s->u.tacv.acv->u.acv.n_inputs / 2;
    if (!strcmp(r->name, "beam-quant-gains")) {
        double g;
        if (n != 1)
            return cbf_error_set(err, CBF_EINVAL, "beam-quant-gains: Expected 1 value, received %d", n);
        if (py_float(r->args[1], &g))
            return cbf_error_set(err, CBF_EINVAL, "beam-quant-gains: argument 2: '%s' is not a real number",
                                 r->args[1]);
    } else {
        if (n != ants)
            return cbf_error_set(err, CBF_EINVAL, "%s: Expected %d values, received %d", r->name, ants, n);
        int delays = !strcmp(r->name, "beam-delays");
        for (int i = 1; i <= n; i++) {
            double w;
            if (delays ? coefficient_set(r->args[i], 1) : py_float(r->args[i], &w))
                return cbf_error_set(err, CBF_EINVAL, delays ? "%s: argument %d: Invalid coefficient-set '%s' "
                                     "(delay:phase)" : "%s: argument %d: '%s' is not a real number",
                                     r->name, i + 1, r->args[i]);
        }
    }
    cbf_engine_call *c = add_call(f, CBF_TASK_XB, s->u.tacv.acv, -1);
    if (!c || add_arg(c, "%s", r->name) || add_rest(c, r, 0))
        return NOMEM();
    return 0;
}

static int plan_capture(const cbf_product *p, const cbf_product_request *r, long long start_ts, cbf_fanout *f,
                        cbf_error *err)
{
    const cbf_product_stream *s;
    int rc = want_stream(p, r, CBF_STREAM_BCP, CBF_STREAM_TACV, &s, err);
    if (rc)
        return rc;
    int start = !strcmp(r->name, "capture-start");
    /* capture-start may name its first timestamp (cbf's addition; without
     * it, katsdpcontroller's: the largest steady-state-timestamp). */
    if (r->n_args > 1 + start)
        return cbf_error_set(err, CBF_EINVAL, start ? "%s: takes STREAM [TIMESTAMP], got %d arguments"
                             : "%s: takes the stream alone, got %d arguments", r->name, r->n_args);
    if (r->n_args == 2 && whole(r->args[1], 0, &start_ts))
        return cbf_error_set(err, CBF_EINVAL, "%s: argument 2: '%s' is not a timestamp (ADC samples, an "
                             "integer >= 0)", r->name, r->args[1]);
    const cbf_product_stream *acv = s->kind == CBF_STREAM_BCP ? s->u.bcp.acv : s->u.tacv.acv;
    cbf_engine_call *c = add_call(f, CBF_TASK_XB, acv, -1);
    if (!c || add_arg(c, "%s", r->name) || add_arg(c, "%s", s->name))
        return NOMEM();
    if (start && add_arg(c, "%lld", start_ts))
        return NOMEM();
    return 0;
}

/* Whether a simulated digitiser stream's dsim task has this name. */
static int dsim_known(const cbf_product *p, const char *name)
{
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        if (s->kind != CBF_STREAM_DIG || !s->u.dig.simulated)
            continue;
        char task[256];
        cbf_product_dsim_task(&s->u.dig, task, sizeof task);
        if (!strcmp(task, name))
            return 1;
    }
    return 0;
}

static int plan_dsim(const cbf_product *p, const cbf_product_request *r, cbf_fanout *f, cbf_error *err)
{
    int signals = !strcmp(r->name, "dsim-signals");
    if (r->n_args < 1)
        return cbf_error_set(err, CBF_EINVAL, "%s: the dsim argument is missing", r->name);
    if (!dsim_known(p, r->args[0]))
        return cbf_error_set(err, CBF_EINVAL, "%s: argument 1: No dsim named %s", r->name, r->args[0]);
    if (signals && (r->n_args < 2 || r->n_args > 3))
        return cbf_error_set(err, CBF_EINVAL, "%s: takes DSIM SIGNALS [PERIOD], got %d arguments", r->name,
                             r->n_args);
    if (!signals && r->n_args != 1)
        return cbf_error_set(err, CBF_EINVAL, "%s: takes DSIM alone, got %d arguments", r->name, r->n_args);
    long long period;
    if (signals && r->n_args == 3 && whole(r->args[2], 1, &period))
        return cbf_error_set(err, CBF_EINVAL, "%s: argument 3: '%s' is not a period (a positive integer)",
                             r->name, r->args[2]);
    cbf_engine_call *c = add_call(f, CBF_TASK_SIM, NULL, -1);
    if (!c)
        return NOMEM();
    c->dsim = r->args[0];
    if (add_arg(c, signals ? "signals" : "time") || add_rest(c, r, 1))
        return NOMEM();
    f->reply_from_first = 1;
    return 0;
}

int cbf_product_request_plan(const cbf_product *p, const cbf_product_request *r, long long start_ts,
                             cbf_fanout *out, cbf_error *err)
{
    memset(out, 0, sizeof *out);
    int rc;
    if (!strcmp(r->name, "delays"))
        rc = plan_delays(p, r, out, err);
    else if (!strcmp(r->name, "gain"))
        rc = plan_gain(p, r, out, err);
    else if (!strcmp(r->name, "gain-all"))
        rc = plan_gain_all(p, r, out, err);
    else if (!strcmp(r->name, "beam-weights") || !strcmp(r->name, "beam-delays") ||
             !strcmp(r->name, "beam-quant-gains"))
        rc = plan_beam(p, r, out, err);
    else if (!strcmp(r->name, "capture-start") || !strcmp(r->name, "capture-stop"))
        rc = plan_capture(p, r, start_ts, out, err);
    else if (!strcmp(r->name, "dsim-signals") || !strcmp(r->name, "dsim-time"))
        rc = plan_dsim(p, r, out, err);
    else
        return cbf_error_set(err, CBF_ENOTSUP, "%s: not a product request", r->name);
    if (rc)
        cbf_fanout_free(out);
    return rc;
}
