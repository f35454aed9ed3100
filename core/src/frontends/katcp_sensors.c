/* katcp_sensors.c: the engine's katcp sensors (the server's snapshot
 * callback), read from the object the ZeroMQ `sensors` request answers
 * (cbf_fe_sensors_nodes) and named NODE.NAME, and katgpucbf's
 * device-status. The server (cbf/katcp.h) lists, reads and samples them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One reading as the server takes it: the type from the JSON value; the
 * core's status (sensor.c) where it gives one, else the runtime's own
 * counts and queue fills are nominal, a gauge never set unknown. */
static int kc_sensor_put(cbf_katcp_sensors *out, double now, const char *name, const char *desc,
                         const char *units, json_t *v, json_t *status, json_t *updated)
{
    if (!json_is_number(v) && !json_is_null(v) && !json_is_string(v))
        return CBF_OK;
    const cbf_katcp_sensor_info info = {name, desc, units,
                                        json_is_integer(v)  ? CBF_KATCP_INTEGER
                                        : json_is_string(v) ? CBF_KATCP_STRING
                                                            : CBF_KATCP_FLOAT, NULL, 0};
    int st = cbf_katcp_status_parse(json_string_value(status));
    if (st < 0 || st > CBF_KATCP_ERROR)
        st = json_string_value(status) || json_is_null(v) ? CBF_KATCP_UNKNOWN : CBF_KATCP_NOMINAL;
    char num[40];
    if (json_is_integer(v))
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(num, sizeof num, "%.17g", json_real_value(v));
    else
        snprintf(num, sizeof num, "nan");
    return cbf_katcp_sensors_put(out, &info, (cbf_katcp_status)st, json_is_string(v) ? json_string_value(v) : num,
                                 json_is_number(updated) ? json_number_value(updated) : now);
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
static int kc_node_sensors(cbf_katcp_sensors *ss, double now, cbf_node *nd, const char *node, json_t *o)
{
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
                rc = rc ? rc : kc_sensor_put(ss, now, name, desc, "", json_object_get(qv, "fill"), NULL, NULL);
                snprintf(mid, sizeof mid, "%s.queue-depth", port);
                kc_name(name, sizeof name, node, mid);
                snprintf(desc, sizeof desc, "buffers the queue of input %s holds at most", port);
                rc = rc ? rc : kc_sensor_put(ss, now, name, desc, "", json_object_get(qv, "depth"), NULL, NULL);
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
                rc = rc ? rc : kc_sensor_put(ss, now, name, desc, units && units[0] ? units : kc_units(ck), cv,
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
            rc = rc ? rc : kc_sensor_put(ss, now, name, desc, units, v, NULL, NULL);
        }
    }
    return rc;
}

int cbf_katcp_engine_sensors(cbf_katcp_sensors *out, void *user)
{
    cbf_katcp_engine *k = user;
    const double now = cbf_rt_unix_now();
    json_t *nodes = cbf_fe_sensors_nodes(k->e, NULL, 0.0, false);
    if (!nodes)
        return CBF_ENOMEM;
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
            rc = kc_node_sensors(out, now, nd, node, o);
    }
    json_decref(nodes);
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
