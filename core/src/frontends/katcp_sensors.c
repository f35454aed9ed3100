/* katcp_sensors.c: the engine's katcp sensors (the server's snapshot
 * callback), read from the object the ZeroMQ `sensors` request answers
 * (cbf_fe_sensors_nodes) and named NODE.NAME; each under the katgpucbf
 * name its plugin gives it too (cbf_*_katcp, cbf/node.h), as NODE.name or
 * at engine level; and katgpucbf's engine-wide sensors: device-status,
 * steady-state-timestamp, time.* (katcp_clock.c). The server (cbf/katcp.h)
 * lists, reads and samples them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/log.h"
#include "katcp_engine.h"
#include "sensors_json.h"

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

/* One reading as the server takes it: the type from the JSON value, or
 * `as` (CBF_SENSOR_* flags, a katgpucbf name's); the core's status
 * (sensor.c) where it gives one, else the runtime's own counts and queue
 * fills are nominal, a gauge never set unknown. */
static int kc_sensor_put(cbf_katcp_sensors *out, double now, const char *name, const char *desc,
                         const char *units, json_t *v, json_t *status, json_t *updated, unsigned as)
{
    if (!json_is_number(v) && !json_is_null(v) && !json_is_string(v))
        return CBF_OK;
    cbf_katcp_type type = json_is_integer(v) ? CBF_KATCP_INTEGER : json_is_string(v) ? CBF_KATCP_STRING
                                                                                     : CBF_KATCP_FLOAT;
    type = as & CBF_SENSOR_BOOLEAN     ? CBF_KATCP_BOOLEAN
           : as & CBF_SENSOR_TIMESTAMP ? CBF_KATCP_TIMESTAMP
           : as & CBF_SENSOR_INTEGER   ? CBF_KATCP_INTEGER
           : as & CBF_SENSOR_FLOAT     ? CBF_KATCP_FLOAT
                                       : type;
    const cbf_katcp_sensor_info info = {name, desc, units, type, NULL, 0};
    int st = cbf_katcp_status_parse(json_string_value(status));
    if (st < 0 || st > CBF_KATCP_ERROR)
        st = json_string_value(status) || json_is_null(v) ? CBF_KATCP_UNKNOWN : CBF_KATCP_NOMINAL;
    char num[40];
    const char *text = num;
    if (json_is_integer(v))
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
    else if (json_is_string(v))
        /* a text that holds a number: "0" until its first value */
        text = type == CBF_KATCP_STRING || json_string_value(v)[0] ? json_string_value(v) : "0";
    else if (type == CBF_KATCP_BOOLEAN)
        snprintf(num, sizeof num, "%d", json_is_real(v) && json_real_value(v) != 0.0);
    else if (type == CBF_KATCP_INTEGER && json_is_real(v))
        snprintf(num, sizeof num, "%lld", (long long)llround(json_real_value(v)));   /* a whole-number gauge */
    else if (type == CBF_KATCP_TIMESTAMP && !json_is_real(v))
        snprintf(num, sizeof num, "-1");   /* katgpucbf's "none yet" */
    else if (json_is_real(v) && as)
        cbf_format_repr(json_real_value(v), num, sizeof num);   /* as katgpucbf's Python writes it */
    else if (json_is_real(v))
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
    else
        snprintf(num, sizeof num, "nan");
    return cbf_katcp_sensors_put(out, &info, (cbf_katcp_status)st, text,
                                 json_is_number(updated) ? json_number_value(updated) : now);
}

/* The engine-level katcp names the nodes' plugin sensors claim, each once
 * per claim, in `claims` (NULL: only counted). */
static const char *const kc_kinds[3] = {"counters", "gauges", "texts"};

static size_t kc_engine_claims(cbf_katcp_engine *k, json_t *nodes, const char **claims, size_t cap)
{
    size_t n = 0;
    const char *node;
    json_t *o;
    json_object_foreach(nodes, node, o)
    {
        cbf_node *nd = NULL;
        for (size_t i = 0; i < k->g->n_nodes && !nd; i++)
            if (!strcmp(k->g->nodes[i].name, node))
                nd = cbf_rt_engine_node(k->e, i);
        for (int kind = 0; nd && kind < 3; kind++) {
            const char *ck;
            json_t *cv;
            json_object_foreach(json_object_get(o, kc_kinds[kind]), ck, cv)
            {
                const cbf_rt_about *a = cbf_rt_sensor_about(nd, ck, (cbf_rt_kind)kind);
                if (a && a->katcp[0] && (a->katcp_flags & CBF_SENSOR_ENGINE)) {
                    if (claims && n < cap)
                        claims[n] = a->katcp;
                    n++;
                }
            }
        }
    }
    return n;
}

static size_t kc_claimed(const char *const *claims, size_t n, const char *name)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += !strcmp(claims[i], name);
    return c;
}

/* What every snapshot's nodes share: the time, and the engine-level
 * names with how often each is claimed. */
typedef struct kc_pass {
    double now;
    const char **claims;
    size_t n_claims;
} kc_pass;

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
static int kc_node_sensors(cbf_katcp_sensors *ss, const kc_pass *ps, cbf_node *nd, const char *node, json_t *o)
{
    const double now = ps->now;
    int rc = CBF_OK;
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
                rc = rc ? rc : kc_sensor_put(ss, now, name, desc, "", json_object_get(qv, "fill"), NULL, NULL, 0);
                snprintf(mid, sizeof mid, "%s.queue-depth", port);
                kc_name(name, sizeof name, node, mid);
                snprintf(desc, sizeof desc, "buffers the queue of input %s holds at most", port);
                rc = rc ? rc : kc_sensor_put(ss, now, name, desc, "", json_object_get(qv, "depth"), NULL, NULL, 0);
            }
        } else if (!strcmp(key, "counters") || !strcmp(key, "gauges") || !strcmp(key, "texts")) {
            const cbf_rt_kind kind = key[0] == 'c' ? CBF_RT_COUNTER : key[0] == 'g' ? CBF_RT_GAUGE : CBF_RT_TEXT;
            const char *ck;
            json_t *cv;
            json_object_foreach(v, ck, cv)
            {
                const cbf_rt_about *a = nd ? cbf_rt_sensor_about(nd, ck, kind) : NULL;
                const char *units = a ? a->units : "";
                if (a && a->doc[0]) {
                    snprintf(desc, sizeof desc, "%s", a->doc);
                } else {
                    /* none given: the name in words, and whose it is */
                    snprintf(desc, sizeof desc, "%s (%s of plugin %s)", ck,
                             kind == CBF_RT_TEXT ? "text" : kind == CBF_RT_GAUGE ? "value" : "count", plugin);
                    for (char *p = desc; *p && *p != ' '; p++)
                        *p = *p == '_' || *p == '.' ? ' ' : *p;
                }
                units = units[0] ? units : kc_units(ck);
                json_t *cst = json_object_get(status, ck), *cup = json_object_get(updated, ck);
                kc_name(name, sizeof name, node, ck);
                /* katgpucbf's name: alone at engine level unless several
                 * nodes claim it, else NODE.name; NODE.NAME as well unless
                 * the two are one */
                char alias[192] = "";
                if (a && a->katcp[0]) {
                    if ((a->katcp_flags & CBF_SENSOR_ENGINE) && kc_claimed(ps->claims, ps->n_claims, a->katcp) < 2)
                        snprintf(alias, sizeof alias, "%s", a->katcp);
                    else
                        snprintf(alias, sizeof alias, "%s.%s", node, a->katcp);
                }
                if (strcmp(alias, name))
                    rc = rc ? rc : kc_sensor_put(ss, ps->now, name, desc, units, cv, cst, cup, 0);
                if (alias[0])
                    /* (any flag set: katgpucbf's forms of numbers) */
                    rc = rc ? rc : kc_sensor_put(ss, ps->now, alias, desc, units, cv, cst, cup,
                                                 a->katcp_flags | CBF_SENSOR_ENGINE);
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
            rc = rc ? rc : kc_sensor_put(ss, now, name, desc, units, v, NULL, NULL, 0);
        }
    }
    return rc;
}

/* katgpucbf's steady-state-timestamp of the engine: output with this
 * timestamp or later reflects every request so far, so the largest of the
 * nodes' (0 before any timed request, as katgpucbf's default). */
static int kc_steady_state(cbf_katcp_sensors *out, double now, json_t *nodes)
{
    json_int_t ts = 0;
    double upd = 0;
    const char *node;
    json_t *o;
    json_object_foreach(nodes, node, o)
    {
        json_t *v = json_object_get(json_object_get(o, "counters"), CBF_RT_STEADY_STATE);
        json_t *u = json_object_get(json_object_get(o, "updated"), CBF_RT_STEADY_STATE);
        if (json_is_integer(v) && (json_integer_value(v) > ts || upd == 0)) {
            ts = json_integer_value(v) > ts ? json_integer_value(v) : ts;
            upd = json_is_number(u) ? json_number_value(u) : now;
        }
    }
    static const cbf_katcp_sensor_info info = {
        "steady-state-timestamp",
        "Heaps with this timestamp or greater are guaranteed to reflect the effects of previous katcp requests.",
        "", CBF_KATCP_INTEGER, NULL, 0};
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)ts);
    return cbf_katcp_sensors_put(out, &info, CBF_KATCP_NOMINAL, v, upd > 0 ? upd : now);
}

/* The claims of `nodes` as a malloc'd list (NULL for none or out of memory). */
static const char **kc_claims_list(cbf_katcp_engine *k, json_t *nodes, size_t *n)
{
    *n = kc_engine_claims(k, nodes, NULL, 0);
    const char **c = *n ? malloc(*n * sizeof *c) : NULL;
    if (c)
        kc_engine_claims(k, nodes, c, *n);
    else
        *n = 0;
    return c;
}

void cbf_katcp_engine_check_names(cbf_katcp_engine *k)
{
    json_t *nodes = cbf_fe_sensors_nodes(k->e, NULL, 0.0, false);
    size_t n;
    const char **c = nodes ? kc_claims_list(k, nodes, &n) : NULL;
    for (size_t i = 0; c && i < n; i++)
        if (kc_claimed(c, i, c[i]) == 0 && kc_claimed(c, n, c[i]) > 1)
            cbf_log_warn("katcp: %zu nodes give a sensor katgpucbf's engine-level name '%s' (one engine "
                         "per antenna has it once): each is published as NODE.%s", kc_claimed(c, n, c[i]),
                         c[i], c[i]);
    free(c);
    json_decref(nodes);
}

int cbf_katcp_engine_sensors(cbf_katcp_sensors *out, void *user)
{
    cbf_katcp_engine *k = user;
    kc_pass ps = {.now = cbf_rt_unix_now()};
    const double now = ps.now;
    json_t *nodes = cbf_fe_sensors_nodes(k->e, NULL, 0.0, false);
    if (!nodes)
        return CBF_ENOMEM;
    ps.claims = kc_claims_list(k, nodes, &ps.n_claims);
    const cbf_graph *g = k->g;
    const char *node;
    json_t *o;
    int rc = CBF_OK;
    json_object_foreach(nodes, node, o)
    {
        cbf_node *nd = NULL;
        for (size_t i = 0; i < g->n_nodes && !nd; i++)
            if (!strcmp(g->nodes[i].name, node))
                nd = cbf_rt_engine_node(k->e, i);
        if (!rc)
            rc = kc_node_sensors(out, &ps, nd, node, o);
    }
    rc = rc ? rc : kc_steady_state(out, now, nodes);
    free(ps.claims);
    json_decref(nodes);
    rc = rc ? rc : cbf_katcp_engine_clock(out, now);
    if (rc)
        return rc;
    /* katgpucbf's device-status: ok, degraded or fail, from the worst
     * sensor status of the engine */
    static const char *const words[] = {"ok", "degraded", "fail"};
    const cbf_katcp_sensor_info dev = {"device-status",
                                       "engine health: ok, degraded (a sensor warns) or fail (a sensor is in error)",
                                       "", CBF_KATCP_DISCRETE, words, 3};
    cbf_status st = cbf_rt_engine_status(k->e, now);
    int kst = cbf_katcp_status_parse(cbf_status_name(st));
    return cbf_katcp_sensors_put(out, &dev, kst < 0 ? CBF_KATCP_UNKNOWN : (cbf_katcp_status)kst,
                                 cbf_rt_device_status_word(st), now);
}
