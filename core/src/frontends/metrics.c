/* metrics.c: the engine's Prometheus exporter (engine key `prometheus:`).
 *
 * GET /metrics answers the text exposition format (metrics_text.c) with
 * every node's runtime counts (buffers, bytes, busy and wait seconds), its
 * input queues' fill, and its plugin's counters and gauges, labelled by
 * engine, node and plugin; counters katgpucbf also has take its names
 * (metrics_names.c). HTTP is libmicrohttpd's, on one thread of its own:
 * it parses the requests, so a malformed one is answered with an error by a
 * well-tested parser and never reaches the engine. A scrape reads only
 * atomics and the queue mutexes, as the control thread does.
 *
 * Like zmq.c: open binds the socket (so a taken port or a bad address
 * is a start-up error naming engine.prometheus), start serves, close stops. */
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cbf/log.h"
#include "base/tcp.h"
#include "metrics.h"
#include "runtime/engine_view.h"
#include "runtime/frontend.h"

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mx_result;
#else
typedef int mx_result;
#endif

/* Slow clients (a request head a byte at a time, never idle, never done)
 * must not lock the scrapers out, as 16 of them did when 16 connections
 * were all there was: a source may hold MX_PER_SOURCE connections (a
 * scraper needs one; the rest from that address are closed at once), and
 * all sources together MX_CONNECTIONS, so it takes that many addresses to
 * fill the server. One polling thread (epoll on Linux) serves them all: a slow
 * connection costs a socket, not a thread. */
#define MX_CONNECTIONS 256         /* connections held at once, every source */
#define MX_PER_SOURCE 4            /* connections held at once from one address */
#define MX_BACKLOG 64              /* connections waiting to be taken */
#define MX_TIMEOUT_S 10            /* a client silent for this long is dropped */
#define MX_CONN_MEMORY (32 * 1024) /* per connection: a longer request head gets an error */
#define MX_CONFIG_MAX 8            /* configuration labels on one node's cbf_node_config_info */
#define MX_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct cbf_metrics cbf_metrics;
struct cbf_metrics {
    cbf_engine *e;
    const cbf_graph *g;
    int fd;                    /* the bound listening socket until MHD owns it */
    bool v6;
    char url[320];
    struct MHD_Daemon *d;
    pthread_mutex_t mu;        /* guards busy_shown (MHD may run handlers on any of its threads) */
    double *busy_shown;        /* per node: busy seconds last written, so busy never goes down */
    const char **input_type;   /* per node: the type on its first input edge, or NULL */
};

static int mx_bind(cbf_metrics *m, const char *text, cbf_error *err)
{
    char addr[300];
    int rc = cbf_tcp_listen(text, "engine.prometheus", m->g->engine.prometheus_where, MX_BACKLOG,
                            "read every counter, queue and timing of this engine", &m->fd, &m->v6, addr,
                            sizeof addr, err);
    if (!rc)
        snprintf(m->url, sizeof m->url, "http://%s/metrics", addr);
    return rc;
}

static void mx_free(cbf_metrics *m)
{
    if (m->fd >= 0)
        close(m->fd);
    pthread_mutex_destroy(&m->mu);
    free(m->busy_shown);
    free(m->input_type);
    free(m);
}

static int metrics_open(cbf_engine *e, void **out, cbf_error *err)
{
    *out = NULL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    if (!g->engine.prometheus)
        return CBF_OK;
    cbf_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return cbf_error_set(err, CBF_ENOMEM, "metrics: out of memory");
    m->e = e;
    m->g = g;
    m->fd = -1;
    pthread_mutex_init(&m->mu, NULL);
    m->busy_shown = calloc(g->n_nodes + 1, sizeof *m->busy_shown);
    m->input_type = calloc(g->n_nodes + 1, sizeof *m->input_type);
    int rc = m->busy_shown && m->input_type ? CBF_OK
                                             : cbf_error_set(err, CBF_ENOMEM, "metrics: out of memory");
    for (size_t i = g->n_edges; i-- > 0 && !rc;) {   /* backwards: the first edge wins */
        const cbf_graph_edge *ed = &g->edges[i];
        m->input_type[ed->to_node] = g->nodes[ed->from_node].plugin->ports[ed->from_port].type;
    }
    if (!rc)
        rc = mx_bind(m, g->engine.prometheus, err);
    if (rc) {
        mx_free(m);
        return rc;
    }
    cbf_log_info("metrics: Prometheus on %s", m->url);
    *out = m;
    return CBF_OK;
}

/* ---- the page ---- */

/* cbf_ and the sensor's name, made a metric name (rx.synchronised: a
 * metric name has no dots). */
static void mx_name(char *name, size_t n, const char *sensor)
{
    snprintf(name, n, "cbf_%s", sensor);
    for (char *p = name; *p; p++)
        *p = *p == '.' || *p == '-' ? '_' : *p;
}

/* One sensor's status as a number (katcp's order), labelled by sensor. */
static int mx_status(cbf_metrics_text *t, const cbf_metric_label *node_labels, const char *sensor,
                     cbf_status st)
{
    cbf_metric_label l[4] = {node_labels[0], node_labels[1], node_labels[2], {"sensor", sensor}};
    return cbf_metrics_text_add_int(t, "cbf_sensor_status", CBF_METRIC_GAUGE,
                                    "status of a node sensor: 0 unknown, 1 nominal, 2 warn, 3 error",
                                    l, 4, (uint64_t)st);
}

static int mx_node(cbf_metrics *m, cbf_metrics_text *t, size_t i, const cbf_node_stats *st)
{
    const char *engine = m->g->engine.name ? m->g->engine.name : "";
    cbf_metric_label l[4] = {{"engine", engine}, {"node", st->name}, {"plugin", st->plugin}, {NULL, NULL}};
    const struct {
        const char *name, *help;
        uint64_t v;
    } ints[] = {
        {"cbf_node_buffers_in", "buffers the node has taken from its inputs", st->buffers_in},
        {"cbf_node_buffers_out", "buffers the node has sent", st->buffers_out},
        {"cbf_node_bytes_out", "payload bytes of the buffers the node has sent", st->bytes_out},
    };
    int rc = 0;
    for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !rc; k++)
        rc = cbf_metrics_text_add_int(t, ints[k].name, CBF_METRIC_COUNTER, ints[k].help, l, 3, ints[k].v);
    /* busy is run time less the waits, and a wait is added when it ends, so
     * during a long wait busy runs ahead and then falls back: written as the
     * most it has been, it stays a counter (it catches up when the node works). */
    pthread_mutex_lock(&m->mu);
    if (st->busy_s > m->busy_shown[i])
        m->busy_shown[i] = st->busy_s;
    double busy = m->busy_shown[i];
    pthread_mutex_unlock(&m->mu);
    if (!rc)
        rc = cbf_metrics_text_add_float(t, "cbf_node_busy_seconds", CBF_METRIC_COUNTER,
                                        "seconds the node's thread has run, not blocked in the runtime",
                                        l, 3, busy);
    if (!rc)
        rc = cbf_metrics_text_add_float(t, "cbf_node_wait_input_seconds", CBF_METRIC_COUNTER,
                                        "seconds the node has waited for input", l, 3, st->wait_input_s);
    if (!rc)
        rc = cbf_metrics_text_add_float(t, "cbf_node_wait_output_seconds", CBF_METRIC_COUNTER,
                                        "seconds the node has waited for a free buffer or a full queue",
                                        l, 3, st->wait_output_s);
    for (int k = 0; k < st->n_counters && !rc; k++) {
        const cbf_metric_alias *a = cbf_metrics_alias(st->plugin, st->counter_names[k], m->input_type[i]);
        const cbf_metric_meaning *mean = cbf_metrics_meaning(st->plugin, st->counter_names[k]);
        char name[96], help[128];
        size_t nl = 3;
        if (mean) {   /* a timestamp: it only rises, but it is a value, not a count */
            mx_name(name, sizeof name, st->counter_names[k]);
            rc = cbf_metrics_text_add_int(t, name, CBF_METRIC_GAUGE, mean->help, l, 3, st->counter_values[k]);
            continue;
        }
        if (a) {
            snprintf(name, sizeof name, "cbf_%s", a->name);
            snprintf(help, sizeof help, "%s (katgpucbf's name)", a->help);
            if (a->label)
                l[nl++] = (cbf_metric_label){a->label, a->label_value};
        } else {
            snprintf(name, sizeof name, "cbf_%s", st->counter_names[k]);
            snprintf(help, sizeof help, "node counter '%s' (see the plugin's README)", st->counter_names[k]);
        }
        rc = cbf_metrics_text_add_int(t, name, CBF_METRIC_COUNTER, help, l, nl, st->counter_values[k]);
    }
    cbf_node *n = cbf_rt_engine_node(m->e, i);
    const double now = cbf_rt_unix_now();
    const int ng = st->n_gauges;
    cbf_metric_label cl[3 + MX_CONFIG_MAX] = {l[0], l[1], l[2]};
    char cv[MX_CONFIG_MAX][32];
    size_t ncl = 3;
    for (int k = 0; k < ng && !rc; k++) {
        const char *gauge = st->gauge_names[k];
        const cbf_metric_meaning *mean = cbf_metrics_meaning(st->plugin, gauge);
        char name[96], help[128];
        mx_name(name, sizeof name, gauge);
        snprintf(help, sizeof help, "node gauge '%s' (NaN: no value yet)", gauge);
        double v, u;
        cbf_status gst = cbf_rt_gauge_look(n, k, now, &v, &u);
        if (mean && mean->config) {   /* a label of cbf_node_config_info, not a number to graph */
            if (ncl < 3 + MX_CONFIG_MAX && !isnan(v)) {
                char *c = cv[ncl - 3];
                if (mean->boolean)
                    snprintf(c, sizeof cv[0], "%s", v != 0 ? "true" : "false");
                else
                    snprintf(c, sizeof cv[0], "%.17g", v);
                cl[ncl++] = (cbf_metric_label){mean->sensor, c};
            }
        } else {
            rc = cbf_metrics_text_add_float(t, name, CBF_METRIC_GAUGE, mean ? mean->help : help, l, 3, v);
        }
        if (!rc)
            rc = mx_status(t, l, gauge, gst);
    }
    if (!rc && ncl > 3)
        rc = cbf_metrics_text_add_int(t, "cbf_node_config_info", CBF_METRIC_GAUGE, cbf_metrics_config_help,
                                      cl, ncl, 1);
    for (int k = 0; k < st->n_counters && !rc; k++) {
        uint64_t v;
        double u;
        rc = mx_status(t, l, st->counter_names[k], cbf_rt_counter_look(n, k, now, &v, &u));
    }
    size_t nt = cbf_rt_text_count(n);
    for (size_t k = 0; k < nt && !rc; k++) {
        char *v;
        cbf_status tst;
        double u;
        const char *name = cbf_rt_text_look(n, k, &v, &tst, &u);
        free(v);   /* text values are for katcp and the sensor message; here only their status */
        rc = mx_status(t, l, name, tst);
    }
    return rc;
}

static int mx_queues(cbf_metrics *m, cbf_metrics_text *t)
{
    const char *engine = m->g->engine.name ? m->g->engine.name : "";
    int rc = 0;
    for (size_t i = 0; i < m->g->n_edges && !rc; i++) {
        const cbf_graph_node *to = &m->g->nodes[m->g->edges[i].to_node];
        size_t fill, depth;
        const char *name = cbf_rt_engine_queue(m->e, i, &fill, &depth);
        cbf_metric_label l[] = {{"engine", engine}, {"node", to->name}, {"plugin", to->plugin->name},
                                {"queue", name}};
        rc = cbf_metrics_text_add_int(t, "cbf_queue_fill", CBF_METRIC_GAUGE,
                                      "buffers waiting in the node's input queue", l, 4, fill);
        if (!rc)
            rc = cbf_metrics_text_add_int(t, "cbf_queue_depth", CBF_METRIC_GAUGE,
                                          "capacity of the node's input queue", l, 4, depth);
    }
    return rc;
}

/* The page, malloc'd, or NULL when out of memory. */
static char *mx_page(cbf_metrics *m, size_t *len)
{
    const cbf_graph *g = m->g;
    cbf_node_stats *st = calloc(g->n_nodes + 1, sizeof *st);
    cbf_metrics_text *t = cbf_metrics_text_new();
    char *page = NULL;
    if (st && t) {
        cbf_metric_label l[] = {{"engine", g->engine.name ? g->engine.name : ""}};
        int rc = cbf_metrics_text_add_float(t, "cbf_engine_elapsed_seconds", CBF_METRIC_GAUGE,
                                            "seconds since the engine started running",
                                            l, 1, cbf_engine_elapsed(m->e));
        /* katgpucbf's device-status as a number: 0 ok, 1 degraded, 2 fail */
        cbf_status dev = cbf_rt_engine_status(m->e, cbf_rt_unix_now());
        if (!rc)
            rc = cbf_metrics_text_add_int(t, "cbf_device_status", CBF_METRIC_GAUGE,
                                          "engine health: 0 ok, 1 degraded (a sensor warns), 2 fail (a "
                                          "sensor is in error)",
                                          l, 1, dev == CBF_STATUS_ERROR ? 2 : dev == CBF_STATUS_WARN ? 1 : 0);
        size_t n = cbf_engine_stats(m->e, st, g->n_nodes);
        for (size_t i = 0; i < n && !rc; i++)
            rc = mx_node(m, t, i, &st[i]);
        if (!rc)
            rc = mx_queues(m, t);
        if (!rc)
            page = cbf_metrics_text_render(t, len);
    }
    cbf_metrics_text_free(t);
    free(st);
    return page;
}

/* ---- HTTP ---- */

static mx_result mx_reply(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                             MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    mx_result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static mx_result mx_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                            const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    cbf_metrics *m = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return mx_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served here\n");
    /* The first call sees only the head; a GET with a body is answered
     * once, when the body has been read (and ignored). */
    static int seen;
    if (!*state) {
        *state = &seen;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/metrics"))
        return mx_reply(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    size_t len = 0;
    char *page = mx_page(m, &len);
    if (!page)
        return mx_reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r = MHD_create_response_from_buffer(len, page, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(page);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, MX_CONTENT_TYPE);
    mx_result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* What libmicrohttpd reports is about one client's connection (a bad
 * request, a timeout): the engine's debug log, not its warnings. */
static void mx_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    cbf_log_debug("metrics: %s", msg);
}

static int metrics_start(void *state, cbf_error *err)
{
    cbf_metrics *m = state;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
                     (m->v6 ? MHD_USE_IPv6 : 0);
    m->d = MHD_start_daemon(flags, 0, NULL, NULL, mx_request, m,
                            MHD_OPTION_EXTERNAL_LOGGER, mx_log, m,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)m->fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)MX_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MX_PER_SOURCE,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MX_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MX_CONN_MEMORY,
                            MHD_OPTION_END);
    if (!m->d)
        return cbf_error_set(err, CBF_EIO, "%s: engine.prometheus: cannot start the HTTP server on %s",
                             m->g->engine.prometheus_where, m->url);
    m->fd = -1;   /* the daemon's now: it closes it when stopped */
    return CBF_OK;
}

static void metrics_close(void *state)
{
    cbf_metrics *m = state;
    if (m->d)
        MHD_stop_daemon(m->d);
    mx_free(m);
}

static const cbf_frontend metrics_frontend = {"prometheus", 20, metrics_open, metrics_start, metrics_close};
CBF_FRONTEND(metrics_frontend)
