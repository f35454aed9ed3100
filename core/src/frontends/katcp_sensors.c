/* katcp_sensors.c: the katcp front end's sensors, read from the object
 * the ZeroMQ `sensors` request answers (cbf_fe_sensors_nodes) and named
 * NODE.NAME; ?sensor-list, ?sensor-value, ?sensor-sampling and the
 * #sensor-status informs the strategies call for. */
#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "katcp_server.h"
#include "sensors_json.h"

static const char *const kc_strategy_names[] = {"none", "auto", "period", "event"};

/* NODE.NAME: the node as the YAML spells it (so `?gain node=fft_post` and
 * `fft_post.batches` agree), then the sensor's own name in katcp's style,
 * '_' and anything but letters, digits, dots and hyphens as '-'. */
static void kc_name(char *out, size_t n, const char *node, const char *key)
{
    int at = snprintf(out, n, "%s.", node);
    if (at < 0 || (size_t)at >= n)
        return;
    snprintf(out + at, n - (size_t)at, "%s", key);
    for (char *p = out + at; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-'))
            *p = '-';
}

/* Units from the name where the plugin gave none: the suffix and prefix
 * conventions its counters and gauges follow. */
static const char *kc_units(const char *key)
{
    size_t l = strlen(key);
    if (l > 2 && !strcmp(key + l - 2, "_s"))
        return "s";
    if (!strncmp(key, "bytes", 5))
        return "B";
    if (strstr(key, "dbfs"))
        return "dBFS";
    if (strstr(key, "_ms_") || (l > 3 && !strcmp(key + l - 3, "_ms")))
        return "ms";
    if (strstr(key, "unixtime"))
        return "s";
    return "";
}

/* The runtime's own sensors of every node (control.c's sensor object). */
static const char *const kc_runtime_docs[][3] = {
    {"plugin", "", "the plugin this node runs"},
    {"buffers_in", "", "buffers this node has taken from its inputs"},
    {"buffers_out", "", "buffers this node has passed on"},
    {"bytes_out", "B", "bytes in the buffers this node has passed on"},
    {"busy_s", "s", "time this node's thread has spent working"},
    {"wait_input_s", "s", "time this node has waited for input"},
    {"wait_output_s", "s", "time this node has waited for room downstream (back-pressure)"},
};

static const char *kc_status_word(const char *st)
{
    static const char *const words[] = {"unknown", "nominal", "warn", "error"};
    for (size_t i = 0; i < 4; i++)
        if (!strcmp(st, words[i]))
            return words[i];
    return "unknown";
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

static void kc_sensor_put(kc_sensors *ss, const char *name, const char *desc, const char *units, json_t *v,
                          json_t *status, json_t *updated)
{
    if (!json_is_number(v) && !json_is_null(v) && !json_is_string(v))
        return;
    kc_sensor *s = kc_sensor_add(ss);
    if (!s)
        return;
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->desc, sizeof s->desc, "%s", desc);
    s->units = units;
    s->type = json_is_integer(v) ? "integer" : json_is_string(v) ? "string" : "float";
    /* The core's status (sensor.c) where it gives one; the runtime's own
     * counts and queue fills are nominal, a gauge never set unknown. */
    const char *st = json_string_value(status);
    s->status = st ? kc_status_word(st) : json_is_null(v) ? "unknown" : "nominal";
    s->updated = json_is_number(updated) ? json_number_value(updated) : ss->time;
    char num[40];
    if (json_is_integer(v))
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
    else
        snprintf(num, sizeof num, "nan");
    s->value = strdup(json_is_string(v) ? json_string_value(v) : num);
    if (!s->value)
        ss->n--;
}

/* A queue's name without its node, [i] as i: "post.in" -> "in",
 * "sink.in[0]" -> "in0". */
static void kc_port_name(char *out, size_t n, const char *node, const char *queue)
{
    size_t nl = strlen(node);
    const char *q = !strncmp(queue, node, nl) && queue[nl] == '.' ? queue + nl + 1 : queue;
    size_t o = 0;
    for (; *q && o + 1 < n; q++)
        if (*q != '[' && *q != ']')
            out[o++] = *q;
    out[o] = '\0';
}

/* One node's sensors, from its part of the sensor object. */
static void kc_node_sensors(kc_sensors *ss, cbf_node *nd, const char *node, json_t *o)
{
    const char *plugin = json_string_value(json_object_get(o, "plugin"));
    plugin = plugin ? plugin : "?";
    json_t *status = json_object_get(o, "status"), *updated = json_object_get(o, "updated");
    const char *key;
    json_t *v;
    char name[192], desc[256], mid[160];
    json_object_foreach(o, key, v)
    {
        if (!strcmp(key, "queues")) {
            const char *q;
            json_t *qv;
            json_object_foreach(v, q, qv)
            {
                char port[128];
                kc_port_name(port, sizeof port, node, q);
                snprintf(mid, sizeof mid, "%s.queue-fill", port);
                kc_name(name, sizeof name, node, mid);
                snprintf(desc, sizeof desc, "buffers waiting in the queue of input %s", port);
                kc_sensor_put(ss, name, desc, "", json_object_get(qv, "fill"), NULL, NULL);
                snprintf(mid, sizeof mid, "%s.queue-depth", port);
                kc_name(name, sizeof name, node, mid);
                snprintf(desc, sizeof desc, "buffers the queue of input %s holds at most", port);
                kc_sensor_put(ss, name, desc, "", json_object_get(qv, "depth"), NULL, NULL);
            }
        } else if (!strcmp(key, "counters") || !strcmp(key, "gauges") || !strcmp(key, "texts")) {
            const char *ck;
            json_t *cv;
            const bool gauge = key[0] == 'g', text = key[0] == 't';
            json_object_foreach(v, ck, cv)
            {
                const char *units = NULL, *doc = NULL;
                if (nd && !text)
                    cbf_rt_sensor_about(nd, ck, gauge, &units, &doc);
                if (doc && doc[0]) {
                    snprintf(desc, sizeof desc, "%s", doc);
                } else {
                    /* none given: the name in words, and whose it is */
                    snprintf(desc, sizeof desc, "%s (%s of plugin %s)", ck,
                             text ? "text" : gauge ? "value" : "count", plugin);
                    for (char *p = desc; *p && *p != ' '; p++)
                        *p = *p == '_' || *p == '.' ? ' ' : *p;
                }
                kc_name(name, sizeof name, node, ck);
                kc_sensor_put(ss, name, desc, units && units[0] ? units : kc_units(ck), cv,
                              json_object_get(status, ck), json_object_get(updated, ck));
            }
        } else if (strcmp(key, "status") && strcmp(key, "updated")) {
            const char *units = kc_units(key), *doc = NULL;
            for (size_t i = 0; i < sizeof kc_runtime_docs / sizeof kc_runtime_docs[0]; i++)
                if (!strcmp(key, kc_runtime_docs[i][0])) {
                    units = kc_runtime_docs[i][1];
                    doc = kc_runtime_docs[i][2];
                }
            snprintf(desc, sizeof desc, "%s", doc ? doc : key);
            kc_name(name, sizeof name, node, key);
            kc_sensor_put(ss, name, desc, units, v, NULL, NULL);
        }
    }
}

void cbf_katcp_sensors_free(kc_sensors *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        free(ss->s[i].value);
    ss->n = 0;
    free(ss->s);
    ss->s = NULL;
    ss->cap = 0;
}

/* The sensors now, flattened from the ZeroMQ plane's sensor object:
 * NODE.buffers-in, NODE.PORT.queue-fill, NODE.COUNTER, NODE.GAUGE. */
static int kc_sensors_read(cbf_katcp *k, kc_sensors *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        free(ss->s[i].value);
    ss->n = 0;
    ss->time = cbf_katcp_now(CLOCK_REALTIME);
    json_t *nodes = cbf_fe_sensors_nodes(k->e, NULL, 0.0, false);
    if (!nodes)
        return CBF_ENOMEM;
    const cbf_graph *g = k->g;
    const char *node;
    json_t *o;
    json_object_foreach(nodes, node, o)
    {
        cbf_node *nd = NULL;
        for (size_t i = 0; i < g->n_nodes && !nd; i++)
            if (!strcmp(g->nodes[i].name, node))
                nd = cbf_rt_engine_node(k->e, i);
        kc_node_sensors(ss, nd, node, o);
    }
    json_decref(nodes);
    /* katgpucbf's device-status: ok, degraded or fail, from the worst
     * sensor status of the engine */
    kc_sensor *d = kc_sensor_add(ss);
    if (d) {
        cbf_status st = cbf_rt_engine_status(k->e, ss->time);
        snprintf(d->name, sizeof d->name, "device-status");
        snprintf(d->desc, sizeof d->desc, "engine health: ok, degraded (a sensor warns) or fail (a sensor "
                 "is in error)");
        d->units = "";
        d->type = "discrete";
        d->status = kc_status_word(cbf_status_name(st));
        d->updated = ss->time;
        d->value = strdup(cbf_rt_device_status_word(st));
        if (!d->value)
            ss->n--;
    }
    return CBF_OK;
}

static const kc_sensor *kc_sensor_find(const kc_sensors *ss, const char *name)
{
    for (size_t i = 0; i < ss->n; i++)
        if (!strcmp(ss->s[i].name, name))
            return &ss->s[i];
    return NULL;
}

/* What an event strategy compares: status and value (malloc'd). */
static char *kc_last(const kc_sensor *s)
{
    size_t n = strlen(s->status) + strlen(s->value) + 2;
    char *l = malloc(n);
    if (l)
        snprintf(l, n, "%s %s", s->status, s->value);
    return l;
}

/* The sensor's own time: when its value last changed (katcp v5). */
void cbf_katcp_sensor_line(cbf_katcp_buf *b, const char *inform, long long id, const kc_sensor *s)
{
    char ts[32];
    snprintf(ts, sizeof ts, "%.6f", s->updated);
    const char *a[] = {ts, "1", s->name, s->status, s->value};
    cbf_katcp_inform(b, inform, id, 5, a);
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
    /* Bounded, so no expression holds the server: POSIX matching is
     * polynomial in the pattern without intervals and back-references,
     * which can blow it up ((a{255}){255}... or (a*)*\1). */
    if (is_re && al - 2 > KC_MAX_REGEX) {
        cbf_katcp_reply(r, "fail", "regular expression longer than %d characters", KC_MAX_REGEX);
        return false;
    }
    for (size_t i = 1; is_re && i + 1 < al; i++) {
        if (a[i] == '\\' && i + 2 < al && a[i + 1] >= '1' && a[i + 1] <= '9') {
            cbf_katcp_reply(r, "fail", "'%s': back-references (\\%c) are not taken here", a, a[i + 1]);
            return false;
        }
        if (a[i] == '{' && (i < 2 || a[i - 1] != '\\')) {
            cbf_katcp_reply(r, "fail", "'%s': intervals {m,n} are not taken here (repeat the atom, or use * + ?)", a);
            return false;
        }
        i += a[i] == '\\';   /* an escaped character is itself */
    }
    if (is_re) {
        char *pat = strndup(a + 1, al - 2);
        int rc = pat ? regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) : REG_ESPACE;
        free(pat);
        if (rc) {
            cbf_katcp_reply(r, "fail", "'%s' is not a valid regular expression", a);
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
        cbf_katcp_reply(r, "fail", "unknown sensor '%s'", a);
        return false;
    }
    return true;
}

static void kc_sensor_list_or_value(kc_req *r, bool value)
{
    if (!cbf_katcp_want_args(r, 0, 1))
        return;
    kc_sensors ss = {0};
    bool *pick = NULL;
    if (kc_sensors_read(r->k, &ss) || !(pick = calloc(ss.n + 1, sizeof *pick))) {
        cbf_katcp_reply(r, "fail", "out of memory");
    } else if (kc_match(r, &ss, pick)) {
        size_t n = 0;
        for (size_t i = 0; i < ss.n; i++) {
            if (!pick[i])
                continue;
            n++;
            const kc_sensor *s = &ss.s[i];
            if (value) {
                cbf_katcp_sensor_line(r->out, "sensor-value", r->m->id, s);
            } else {
                /* a discrete sensor lists its values (katcp v5) */
                const char *a[] = {s->name, s->desc, s->units, s->type, "ok", "degraded", "fail"};
                cbf_katcp_inform(r->out, "sensor-list", r->m->id, strcmp(s->type, "discrete") ? 4 : 7, a);
            }
        }
        cbf_katcp_reply(r, "ok", "%zu", n);
    }
    free(pick);
    cbf_katcp_sensors_free(&ss);
}

void cbf_katcp_sensor_list(kc_req *r) { kc_sensor_list_or_value(r, false); }
void cbf_katcp_sensor_value(kc_req *r) { kc_sensor_list_or_value(r, true); }

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

void cbf_katcp_sensor_sampling(kc_req *r)
{
    if (!cbf_katcp_want_args(r, 1, 3))
        return;
    kc_sensors ss = {0};
    const char *name = r->m->args[0];
    const kc_sensor *s = NULL;
    int rc = kc_sensors_read(r->k, &ss);
    if (rc || !(s = kc_sensor_find(&ss, name))) {
        cbf_katcp_reply(r, "fail", "%s '%s'", rc ? "out of memory reading sensor" : "unknown sensor", name);
        cbf_katcp_sensors_free(&ss);
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
            cbf_katcp_reply(r, "fail", "strategy '%s' is not supported here (auto, period SECONDS, event, none)", how);
            cbf_katcp_sensors_free(&ss);
            return;
        }
        char *end = NULL;
        if (st == KS_PERIOD) {
            period = r->m->n_args == 3 ? strtod(r->m->args[2], &end) : NAN;
            if (!end || *end || !(period >= KC_MIN_PERIOD && period <= 1e6)) {
                cbf_katcp_reply(r, "fail", "period: expected seconds from %g to 1e6", KC_MIN_PERIOD);
                cbf_katcp_sensors_free(&ss);
                return;
            }
        } else if (r->m->n_args != 2) {
            cbf_katcp_reply(r, "fail", "strategy '%s' takes no parameter", how);
            cbf_katcp_sensors_free(&ss);
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
                    cbf_katcp_reply(r, "fail", "out of memory");
                    cbf_katcp_sensors_free(&ss);
                    return;
                }
                c->samp = p;
                cur = &c->samp[c->n_samp++];
                memset(cur, 0, sizeof *cur);
                cur->name = nm;
            }
            cur->how = (kc_strategy)st;
            cur->period = period;
            cur->next = cbf_katcp_now(CLOCK_MONOTONIC) + period;
            free(cur->last);
            cur->last = NULL;
        }
    }
    cbf_katcp_reply_begin(r, '!');
    cbf_katcp_buf_arg(&c->out, "ok", 2);
    cbf_katcp_buf_arg(&c->out, name, strlen(name));
    const char *how = kc_strategy_names[cur ? cur->how : KS_NONE];
    cbf_katcp_buf_arg(&c->out, how, strlen(how));
    if (cur && cur->how == KS_PERIOD)
        cbf_katcp_buf_argf(&c->out, "%g", cur->period);
    cbf_katcp_reply_end(r);
    /* A new strategy starts with the value now, as katcp servers do. */
    if (r->m->n_args > 1 && cur) {
        cbf_katcp_sensor_line(&c->out, "sensor-status", -1, s);
        cur->last = kc_last(s);
    }
    cbf_katcp_sensors_free(&ss);
}

/* Sends what the sampling strategies call for now; the time of the next
 * period that falls due, in *next (CLOCK_MONOTONIC). */
void cbf_katcp_sample(cbf_katcp *k, kc_sensors *ss, double *next)
{
    bool any = false;
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        any |= k->cl[i].fd >= 0 && k->cl[i].n_samp > 0;
    if (!any || kc_sensors_read(k, ss))
        return;
    double now = cbf_katcp_now(CLOCK_MONOTONIC);
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
                char *last = kc_last(s);
                if (last && (!sp->last || strcmp(last, sp->last))) {
                    send = true;
                    free(sp->last);
                    sp->last = last;
                } else {
                    free(last);
                }
            }
            if (send)
                cbf_katcp_sensor_line(&c->out, "sensor-status", -1, s);
        }
    }
}

