/* katcp_requests.c: the engine's katcp requests that are a plugin's:
 * `?NAME [node=NODE] [key=value ...]` through the path the ZeroMQ plane
 * uses (cbf_rt_request_call), katgpucbf's positional forms of
 * capture-start, capture-stop, gain, gain-all, delays, beam-weights,
 * beam-delays and beam-quant-gains, and ?help's lines for them. The
 * server (cbf/katcp.h) hands it every request that is not its own. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/params_priv.h"
#include "katcp_engine.h"

/* A reply's arguments after its status, each malloc'd. */
typedef struct kc_args {
    char **a;
    size_t n, cap;
    bool oom;
} kc_args;

static void kc_args_add(kc_args *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kc_args_add(kc_args *l, const char *fmt, ...)
{
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **p = realloc(l->a, cap * sizeof *p);
        if (!p) {
            l->oom = true;
            return;
        }
        l->a = p;
        l->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    l->oom = vasprintf(&l->a[l->n], fmt, ap) < 0;
    va_end(ap);
    l->n += !l->oom;
}

/* Sends the reply "ok" with l's arguments, and frees them. */
static void kc_args_reply(cbf_katcp_call *c, kc_args *l)
{
    if (l->oom)
        cbf_katcp_reply_fmt(c, "fail", "out of memory");
    else
        cbf_katcp_reply(c, "ok", l->n, (const char *const *)l->a);
    for (size_t i = 0; i < l->n; i++)
        free(l->a[i]);
    free(l->a);
}

/* ---- help ---- */

size_t cbf_katcp_engine_help(cbf_katcp_call *c, const char *want, void *user)
{
    const cbf_katcp_engine *k = user;
    const cbf_graph *g = k->g;
    size_t n = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const cbf_plugin_desc *d = g->nodes[i].plugin;
        for (int q = 0; q < d->n_requests; q++) {
            const cbf_request_decl *rd = &d->requests[q];
            if (want && strcmp(want, rd->name))
                continue;
            char text[1024];
            int l = snprintf(text, sizeof text, "%s (node=%s, plugin %s; arguments:", rd->doc ? rd->doc : "",
                             g->nodes[i].name, d->name);
            for (int a = 0; a < rd->n_args && l > 0 && (size_t)l < sizeof text; a++)
                l += snprintf(text + l, sizeof text - (size_t)l, " %s=%s%s%s%s", rd->args[a].name,
                              rd->args[a].def ? rd->args[a].def : "(required)",
                              rd->args[a].flags & CBF_PARAM_TIMESTAMP ? " (or " : "",
                              rd->args[a].flags & CBF_PARAM_TIMESTAMP ? rd->args[a].name : "",
                              rd->args[a].flags & CBF_PARAM_TIMESTAMP ? "_unix=UNIX_SECONDS)" : "");
            if (l > 0 && (size_t)l < sizeof text)
                snprintf(text + l, sizeof text - (size_t)l, ")");
            cbf_katcp_help(c, rd->name, text);
            n++;
        }
    }
    return n;
}

/* ---- plugin requests ---- */

/* One part of a gain value into list at *l: its own text when that is a
 * plain decimal number (exactly what the request path reads back, and no
 * printf per value: 65536 of them arrive at once), else v in full. */
static void kc_put_part(char *list, size_t *l, const char *text, size_t n, double v)
{
    if (n && n < 64 && strspn(text, "0123456789.eE+-") >= n) {
        memcpy(list + *l, text, n);
        *l += n;
    } else {
        *l += (size_t)sprintf(list + *l, "%.17g", v);
    }
}

/* katgpucbf's positional forms, as the generic key=value ones. */
static int kc_positional(const cbf_katcp_msg *m, cbf_text_kv *tv, size_t *nt, const char **node,
                         char **owned, cbf_error *err)
{
    bool start = !strcmp(m->name, "capture-start");
    if (start || !strcmp(m->name, "capture-stop")) {
        /* katsdpcontroller sends an X/B-engine `?capture-start STREAM TS`:
         * nothing before timestamp TS goes out (the sender's `from`). */
        if (m->n_args != 1 && !(start && m->n_args == 2))
            return cbf_error_set(err, CBF_EINVAL, start ? "?capture-start takes the stream (node) and, "
                                 "optionally, the first timestamp to send" : "?%s takes one argument: the "
                                 "stream (node)", m->name);
        *node = m->args[0];
        tv[(*nt)++] = (cbf_text_kv){"action", start ? "start" : "stop", NULL};
        if (m->n_args == 2)
            tv[(*nt)++] = (cbf_text_kv){"from", m->args[1], NULL};
        return CBF_OK;
    }
    /* katgpucbf's dsim: ?signals SIGNALS [PERIOD] (kc_signals_form). */
    if (!strcmp(m->name, "signals")) {
        tv[(*nt)++] = (cbf_text_kv){"signals", m->args[0], NULL};
        if (m->n_args == 2)
            tv[(*nt)++] = (cbf_text_kv){"period", m->args[1], NULL};
        return CBF_OK;
    }
    /* ?gain stream input [values...] and ?gain-all stream values|default:
     * each value real or complex (a+bj), sent to fft_post's gain as [re, im]
     * pairs (one pair: every channel); gain-all is both polarisations; no
     * values: the gains are only read (kc_gain_reply writes them). */
    bool all = !strcmp(m->name, "gain-all");
    size_t first = all ? 1 : 2;
    if (m->n_args < first + all)
        return cbf_error_set(err, CBF_EINVAL, "usage: ?%s", all ? "gain-all stream values...|default"
                                                                : "gain stream input [values...]");
    if (all && m->n_args == 2 && !strcmp(m->args[1], "default")) {
        *node = m->args[0];
        tv[(*nt)++] = (cbf_text_kv){"default", "true", NULL};
        return CBF_OK;
    }
    if (!all && strcmp(m->args[1], "0") && strcmp(m->args[1], "1"))
        return cbf_error_set(err, CBF_EINVAL, "?gain: input '%s': 0 or 1 (the polarisation)",
                             m->args[1]);
    if (m->n_args == first) {
        *node = m->args[0];
        tv[(*nt)++] = (cbf_text_kv){"pol", m->args[1], NULL};
        return CBF_OK;
    }
    *node = m->args[0];
    tv[(*nt)++] = (cbf_text_kv){"pol", all ? "-1" : m->args[1], NULL};
    size_t nv = m->n_args - first, cap = nv * 64 + 3, l = 0;
    for (size_t i = 0; i < nv; i++)
        cap += m->lens[i + first];
    char *list = malloc(cap);
    if (!list)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    list[l++] = '[';
    for (size_t i = 0; i < nv; i++) {
        const char *a = m->args[i + first], *re_at = a, *im_at = "0";
        char *end;
        double re = strtod(a, &end), im = 0;
        size_t re_n = (size_t)(end - a), im_n = 1;
        if (end != a && (*end == '+' || *end == '-') && end[1] != '\0') {
            char *e2;
            im = strtod(end, &e2);
            im_at = end;
            im_n = (size_t)(e2 - end);
            end = *e2 == 'j' && e2 != end ? e2 + 1 : end;
        } else if (*end == 'j' && end != a) {
            im = re;
            re = 0;
            im_at = a;
            im_n = re_n;
            re_at = "0";
            re_n = 1;
            end++;
        }
        if (end == a || *end || !isfinite(re) || !isfinite(im)) {
            free(list);
            return cbf_error_set(err, CBF_EINVAL, "gain value %zu: '%s' is not a finite real or complex "
                                 "number (such as 1.5 or 0.5-2j)", i + 1, a);
        }
        if (i) {
            memcpy(list + l, ", ", 2);
            l += 2;
        }
        kc_put_part(list, &l, re_at, re_n, re);
        memcpy(list + l, ", ", 2);
        l += 2;
        kc_put_part(list, &l, im_at, im_n, im);
    }
    snprintf(list + l, cap - l, "]");
    *owned = list;
    tv[(*nt)++] = (cbf_text_kv){"values", list, NULL};
    return CBF_OK;
}

/* katgpucbf's ?delays stream start-time model...: start-time in UNIX
 * seconds, one model per input (pol) as "delay,delay_rate:phase,phase_rate"
 * in s, s/s, rad, rad/s, loaded into the stream's (node's) `delays` with
 * at_unix, so the core converts the time as for any timed request. Equal
 * models go as one request for both pols; different ones as two (pol 0,
 * then pol 1) at the same timestamp, which the node merges into one change. */
static int kc_delay_model(const char *text, double v[4])
{
    char *end;
    const char *p = text;
    for (int i = 0; i < 4; i++) {
        v[i] = strtod(p, &end);
        if (end == p || !isfinite(v[i]) || *end != (i == 3 ? '\0' : i == 1 ? ':' : ','))
            return -1;
        p = end + 1;
    }
    return 0;
}

static void kc_delays(cbf_katcp_call *r, cbf_engine *e)
{
    const cbf_katcp_msg *m = cbf_katcp_call_msg(r);
    static const char usage[] = "?delays STREAM START-TIME MODEL...: a stream, a UNIX start time and one "
                                "model \"delay,delay_rate:phase,phase_rate\" per input";
    double v[2][4];
    /* A model where the start time goes: the time was left out. */
    if (m->n_args >= 2 && !kc_delay_model(m->args[1], v[0])) {
        cbf_katcp_reply_fmt(r, "fail", "START-TIME is missing: argument 2 ('%s') is a delay model (%s)", m->args[1],
                        usage);
        return;
    }
    if (m->n_args < 3) {
        cbf_katcp_reply_fmt(r, "fail", "%s", usage);
        return;
    }
    char *end;
    double start = strtod(m->args[1], &end);
    if (end == m->args[1] || *end || !isfinite(start)) {
        cbf_katcp_reply_fmt(r, "fail", "START-TIME '%s' is not UNIX seconds (%s)", m->args[1], usage);
        return;
    }
    size_t nm = m->n_args - 2;
    if (nm != 2) {
        cbf_katcp_reply_fmt(r, "fail", "wrong number of delay coefficient sets (expected 2, one per polarisation), "
                        "got %zu", nm);
        return;
    }
    for (size_t i = 0; i < nm; i++)
        if (kc_delay_model(m->args[2 + i], v[i])) {
            cbf_katcp_reply_fmt(r, "fail", "model %zu: '%s' is not \"delay,delay_rate:phase,phase_rate\" (finite "
                            "numbers: s, s/s, rad, rad/s)", i + 1, m->args[2 + i]);
            return;
        }
    bool same = !memcmp(v[0], v[1], sizeof v[0]);
    static const char *const keys[] = {"delay", "delay_rate", "phase", "phase_rate"};
    for (int q = 0; q < (same ? 1 : 2); q++) {
        char num[4][32];
        cbf_text_kv tv[7];
        for (int i = 0; i < 4; i++) {
            snprintf(num[i], sizeof num[i], "%.17g", v[q][i]);
            tv[i] = (cbf_text_kv){keys[i], num[i], NULL};
        }
        tv[4] = (cbf_text_kv){"pol", same ? "-1" : q ? "1" : "0", NULL};
        tv[5] = (cbf_text_kv){"at_unix", m->args[1], NULL};
        /* a start already past applies from the next spectrum, about the
         * start, as in katgpucbf (the suite sends the sync time) */
        tv[6] = (cbf_text_kv){"late", "true", NULL};
        cbf_error err;
        cbf_error_clear(&err);
        cbf_reply *reply = NULL;
        size_t at;
        int rc = cbf_rt_request_call(e, "delays", m->args[0], tv, 7, &at, &reply, &err);
        cbf_rt_reply_free(reply);
        if (rc) {
            cbf_katcp_reply_fmt(r, "fail", "%s%s", err.msg, q ? " (the model of input 0 was loaded)" : "");
            return;
        }
    }
    cbf_katcp_reply(r, "ok", 0, NULL);
}

/* katgpucbf's reply to ?gain: nothing when setting; when reading, the
 * input's gains in force as re+imj arguments (format_complex's form), one
 * when every channel has the same. */
static void kc_gain_reply(cbf_katcp_call *r, cbf_reply *reply)
{
    const cbf_katcp_msg *m = cbf_katcp_call_msg(r);
    char key[16];
    snprintf(key, sizeof key, "pol%s", m->args[1]);
    json_t *v = m->n_args > 2 ? NULL : json_object_get((json_t *)cbf_rt_reply_json(reply), key);
    kc_args l = {0};
    for (size_t i = 0; i + 1 < json_array_size(v); i += 2) {
        char z[80];
        cbf_format_complex(json_number_value(json_array_get(v, i)), json_number_value(json_array_get(v, i + 1)),
                           z, sizeof z);
        kc_args_add(&l, "%s", z);
    }
    kc_args_reply(r, &l);
}

/* katgpucbf's beam forms: ?beam-weights stream weight..., ?beam-delays
 * stream delay:phase..., ?beam-quant-gains stream gain, as the
 * beamformer's requests with beam=stream (NODE/BEAM when several nodes
 * form beams); the numbers travel as the list or value of the generic form. */
static bool kc_beam_form(const cbf_katcp_msg *m, bool generic)
{
    return !generic && (!strcmp(m->name, "beam-weights") || !strcmp(m->name, "beam-delays") ||
                        !strcmp(m->name, "beam-quant-gains"));
}

static int kc_beam_positional(const cbf_katcp_msg *m, cbf_text_kv *tv, size_t *nt, const char **node,
                              char **owned, cbf_error *err)
{
    const bool delays = !strcmp(m->name, "beam-delays"), gain = !strcmp(m->name, "beam-quant-gains");
    if (m->n_args < 2 || (gain && m->n_args != 2))
        return cbf_error_set(err, CBF_EINVAL, "?%s stream %s", m->name,
                             gain ? "gain (one value)" : delays ? "delay:phase... (one per antenna)"
                                                               : "weight... (one per antenna)");
    const size_t head = strlen(m->args[0]) + 1, cap = head + (m->n_args - 1) * 52 + 3;
    char *buf = malloc(cap);
    if (!buf)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    memcpy(buf, m->args[0], head);
    char *beam = buf, *slash = strchr(buf, '/');
    if (slash) {
        *slash = '\0';
        *node = buf;
        beam = slash + 1;
    }
    char *list = buf + head;
    size_t l = 0, room = cap - head;
    if (!gain)
        list[l++] = '[';
    for (size_t i = 1; i < m->n_args; i++) {
        const char *a = m->args[i];
        char *end, *e2 = NULL;
        double v = strtod(a, &end), ph = 0;
        if (delays && end != a && *end == ':') {
            ph = strtod(end + 1, &e2);
            end = e2 == end + 1 ? end : e2;
        }
        if (end == a || *end || (delays && !e2) || !isfinite(v) || !isfinite(ph)) {
            free(buf);
            return cbf_error_set(err, CBF_EINVAL, "%s value %zu: '%s' is not %s", m->name, i, a,
                                 delays ? "delay:phase (two finite numbers, such as 1e-9:0.5)"
                                        : "a finite number");
        }
        l += (size_t)snprintf(list + l, room - l, "%s%.17g", i > 1 ? ", " : "", v);
        if (delays)
            l += (size_t)snprintf(list + l, room - l, ", %.17g", ph);
    }
    snprintf(list + l, room - l, "%s", gain ? "" : "]");
    *owned = buf;
    tv[(*nt)++] = (cbf_text_kv){"beam", beam, NULL};
    tv[(*nt)++] = (cbf_text_kv){gain ? "gain" : delays ? "delays" : "weights", list, NULL};
    return CBF_OK;
}

/* katgpucbf's dsim form `?signals SIGNALS [PERIOD]`: its text has a `;`
 * after every statement, and may hold `=` (`common=wgn(0.1); common;
 * common;`), so it is told from cbf's key=value form by not starting with
 * `signals=` (the only key whose value may hold `;`) or by having no `=`. */
static bool kc_signals_form(const cbf_katcp_msg *m)
{
    if (strcmp(m->name, "signals") || m->n_args < 1 || m->n_args > 2)
        return false;
    const char *a = m->args[0];
    return !strchr(a, '=') || (strchr(a, ';') && strncmp(a, "signals=", 8) != 0);
}

/* katgpucbf's reply to ?signals (its first timestamp) and to ?time (the
 * dsim's clock, UNIX seconds): the one value alone. */
static void kc_one_value_reply(cbf_katcp_call *r, cbf_reply *reply, const char *key)
{
    json_t *v = json_object_get((json_t *)cbf_rt_reply_json(reply), key);
    char text[64];
    if (json_is_integer(v))
        snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v));
    else if (json_is_number(v))
        snprintf(text, sizeof text, "%.17g", json_number_value(v));
    else {
        cbf_katcp_reply_fmt(r, "fail", "the reply has no %s", key);
        return;
    }
    const char *a[] = {text};
    cbf_katcp_reply(r, "ok", 1, a);
}

void cbf_katcp_engine_request(cbf_katcp_call *r, void *user)
{
    cbf_katcp_engine *k = user;
    const cbf_katcp_msg *m = cbf_katcp_call_msg(r);
    if (!strcmp(m->name, "delays") && m->n_args && !strchr(m->args[0], '=')) {
        kc_delays(r, k->e);
        return;
    }
    cbf_text_kv *tv = calloc(m->n_args + 2, sizeof *tv);
    size_t nt = 0, at = 0;
    const char *node = NULL;
    char *owned = NULL;
    cbf_error err;
    cbf_error_clear(&err);
    int rc = tv ? CBF_OK : cbf_error_set(&err, CBF_ENOMEM, "out of memory");
    bool generic = true;
    for (size_t i = 0; i < m->n_args && !rc; i++)
        generic &= strchr(m->args[i], '=') != NULL;
    const bool beam = kc_beam_form(m, generic);
    const bool signals = kc_signals_form(m);
    /* katgpucbf's ?time: no arguments, the clock alone in the reply. */
    const bool time_alone = !strcmp(m->name, "time") && m->n_args == 0;
    bool positional = !strcmp(m->name, "capture-start") || !strcmp(m->name, "capture-stop") ||
                      !strcmp(m->name, "gain-all") || signals ||
                      (!strcmp(m->name, "gain") && (!generic || !m->n_args)) || beam;
    if (!rc && positional) {
        rc = beam ? kc_beam_positional(m, tv, &nt, &node, &owned, &err)
                  : kc_positional(m, tv, &nt, &node, &owned, &err);
    } else {
        for (size_t i = 0; i < m->n_args && !rc; i++) {
            char *eq = strchr(m->args[i], '=');
            if (!eq || eq == m->args[i] || strlen(m->args[i]) != m->lens[i])
                rc = cbf_error_set(&err, CBF_EINVAL, "argument %zu: expected key=value", i + 1);
            else if (*eq = '\0', !strcmp(m->args[i], "node"))
                node = eq + 1;
            else
                tv[nt++] = (cbf_text_kv){m->args[i], eq + 1, NULL};
        }
    }
    const char *name = !strcmp(m->name, "capture-start") || !strcmp(m->name, "capture-stop") ? "capture"
                       : !strcmp(m->name, "gain-all")                                       ? "gain"
                                                                                            : m->name;
    cbf_reply *reply = NULL;
    if (!rc)
        rc = cbf_rt_request_call(k->e, name, node, tv, nt, &at, &reply, &err);
    free(tv);
    free(owned);
    if (rc == CBF_ENOTSUP && !positional) {
        cbf_katcp_reply_fmt(r, "invalid", "%s (?help lists what this engine accepts)", err.msg);
        return;
    }
    if (rc) {
        cbf_katcp_reply_fmt(r, "fail", "%s", err.msg);
        return;
    }
    if (signals || time_alone) {
        kc_one_value_reply(r, reply, signals ? "at" : "time");
        cbf_rt_reply_free(reply);
        return;
    }
    if (positional && !strcmp(m->name, "gain")) {
        kc_gain_reply(r, reply);
        cbf_rt_reply_free(reply);
        return;
    }
    if (positional && !beam) {   /* as katgpucbf's gain-all and capture-start/-stop: ok alone */
        cbf_katcp_reply(r, "ok", 0, NULL);
        cbf_rt_reply_free(reply);
        return;
    }
    kc_args l = {0};
    kc_args_add(&l, "node=%s", k->g->nodes[at].name);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)cbf_rt_reply_json(reply), key, v)
    {
        char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        kc_args_add(&l, "%s=%s", key, text ? text : json_is_string(v) ? json_string_value(v) : "?");
        free(text);
    }
    kc_args_reply(r, &l);
    cbf_rt_reply_free(reply);
}
