/* katcp.c: the engine's katcp v5 front end (engine key `katcp:`), the line
 * protocol MeerKAT's CAM speaks. One thread serves every client with
 * poll(); lines are parsed by katcp_line.c.
 *
 * Built-in requests: help, watchdog, halt, log-level, version-list,
 * sensor-list, sensor-value, sensor-sampling. Any other name is a plugin
 * request, run through the same path as the ZeroMQ plane's
 * (cbf_rt_request_call): `?NAME [node=NODE] [key=value ...]`, with
 * katgpucbf's positional forms for capture-start, capture-stop and gain.
 * Sensors are the ones the ZeroMQ `sensors` request reads
 * (cbf_rt_sensors_nodes), named NODE.NAME (docs/control.md).
 *
 * Nothing a client sends can stop the thread: a malformed line gets an
 * `invalid` reply, a line longer than CBF_CONTROL_MAX_REQUEST closes that
 * client (after a #disconnect inform), a client that reads nothing back is
 * dropped once KC_MAX_OUT bytes wait for it, and one that goes away
 * mid-reply is closed quietly. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cbf/log.h"
#include "katcp.h"
#include "params_priv.h"
#include "runtime.h"

#define KC_MAX_CLIENTS 16             /* more wait in the listen backlog */
#define KC_MAX_LINE CBF_CONTROL_MAX_REQUEST   /* as the ZeroMQ plane's message cap */
#define KC_MAX_OUT (64u << 20)        /* replies waiting for a client that does not read */
#define KC_POLL_MS 100                /* how soon quit and event sampling are noticed */
#define KC_MIN_PERIOD 0.01            /* the shortest sampling period, seconds */

typedef enum { KS_NONE, KS_AUTO, KS_PERIOD, KS_EVENT } kc_strategy;
static const char *const kc_strategy_names[] = {"none", "auto", "period", "event"};

typedef struct kc_sampling {
    char *name;
    kc_strategy how;
    double period, next;   /* seconds; next: CLOCK_MONOTONIC */
    char *last;            /* value and status last sent (auto, event) */
} kc_sampling;

typedef struct kc_client {
    int fd;                /* -1: a free slot */
    char *in;
    size_t in_len, in_cap, scanned;
    cbf_katcp_buf out;
    size_t out_off;
    bool closing;          /* close once out is sent */
    kc_sampling *samp;
    size_t n_samp;
} kc_client;

typedef struct kc_sensor {
    char name[192], desc[256];
    const char *units, *type;   /* katcp type: integer or float */
    char value[40];
    const char *status;
} kc_sensor;

typedef struct kc_sensors {
    kc_sensor *s;
    size_t n, cap;
    double time;           /* UNIX seconds when read */
} kc_sensors;

struct cbf_katcp {
    cbf_engine *e;
    const cbf_graph *g;
    int lfd;
    bool v6;
    char addr[300];
    pthread_t thread;
    bool started;
    atomic_bool quit;
    kc_client cl[KC_MAX_CLIENTS];
};

/* One request being answered: where replies and informs go. */
typedef struct kc_req {
    cbf_katcp *k;
    kc_client *c;
    const cbf_katcp_msg *m;
} kc_req;

static double kc_now(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- sensors ---- */

static void kc_name(char *out, size_t n, const char *node, const char *mid, const char *key)
{
    snprintf(out, n, "%s.%s%s%s", node, mid ? mid : "", mid ? "." : "", key);
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-'))
            *p = '-';   /* katcp names take letters, digits, dots and hyphens */
}

static const char *kc_units(const char *key)
{
    size_t l = strlen(key);
    if (l > 2 && !strcmp(key + l - 2, "_s"))
        return "s";
    if (!strncmp(key, "bytes", 5))
        return "B";
    return "";
}

static kc_sensor *kc_sensor_add(kc_sensors *ss)
{
    if (ss->n == ss->cap) {
        size_t cap = ss->cap ? 2 * ss->cap : 64;
        kc_sensor *p = realloc(ss->s, cap * sizeof *p);
        if (!p)
            return NULL;
        ss->s = p;
        ss->cap = cap;
    }
    kc_sensor *s = &ss->s[ss->n++];
    memset(s, 0, sizeof *s);
    return s;
}

static void kc_sensor_put(kc_sensors *ss, const char *node, const char *plugin, const char *mid,
                            const char *key, const char *what, json_t *v)
{
    if (!json_is_number(v) && !json_is_null(v))
        return;
    kc_sensor *s = kc_sensor_add(ss);
    if (!s)
        return;
    kc_name(s->name, sizeof s->name, node, mid, key);
    snprintf(s->desc, sizeof s->desc, "%s %s%s%s of node %s (plugin %s)", what, mid ? mid : "",
             mid ? " " : "", key, node, plugin);
    s->units = kc_units(key);
    s->type = json_is_integer(v) ? "integer" : "float";
    /* Sensor status rules come later: a value read is nominal; a gauge never
     * set (null) is unknown. */
    s->status = json_is_null(v) ? "unknown" : "nominal";
    if (json_is_integer(v))
        snprintf(s->value, sizeof s->value, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(s->value, sizeof s->value, "%.17g", json_real_value(v));
    else
        snprintf(s->value, sizeof s->value, "nan");
}

/* The sensors now, flattened from the ZeroMQ plane's sensor object:
 * NODE.buffers-in, NODE.queue.PORT.fill, NODE.COUNTER, NODE.GAUGE. */
static int kc_sensors_read(cbf_katcp *k, kc_sensors *ss)
{
    ss->n = 0;
    ss->time = kc_now(CLOCK_REALTIME);
    json_t *nodes = cbf_rt_sensors_nodes(k->e);
    if (!nodes)
        return CBF_ENOMEM;
    const char *node, *key, *q;
    json_t *o, *v, *qv;
    json_object_foreach(nodes, node, o)
    {
        const char *plugin = json_string_value(json_object_get(o, "plugin"));
        plugin = plugin ? plugin : "?";
        json_object_foreach(o, key, v)
        {
            if (!strcmp(key, "queues")) {
                json_object_foreach(v, q, qv)
                {
                    char mid[160];
                    snprintf(mid, sizeof mid, "queue.%s", q);
                    kc_sensor_put(ss, node, plugin, mid, "fill", "buffers waiting in input", json_object_get(qv, "fill"));
                    kc_sensor_put(ss, node, plugin, mid, "depth", "capacity of input", json_object_get(qv, "depth"));
                }
            } else if (!strcmp(key, "counters") || !strcmp(key, "gauges")) {
                const char *ck;
                json_t *cv;
                json_object_foreach(v, ck, cv)
                kc_sensor_put(ss, node, plugin, NULL, ck, key[0] == 'c' ? "counter" : "gauge", cv);
            } else {
                kc_sensor_put(ss, node, plugin, NULL, key, "runtime count", v);
            }
        }
    }
    json_decref(nodes);
    return CBF_OK;
}

static const kc_sensor *kc_sensor_find(const kc_sensors *ss, const char *name)
{
    for (size_t i = 0; i < ss->n; i++)
        if (!strcmp(ss->s[i].name, name))
            return &ss->s[i];
    return NULL;
}

/* ---- replies ---- */

static void kc_start(kc_req *r, char type)
{
    cbf_katcp_buf_start(&r->c->out, type, r->m->name, r->m->id);
}

static void kc_end(kc_req *r) { cbf_katcp_buf_put(&r->c->out, "\n", 1); }

static void kc_reply(kc_req *r, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void kc_reply(kc_req *r, const char *status, const char *fmt, ...)
{
    kc_start(r, '!');
    cbf_katcp_buf_arg(&r->c->out, status, strlen(status));
    if (fmt) {
        char msg[CBF_ERROR_MSG_MAX + 64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        cbf_katcp_buf_arg(&r->c->out, msg, strlen(msg));
    }
    kc_end(r);
}

static void kc_inform(cbf_katcp_buf *b, const char *name, long long id, int n, const char *const *args)
{
    cbf_katcp_buf_start(b, '#', name, id);
    for (int i = 0; i < n; i++)
        cbf_katcp_buf_arg(b, args[i], strlen(args[i]));
    cbf_katcp_buf_put(b, "\n", 1);
}

static void kc_versions(cbf_katcp_buf *b, const char *inform, long long id)
{
    static const char *const v[][2] = {{"katcp-protocol", "5.0-MI"},
                                       {"katcp-library", "cbf-katcp-1.0"},
                                       {"katcp-device", "cbf"}};
    for (int i = 0; i < 3; i++)
        kc_inform(b, inform, id, 2, v[i]);
}

static void kc_sensor_line(cbf_katcp_buf *b, const char *inform, long long id, double t, const kc_sensor *s)
{
    char ts[32];
    snprintf(ts, sizeof ts, "%.6f", t);
    const char *a[] = {ts, "1", s->name, s->status, s->value};
    kc_inform(b, inform, id, 5, a);
}

/* ---- built-in requests ---- */

static bool kc_want_args(kc_req *r, size_t lo, size_t hi)
{
    if (r->m->n_args >= lo && r->m->n_args <= hi)
        return true;
    kc_reply(r, "fail", "?%s takes %zu to %zu arguments, got %zu", r->m->name, lo, hi, r->m->n_args);
    return false;
}

static void kc_watchdog(kc_req *r)
{
    if (kc_want_args(r, 0, 0))
        kc_reply(r, "ok", NULL);
}

static void kc_halt(kc_req *r)
{
    if (!kc_want_args(r, 0, 0))
        return;
    /* The reply goes first; the graph then drains as on SIGTERM. */
    kc_reply(r, "ok", NULL);
    cbf_log_info("halt requested over katcp");
    cbf_engine_stop(r->k->e);
}

static void kc_version_list(kc_req *r)
{
    if (!kc_want_args(r, 0, 0))
        return;
    kc_versions(&r->c->out, "version-list", r->m->id);
    kc_reply(r, "ok", "3");
}

static void kc_log_level(kc_req *r)
{
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    if (!kc_want_args(r, 0, 1))
        return;
    if (r->m->n_args) {
        const char *a = r->m->args[0];
        cbf_log_level l;
        /* katcp's other levels, on the nearest of ours. */
        if (!strcmp(a, "all"))
            l = CBF_LOG_TRACE;
        else if (!strcmp(a, "fatal") || !strcmp(a, "off"))
            l = CBF_LOG_ERROR;
        else if (cbf_log_level_parse(a, &l)) {
            kc_reply(r, "fail", "unknown level '%s' (all, trace, debug, info, warn, error, fatal, off)", a);
            return;
        }
        cbf_log_set_level(l);
        cbf_log_info("log level set to %s over katcp", names[l]);
    }
    kc_start(r, '!');
    cbf_katcp_buf_arg(&r->c->out, "ok", 2);
    const char *now = names[cbf_log_get_level()];
    cbf_katcp_buf_arg(&r->c->out, now, strlen(now));
    kc_end(r);
}

static const char *const help_texts[][2] = {
    {"help", "?help [name]: the requests this engine accepts, or one of them"},
    {"watchdog", "?watchdog: answers ok (a liveness check)"},
    {"halt", "?halt: drain the pipeline and exit 0, as on SIGTERM"},
    {"log-level", "?log-level [level]: read or set the log level (all, trace, debug, info, warn, error, "
                  "fatal, off)"},
    {"version-list", "?version-list: protocol, library and device versions"},
    {"sensor-list", "?sensor-list [name|/regex/]: sensors with description, units and type"},
    {"sensor-value", "?sensor-value [name|/regex/]: sensors' timestamp, status and value"},
    {"sensor-sampling", "?sensor-sampling name [auto|event|none|period SECONDS]: #sensor-status informs on "
                        "this connection"},
};
static const size_t n_help = sizeof help_texts / sizeof help_texts[0];

static void kc_help(kc_req *r)
{
    if (!kc_want_args(r, 0, 1))
        return;
    const char *want = r->m->n_args ? r->m->args[0] : NULL;
    size_t n = 0;
    cbf_katcp_buf *b = &r->c->out;
    for (size_t i = 0; i < n_help; i++)
        if (!want || !strcmp(want, help_texts[i][0])) {
            kc_inform(b, "help", r->m->id, 2, help_texts[i]);
            n++;
        }
    const cbf_graph *g = r->k->g;
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
                l += snprintf(text + l, sizeof text - (size_t)l, " %s=%s", rd->args[a].name,
                              rd->args[a].def ? rd->args[a].def : "(required)");
            if (l > 0 && (size_t)l < sizeof text)
                snprintf(text + l, sizeof text - (size_t)l, ")");
            const char *a[] = {rd->name, text};
            kc_inform(b, "help", r->m->id, 2, a);
            n++;
        }
    }
    if (want && !n)
        kc_reply(r, "fail", "unknown request '%s'", want);
    else
        kc_reply(r, "ok", "%zu", n);
}

/* Picks the sensors of ss named by the argument: one name, /regex/ (POSIX
 * extended), or all when there is none. false (and the reply sent) for a
 * bad expression or an unknown name. */
static bool kc_match(kc_req *r, kc_sensors *ss, bool *pick)
{
    const char *a = r->m->n_args ? r->m->args[0] : NULL;
    size_t al = a ? r->m->lens[0] : 0;
    regex_t re;
    bool is_re = a && al >= 2 && a[0] == '/' && a[al - 1] == '/';
    if (is_re) {
        char *pat = strndup(a + 1, al - 2);
        int rc = pat ? regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) : REG_ESPACE;
        free(pat);
        if (rc) {
            kc_reply(r, "fail", "'%s' is not a valid regular expression", a);
            return false;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < ss->n; i++) {
        pick[i] = !a || (is_re ? !regexec(&re, ss->s[i].name, 0, NULL, 0) : !strcmp(a, ss->s[i].name));
        n += pick[i];
    }
    if (is_re)
        regfree(&re);
    if (a && !is_re && !n) {
        kc_reply(r, "fail", "unknown sensor '%s'", a);
        return false;
    }
    return true;
}

static void kc_sensor_list_or_value(kc_req *r, bool value)
{
    if (!kc_want_args(r, 0, 1))
        return;
    kc_sensors ss = {0};
    bool *pick = NULL;
    if (kc_sensors_read(r->k, &ss) || !(pick = calloc(ss.n + 1, sizeof *pick))) {
        kc_reply(r, "fail", "out of memory");
    } else if (kc_match(r, &ss, pick)) {
        size_t n = 0;
        for (size_t i = 0; i < ss.n; i++) {
            if (!pick[i])
                continue;
            n++;
            const kc_sensor *s = &ss.s[i];
            if (value) {
                kc_sensor_line(&r->c->out, "sensor-value", r->m->id, ss.time, s);
            } else {
                const char *a[] = {s->name, s->desc, s->units, s->type};
                kc_inform(&r->c->out, "sensor-list", r->m->id, 4, a);
            }
        }
        kc_reply(r, "ok", "%zu", n);
    }
    free(pick);
    free(ss.s);
}

static void kc_sensor_list(kc_req *r) { kc_sensor_list_or_value(r, false); }
static void kc_sensor_value(kc_req *r) { kc_sensor_list_or_value(r, true); }

static kc_sampling *kc_sampling_of(kc_client *c, const char *name)
{
    for (size_t i = 0; i < c->n_samp; i++)
        if (!strcmp(c->samp[i].name, name))
            return &c->samp[i];
    return NULL;
}

static void kc_sampling_drop(kc_client *c, kc_sampling *s)
{
    free(s->name);
    free(s->last);
    *s = c->samp[--c->n_samp];
}

static void kc_sensor_sampling(kc_req *r)
{
    if (!kc_want_args(r, 1, 3))
        return;
    kc_sensors ss = {0};
    const char *name = r->m->args[0];
    const kc_sensor *s = NULL;
    int rc = kc_sensors_read(r->k, &ss);
    if (rc || !(s = kc_sensor_find(&ss, name))) {
        kc_reply(r, "fail", "%s '%s'", rc ? "out of memory reading sensor" : "unknown sensor", name);
        free(ss.s);
        return;
    }
    kc_client *c = r->c;
    kc_sampling *cur = kc_sampling_of(c, name);
    if (r->m->n_args > 1) {
        const char *how = r->m->args[1];
        int st = -1;
        double period = 0;
        for (int i = 0; i < 4; i++)
            if (!strcmp(how, kc_strategy_names[i]))
                st = i;
        if (st < 0) {
            kc_reply(r, "fail", "strategy '%s' is not supported here (auto, period SECONDS, event, none)", how);
            free(ss.s);
            return;
        }
        char *end = NULL;
        if (st == KS_PERIOD) {
            period = r->m->n_args == 3 ? strtod(r->m->args[2], &end) : NAN;
            if (!end || *end || !(period >= KC_MIN_PERIOD && period <= 1e6)) {
                kc_reply(r, "fail", "period: expected seconds from %g to 1e6", KC_MIN_PERIOD);
                free(ss.s);
                return;
            }
        } else if (r->m->n_args != 2) {
            kc_reply(r, "fail", "strategy '%s' takes no parameter", how);
            free(ss.s);
            return;
        }
        if (cur && st == KS_NONE) {
            kc_sampling_drop(c, cur);
            cur = NULL;
        } else if (st != KS_NONE) {
            if (!cur) {
                kc_sampling *p = realloc(c->samp, (c->n_samp + 1) * sizeof *p);
                char *nm = strdup(name);
                if (!p || !nm) {
                    if (p)
                        c->samp = p;
                    free(nm);
                    kc_reply(r, "fail", "out of memory");
                    free(ss.s);
                    return;
                }
                c->samp = p;
                cur = &c->samp[c->n_samp++];
                memset(cur, 0, sizeof *cur);
                cur->name = nm;
            }
            cur->how = (kc_strategy)st;
            cur->period = period;
            cur->next = kc_now(CLOCK_MONOTONIC) + period;
            free(cur->last);
            cur->last = NULL;
        }
    }
    kc_start(r, '!');
    cbf_katcp_buf_arg(&c->out, "ok", 2);
    cbf_katcp_buf_arg(&c->out, name, strlen(name));
    const char *how = kc_strategy_names[cur ? cur->how : KS_NONE];
    cbf_katcp_buf_arg(&c->out, how, strlen(how));
    if (cur && cur->how == KS_PERIOD)
        cbf_katcp_buf_argf(&c->out, "%g", cur->period);
    kc_end(r);
    /* A new strategy starts with the value now, as katcp servers do. */
    if (r->m->n_args > 1 && cur) {
        kc_sensor_line(&c->out, "sensor-status", -1, ss.time, s);
        char last[sizeof s->value + 16];
        snprintf(last, sizeof last, "%s %s", s->status, s->value);
        cur->last = strdup(last);
    }
    free(ss.s);
}

/* ---- plugin requests ---- */

/* katgpucbf's positional forms, as the generic key=value ones. */
static int kc_positional(const cbf_katcp_msg *m, cbf_text_kv *tv, size_t *nt, const char **node,
                         char **owned, cbf_error *err)
{
    bool start = !strcmp(m->name, "capture-start");
    if (start || !strcmp(m->name, "capture-stop")) {
        if (m->n_args != 1)
            return cbf_error_set(err, CBF_EINVAL, "?%s takes one argument: the stream (node)", m->name);
        *node = m->args[0];
        tv[(*nt)++] = (cbf_text_kv){"action", start ? "start" : "stop", NULL};
        return CBF_OK;
    }
    /* ?gain stream input values...: each value real or complex (a+bj), sent
     * to fft_post's gain as [re, im] pairs (one pair: every channel). */
    if (m->n_args < 3)
        return cbf_error_set(err, CBF_EINVAL, "?gain stream input values...: at least one value (this "
                             "engine cannot report the current gains)");
    *node = m->args[0];
    tv[(*nt)++] = (cbf_text_kv){"pol", m->args[1], NULL};
    size_t nv = m->n_args - 2, cap = nv * 64 + 3, l = 0;
    char *list = malloc(cap);
    if (!list)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    list[l++] = '[';
    for (size_t i = 0; i < nv; i++) {
        const char *a = m->args[i + 2];
        char *end;
        double re = strtod(a, &end), im = 0;
        if (end != a && (*end == '+' || *end == '-') && end[1] != '\0') {
            char *e2;
            im = strtod(end, &e2);
            end = *e2 == 'j' && e2 != end ? e2 + 1 : end;
        } else if (*end == 'j' && end != a) {
            im = re;
            re = 0;
            end++;
        }
        if (end == a || *end || !isfinite(re) || !isfinite(im)) {
            free(list);
            return cbf_error_set(err, CBF_EINVAL, "gain value %zu: '%s' is not a finite real or complex "
                                 "number (such as 1.5 or 0.5-2j)", i + 1, a);
        }
        l += (size_t)snprintf(list + l, cap - l, "%s%.17g, %.17g", i ? ", " : "", re, im);
    }
    snprintf(list + l, cap - l, "]");
    *owned = list;
    tv[(*nt)++] = (cbf_text_kv){"values", list, NULL};
    return CBF_OK;
}

static void kc_plugin(kc_req *r)
{
    const cbf_katcp_msg *m = r->m;
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
    bool positional = !strcmp(m->name, "capture-start") || !strcmp(m->name, "capture-stop") ||
                      (!strcmp(m->name, "gain") && (!generic || !m->n_args));
    if (!rc && positional) {
        rc = kc_positional(m, tv, &nt, &node, &owned, &err);
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
                                                                                          : m->name;
    cbf_reply *reply = NULL;
    if (!rc)
        rc = cbf_rt_request_call(r->k->e, name, node, tv, nt, &at, &reply, &err);
    free(tv);
    free(owned);
    if (rc == CBF_ENOTSUP && !positional) {
        kc_reply(r, "invalid", "%s (?help lists what this engine accepts)", err.msg);
        return;
    }
    if (rc) {
        kc_reply(r, "fail", "%s", err.msg);
        return;
    }
    cbf_katcp_buf *b = &r->c->out;
    kc_start(r, '!');
    cbf_katcp_buf_arg(b, "ok", 2);
    cbf_katcp_buf_argf(b, "node=%s", r->k->g->nodes[at].name);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)cbf_rt_reply_json(reply), key, v)
    {
        char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        cbf_katcp_buf_argf(b, "%s=%s", key, text ? text : json_is_string(v) ? json_string_value(v) : "?");
        free(text);
    }
    kc_end(r);
    cbf_rt_reply_free(reply);
}

static const struct kc_builtin {
    const char *name;
    void (*fn)(kc_req *r);
} kc_builtins[] = {
    {"help", kc_help},           {"watchdog", kc_watchdog},
    {"halt", kc_halt},           {"log-level", kc_log_level},
    {"version-list", kc_version_list}, {"sensor-list", kc_sensor_list},
    {"sensor-value", kc_sensor_value}, {"sensor-sampling", kc_sensor_sampling},
};


/* ---- connections ---- */

static void kc_handle_line(cbf_katcp *k, kc_client *c, const char *line, size_t len)
{
    if (len == 0)
        return;
    cbf_katcp_msg m;
    cbf_error err;
    cbf_error_clear(&err);
    int rc = cbf_katcp_parse(line, len, &m, &err);
    kc_req r = {k, c, &m};
    if (rc) {
        /* Echo the name when it was read, as a reply to that request. */
        if (m.type == '?' && m.name[0])
            kc_reply(&r, "invalid", "%s", err.msg);
        else {
            const char *a[] = {"warn", "0", "katcp", err.msg};
            char ts[32];
            snprintf(ts, sizeof ts, "%.6f", kc_now(CLOCK_REALTIME));
            a[1] = ts;
            kc_inform(&c->out, "log", -1, 4, a);
        }
    } else if (m.type == '?') {
        const struct kc_builtin *b = NULL;
        for (size_t i = 0; i < sizeof kc_builtins / sizeof kc_builtins[0] && !b; i++)
            if (!strcmp(m.name, kc_builtins[i].name))
                b = &kc_builtins[i];
        if (b)
            b->fn(&r);
        else
            kc_plugin(&r);
    }   /* informs and replies from a client are not for us: ignored */
    cbf_katcp_msg_free(&m);
}

static void kc_client_close(kc_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    cbf_katcp_buf_free(&c->out);
    for (size_t i = 0; i < c->n_samp; i++) {
        free(c->samp[i].name);
        free(c->samp[i].last);
    }
    free(c->samp);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static void kc_accept(cbf_katcp *k)
{
    int fd = accept4(k->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);   /* _GNU_SOURCE */
    if (fd < 0)
        return;
    kc_client *c = NULL;
    for (int i = 0; i < KC_MAX_CLIENTS && !c; i++)
        if (k->cl[i].fd < 0)
            c = &k->cl[i];
    if (!c) {
        static const char full[] = "#disconnect too\\_many\\_clients\n";
        (void)!send(fd, full, sizeof full - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    c->fd = fd;
    kc_versions(&c->out, "version-connect", -1);
}

static void kc_disconnect(kc_client *c, const char *why)
{
    const char *a[] = {why};
    kc_inform(&c->out, "disconnect", -1, 1, a);
    c->closing = true;
}

static void kc_read(cbf_katcp *k, kc_client *c)
{
    for (;;) {
        if (c->in_cap - c->in_len < 65536) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
            if (cap > KC_MAX_LINE + 65536)
                cap = KC_MAX_LINE + 65536;
            char *p = cap > c->in_cap ? realloc(c->in, cap) : NULL;
            if (!p) {
                kc_disconnect(c, "out of memory");
                return;
            }
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t got = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (got == 0) {
            c->closing = true;   /* it sends no more; what it asked is still answered */
            return;
        }
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            kc_client_close(c);   /* gone: nothing more to answer */
            return;
        }
        if (got < 0)
            return;
        c->in_len += (size_t)got;
        /* Every whole line, in order. */
        size_t start = 0;
        for (size_t i = c->scanned; i < c->in_len; i++) {
            if (c->in[i] != '\n' && c->in[i] != '\r')
                continue;
            kc_handle_line(k, c, c->in + start, i - start);
            start = i + 1;
        }
        memmove(c->in, c->in + start, c->in_len - start);
        c->in_len -= start;
        c->scanned = c->in_len;
        if (c->in_len > KC_MAX_LINE) {
            char why[96];
            snprintf(why, sizeof why, "line longer than %d bytes", KC_MAX_LINE);
            kc_disconnect(c, why);
            return;
        }
        if (c->out.len - c->out_off > KC_MAX_OUT) {
            kc_client_close(c);
            return;
        }
    }
}

static void kc_write(kc_client *c)
{
    while (c->fd >= 0 && c->out_off < c->out.len) {
        ssize_t put = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            kc_client_close(c);   /* went away mid-reply */
            return;
        }
        c->out_off += (size_t)put;
    }
    if (c->out.oom || (c->fd >= 0 && c->out.len - c->out_off > KC_MAX_OUT)) {
        kc_client_close(c);
        return;
    }
    if (c->out_off == c->out.len) {
        c->out.len = c->out_off = 0;
        if (c->closing)
            kc_client_close(c);
    }
}

/* Sends what the sampling strategies call for now; the time of the next
 * period that falls due, in *next (CLOCK_MONOTONIC). */
static void kc_sample(cbf_katcp *k, kc_sensors *ss, double *next)
{
    bool any = false;
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        any |= k->cl[i].fd >= 0 && k->cl[i].n_samp > 0;
    if (!any || kc_sensors_read(k, ss))
        return;
    double now = kc_now(CLOCK_MONOTONIC);
    for (int i = 0; i < KC_MAX_CLIENTS; i++) {
        kc_client *c = &k->cl[i];
        for (size_t j = 0; c->fd >= 0 && j < c->n_samp; j++) {
            kc_sampling *sp = &c->samp[j];
            const kc_sensor *s = kc_sensor_find(ss, sp->name);
            if (!s)
                continue;
            bool send = false;
            if (sp->how == KS_PERIOD) {
                if (now >= sp->next) {
                    send = true;
                    sp->next += sp->period;
                    if (sp->next <= now)
                        sp->next = now + sp->period;   /* after a stall, from now */
                }
                if (sp->next < *next)
                    *next = sp->next;
            } else {
                char last[sizeof s->value + 16];
                snprintf(last, sizeof last, "%s %s", s->status, s->value);
                if (!sp->last || strcmp(last, sp->last)) {
                    send = true;
                    free(sp->last);
                    sp->last = strdup(last);
                }
            }
            if (send)
                kc_sensor_line(&c->out, "sensor-status", -1, ss->time, s);
        }
    }
}

static void *kc_main(void *arg)
{
    cbf_katcp *k = arg;
    cbf_log_set_thread_name("katcp");
    kc_sensors ss = {0};
    struct pollfd pf[KC_MAX_CLIENTS + 1];
    while (!atomic_load(&k->quit)) {
        double next = kc_now(CLOCK_MONOTONIC) + 1e-3 * KC_POLL_MS;
        kc_sample(k, &ss, &next);
        for (int i = 0; i < KC_MAX_CLIENTS; i++)
            if (k->cl[i].fd >= 0)
                kc_write(&k->cl[i]);
        pf[0] = (struct pollfd){.fd = k->lfd, .events = POLLIN};
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &k->cl[i];
            short ev = (short)((c->closing ? 0 : POLLIN) | (c->out_off < c->out.len ? POLLOUT : 0));
            pf[i + 1] = (struct pollfd){.fd = c->fd >= 0 ? c->fd : -1, .events = ev};
        }
        double wait = next - kc_now(CLOCK_MONOTONIC);
        int ms = wait <= 0 ? 0 : (int)(wait * 1e3) + 1;
        if (poll(pf, KC_MAX_CLIENTS + 1, ms) <= 0)
            continue;
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &k->cl[i];
            if (c->fd < 0 || pf[i + 1].fd != c->fd)
                continue;
            short rev = pf[i + 1].revents;
            if (c->closing && (rev & (POLLHUP | POLLERR)))
                kc_client_close(c);
            else if (rev & (POLLIN | POLLHUP | POLLERR))
                kc_read(k, c);
            if (c->fd >= 0)
                kc_write(c);
        }
        if (pf[0].revents & POLLIN)
            kc_accept(k);
    }
    free(ss.s);
    return NULL;
}

int cbf_rt_katcp_open(cbf_engine *e, cbf_katcp **out, cbf_error *err)
{
    *out = NULL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    if (!g->engine.katcp)
        return CBF_OK;
    cbf_katcp *k = calloc(1, sizeof *k);
    if (!k)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: out of memory");
    k->e = e;
    k->g = g;
    atomic_init(&k->quit, false);
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        k->cl[i].fd = -1;
    int rc = cbf_rt_tcp_listen(g->engine.katcp, "katcp", g->engine.katcp_where, KC_MAX_CLIENTS,
                               "change gains and delays, stop captures and halt the engine", &k->lfd,
                               &k->v6, k->addr, sizeof k->addr, err);
    if (rc) {
        free(k);
        return rc;
    }
    fcntl(k->lfd, F_SETFL, fcntl(k->lfd, F_GETFL) | O_NONBLOCK);
    cbf_log_info("katcp: requests on %s", k->addr);
    *out = k;
    return CBF_OK;
}

int cbf_rt_katcp_start(cbf_katcp *k, cbf_error *err)
{
    if (pthread_create(&k->thread, NULL, kc_main, k) != 0)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: cannot start its thread");
    k->started = true;
    return CBF_OK;
}

void cbf_rt_katcp_close(cbf_katcp *k)
{
    if (!k)
        return;
    if (k->started) {
        atomic_store(&k->quit, true);
        pthread_join(k->thread, NULL);
    }
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        if (k->cl[i].fd >= 0) {
            /* Best effort: a client that reads sees why the line went quiet. */
            kc_disconnect(&k->cl[i], "the engine is stopping");
            kc_write(&k->cl[i]);
            kc_client_close(&k->cl[i]);
        }
    close(k->lfd);
    free(k);
}
