/* sensors_json.c: every node's sensors as one JSON object (sensors_json.h),
 * built from the engine view alone. Here rather than in zmq.c because the
 * katcp front end reads its sensors from the same object; here rather than
 * in runtime/ because it is a presentation of the engine (the shape of
 * the ZeroMQ sensor message, docs/control.md), which the view is enough
 * to make. */
#include <math.h>
#include <stdlib.h>

#include "runtime/engine_view.h"
#include "sensors_json.h"

/* p: the counts at the last publication, for rates (NULL: no rates). */
static json_t *node_sensors(cbf_engine *e, size_t i, const cbf_node_stats *st, cbf_fe_node_counts *p,
                            double dt, bool advance)
{
    cbf_node *n = cbf_rt_engine_node(e, i);
    json_t *o = json_object();
    json_object_set_new(o, "plugin", json_string(st->plugin));
    json_object_set_new(o, "buffers_in", json_integer((json_int_t)st->buffers_in));
    json_object_set_new(o, "buffers_out", json_integer((json_int_t)st->buffers_out));
    json_object_set_new(o, "bytes_out", json_integer((json_int_t)st->bytes_out));
    if (p && dt > 0) {
        json_object_set_new(o, "buffers_in_per_s", json_real((double)(st->buffers_in - p->buffers_in) / dt));
        json_object_set_new(o, "buffers_out_per_s", json_real((double)(st->buffers_out - p->buffers_out) / dt));
        json_object_set_new(o, "bytes_out_per_s", json_real((double)(st->bytes_out - p->bytes_out) / dt));
    }
    if (p && advance) {
        p->buffers_in = st->buffers_in;
        p->buffers_out = st->buffers_out;
        p->bytes_out = st->bytes_out;
    }
    json_object_set_new(o, "busy_s", json_real(st->busy_s));
    json_object_set_new(o, "wait_input_s", json_real(st->wait_input_s));
    json_object_set_new(o, "wait_output_s", json_real(st->wait_output_s));
    json_t *q = json_object();
    size_t fill, depth;
    const char *qn;
    for (size_t k = 0; (qn = cbf_rt_node_queue(n, k, &fill, &depth)); k++)
        json_object_set_new(q, qn, json_pack("{s:I, s:I}", "fill", (json_int_t)fill, "depth", (json_int_t)depth));
    json_object_set_new(o, "queues", q);
    /* Each counter, gauge and text with its status and the UNIX time its
     * value last changed (sensor.c), under "status" and "updated" by name. */
    const double now = cbf_rt_unix_now();
    json_t *cn = json_object(), *gs = json_object(), *ts = json_object();
    json_t *stat = json_object(), *upd = json_object();
    double u;
    for (int k = 0; k < st->n_counters; k++) {
        uint64_t v;
        cbf_status cs = cbf_rt_counter_look(n, k, now, &v, &u);
        json_object_set_new(cn, st->counter_names[k], json_integer((json_int_t)v));
        json_object_set_new(stat, st->counter_names[k], json_string(cbf_status_name(cs)));
        json_object_set_new(upd, st->counter_names[k], json_real(u));
    }
    for (int k = 0; k < st->n_gauges; k++) {
        double v;
        cbf_status gs_st = cbf_rt_gauge_look(n, k, now, &v, &u);
        json_object_set_new(gs, st->gauge_names[k], isfinite(v) ? json_real(v) : json_null());
        json_object_set_new(stat, st->gauge_names[k], json_string(cbf_status_name(gs_st)));
        json_object_set_new(upd, st->gauge_names[k], json_real(u));
    }
    size_t nt = cbf_rt_text_count(n);
    for (size_t k = 0; k < nt; k++) {
        char *v;
        cbf_status tst;
        const char *name = cbf_rt_text_look(n, k, &v, &tst, &u);
        json_object_set_new(ts, name, json_string(v ? v : ""));
        json_object_set_new(stat, name, json_string(cbf_status_name(tst)));
        json_object_set_new(upd, name, u > 0 ? json_real(u) : json_null());
        free(v);
    }
    json_object_set_new(o, "counters", cn);
    json_object_set_new(o, "gauges", gs);
    json_object_set_new(o, "texts", ts);
    json_object_set_new(o, "status", stat);
    json_object_set_new(o, "updated", upd);
    return o;
}

json_t *cbf_fe_sensors_nodes(cbf_engine *e, cbf_fe_node_counts *prev, double dt, bool advance)
{
    const cbf_graph *g = cbf_rt_engine_graph(e);
    cbf_node_stats *st = calloc(g->n_nodes + 1, sizeof *st);
    json_t *nodes = json_object();
    if (!st || !nodes) {
        free(st);
        json_decref(nodes);
        return NULL;
    }
    size_t n = cbf_engine_stats(e, st, g->n_nodes);
    for (size_t i = 0; i < n; i++)
        json_object_set_new(nodes, st[i].name, node_sensors(e, i, &st[i], prev ? &prev[i] : NULL, dt, advance));
    free(st);
    return nodes;
}
