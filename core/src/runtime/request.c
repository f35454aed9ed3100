/* request.c: the node side of runtime requests (cbf/control.h): a mailbox
 * per node that the control thread fills and the node's own thread empties
 * between buffers, the reply object a plugin adds fields to, and gauges.
 *
 * Handing a request to the node's thread (rather than calling the plugin
 * from the control thread) is what keeps a change from tearing a buffer: a
 * plugin sees requests only where it is between buffers, and needs no lock
 * for the state they change. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cbf/log.h"
#include "graph/params_priv.h"
#include "runtime.h"

struct cbf_reply {
    json_t *obj;
};

const char *cbf_request_name(const cbf_request *r) { return r->decl->name; }
const cbf_params *cbf_request_args(const cbf_request *r) { return r->args; }
bool cbf_request_read_only(const cbf_request *r) { return r->read_only; }

cbf_reply *cbf_rt_reply_new(void)
{
    cbf_reply *r = calloc(1, sizeof *r);
    if (r && !(r->obj = json_object())) {
        free(r);
        return NULL;
    }
    return r;
}

void cbf_rt_reply_free(cbf_reply *r)
{
    if (r) {
        json_decref(r->obj);
        free(r);
    }
}

void *cbf_rt_reply_json(cbf_reply *r) { return r->obj; }

static int reply_set(cbf_reply *r, const char *key, json_t *v)
{
    if (!v)
        return CBF_ENOMEM;
    if (!strcmp(key, "ok") || !strcmp(key, "error") || !strcmp(key, "request")) {
        json_decref(v);
        return CBF_EINVAL;
    }
    return json_object_set_new(r->obj, key, v) ? CBF_ENOMEM : CBF_OK;
}

int cbf_reply_int(cbf_reply *r, const char *key, int64_t v) { return reply_set(r, key, json_integer(v)); }
int cbf_reply_float(cbf_reply *r, const char *key, double v)
{
    return reply_set(r, key, isfinite(v) ? json_real(v) : json_null());
}
int cbf_reply_string(cbf_reply *r, const char *key, const char *v) { return reply_set(r, key, json_string(v)); }
int cbf_reply_float_list(cbf_reply *r, const char *key, const double *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null())) {
            json_decref(a);
            a = NULL;
        }
    return reply_set(r, key, a);
}

/* ---- mailbox ---- */

void cbf_rt_node_mailbox_init(cbf_node *n)
{
    pthread_mutex_init(&n->mb_mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&n->mb_cv, &a);
    pthread_condattr_destroy(&a);
    atomic_init(&n->mb_pending, false);
}

void cbf_rt_node_mailbox_destroy(cbf_node *n)
{
    pthread_mutex_destroy(&n->mb_mu);
    pthread_cond_destroy(&n->mb_cv);
}

void cbf_rt_node_drain(cbf_node *n)
{
    if (!n || !atomic_load_explicit(&n->mb_pending, memory_order_acquire))
        return;
    pthread_mutex_lock(&n->mb_mu);
    while (n->mb_head) {
        cbf_request *r = n->mb_head;
        n->mb_head = r->next;
        r->taken = true;
        pthread_mutex_unlock(&n->mb_mu);
        cbf_error_clear(&r->err);
        const cbf_plugin_desc *d = n->g->plugin;
        r->rc = d->request(n, r, r->reply, &r->err);
        if (r->rc < 0 && !r->err.msg[0])
            cbf_error_set(&r->err, r->rc, "%s", cbf_error_name(r->rc));
        if (r->rc < 0)
            cbf_log_debug("request '%s' refused: %s", r->decl->name, r->err.msg);
        else
            cbf_log_info("request '%s' done", r->decl->name);
        pthread_mutex_lock(&n->mb_mu);
        r->done = true;
        pthread_cond_broadcast(&n->mb_cv);
    }
    atomic_store_explicit(&n->mb_pending, false, memory_order_release);
    pthread_mutex_unlock(&n->mb_mu);
}

void cbf_rt_node_mailbox_close(cbf_node *n)
{
    pthread_mutex_lock(&n->mb_mu);
    n->mb_closed = true;
    for (cbf_request *r = n->mb_head; r; r = r->next) {
        r->rc = cbf_error_set(&r->err, CBF_ESTOPPED, "node '%s' has finished running", n->g->name);
        r->done = true;
    }
    n->mb_head = NULL;
    atomic_store(&n->mb_pending, false);
    pthread_cond_broadcast(&n->mb_cv);
    pthread_mutex_unlock(&n->mb_mu);
}

static void wake_inputs(cbf_node *n)
{
    for (int pi = 0; pi < n->g->plugin->n_ports; pi++) {
        cbf_port_slot *s = &n->slots[pi];
        if (s->decl->dir == CBF_PORT_IN)
            for (int k = 0; k < s->n; k++)
                cbf_rt_port_wake(s->ports[k]);
    }
}

int cbf_rt_node_post(cbf_node *n, cbf_request *req)
{
    req->taken = req->done = false;
    req->next = NULL;
    pthread_mutex_lock(&n->mb_mu);
    if (n->mb_closed) {
        pthread_mutex_unlock(&n->mb_mu);
        req->done = true;
        return req->rc = cbf_error_set(&req->err, CBF_ESTOPPED, "node '%s' has finished running",
                                       n->g->name);
    }
    cbf_request **tail = &n->mb_head;
    while (*tail)
        tail = &(*tail)->next;
    *tail = req;
    atomic_store_explicit(&n->mb_pending, true, memory_order_release);
    pthread_mutex_unlock(&n->mb_mu);
    return CBF_OK;
}

int cbf_rt_node_submit(cbf_node *n, cbf_request *req, int timeout_ms)
{
    int posted = cbf_rt_node_post(n, req);
    if (posted != CBF_OK)
        return posted;
    /* A node blocked in cbf_port_recv re-checks its mailbox when woken. */
    wake_inputs(n);

    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&n->mb_mu);
    int rc = 0;
    while (!req->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&n->mb_cv, &n->mb_mu, &until);
    if (!req->done && !req->taken) {
        /* Withdraw it: the node never saw it, so nothing changed. */
        for (cbf_request **p = &n->mb_head; *p; p = &(*p)->next)
            if (*p == req) {
                *p = req->next;
                break;
            }
        pthread_mutex_unlock(&n->mb_mu);
        return req->rc = cbf_error_set(&req->err, CBF_EIO,
                                       "node '%s' did not take the request within %d ms (it is "
                                       "blocked outside its buffer loop); nothing was changed",
                                       n->g->name, timeout_ms);
    }
    /* Taken: the plugin is handling it now; its answer comes soon. */
    while (!req->done)
        pthread_cond_wait(&n->mb_cv, &n->mb_mu);
    pthread_mutex_unlock(&n->mb_mu);
    return req->rc;
}

/* ---- gauges ---- */

cbf_gauge *cbf_node_gauge(cbf_node *n, const char *name)
{
    int k = atomic_load(&n->n_gauges);
    for (int i = 0; i < k; i++)
        if (!strcmp(n->gauges[i].name, name))
            return &n->gauges[i];
    if (k >= CBF_MAX_GAUGES) {
        cbf_log_warn("node '%s': more than %d gauges; '%s' is not recorded", n->g->name,
                     CBF_MAX_GAUGES, name);
        return NULL;
    }
    cbf_gauge *g = &n->gauges[k];
    snprintf(g->name, sizeof g->name, "%s", name);
    double nan = NAN;
    uint64_t bits;
    memcpy(&bits, &nan, sizeof bits);
    atomic_init(&g->bits, bits);
    atomic_init(&g->status, -1);
    atomic_store_explicit(&n->n_gauges, k + 1, memory_order_release);
    return g;
}

void cbf_gauge_set(cbf_gauge *g, double v)
{
    if (!g)
        return;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    atomic_store_explicit(&g->bits, bits, memory_order_relaxed);
}

double cbf_gauge_get(const cbf_gauge *g)
{
    if (!g)
        return NAN;
    uint64_t bits = atomic_load_explicit(&g->bits, memory_order_relaxed);
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* ---- one plugin request, whatever the wire (ZeroMQ JSON, katcp) ---- */

const cbf_request_decl *cbf_rt_request_decl(const cbf_plugin_desc *d, const char *name)
{
    for (int k = 0; k < d->n_requests; k++)
        if (!strcmp(d->requests[k].name, name))
            return &d->requests[k];
    return NULL;
}

/* ---- timestamps in UNIX time (CBF_PARAM_TIMESTAMP) ---- */

#define UNIX_SUFFIX "_unix"

static const cbf_param_decl *timestamp_arg(const cbf_request_decl *d, const char *key, size_t len)
{
    for (int k = 0; k < d->n_args; k++)
        if ((d->args[k].flags & CBF_PARAM_TIMESTAMP) && strlen(d->args[k].name) == len &&
            !strncmp(d->args[k].name, key, len))
            return &d->args[k];
    return NULL;
}

/* Rewrites NAME_unix=SECONDS as NAME=TIMESTAMP for each timestamp argument,
 * so that one conversion serves every plugin and every front end; texts
 * holds the new values. Other arguments pass as they are (an unknown
 * NAME_unix is then refused as any unknown argument). */
static int unix_args(const cbf_graph *g, const cbf_request_decl *d, cbf_text_kv *tv, size_t n,
                     char (*texts)[32], cbf_error *err)
{
    const cbf_engine_settings *es = &g->engine;
    const size_t sl = strlen(UNIX_SUFFIX);
    for (size_t i = 0; i < n; i++) {
        const char *key = tv[i].key;
        size_t l = strlen(key);
        if (l <= sl || strcmp(key + l - sl, UNIX_SUFFIX))
            continue;
        const cbf_param_decl *a = timestamp_arg(d, key, l - sl);
        if (!a)
            continue;
        for (size_t j = 0; j < n; j++)
            if (!strcmp(tv[j].key, a->name))
                return cbf_error_set(err, CBF_EINVAL, "request '%s': give '%s' (ADC timestamp) or '%s' "
                                     "(UNIX seconds), not both", d->name, a->name, key);
        if (!es->has_sync_time)
            return cbf_error_set(err, CBF_EINVAL, "request '%s': '%s' is UNIX time, but this engine has no "
                                 "sync_time (engine keys sync_time and adc_sample_rate); give '%s' as an "
                                 "ADC timestamp", d->name, key, a->name);
        cbf_unix_time t;
        int64_t ts = 0;
        if (cbf_time_parse(tv[i].text, &t))
            return cbf_error_set(err, CBF_EINVAL, "request '%s': '%s': %s is not UNIX seconds", d->name,
                                 key, tv[i].text);
        bool far = cbf_time_to_ts(&t, &es->sync_time, es->adc_sample_rate, &ts) != 0;
        if (far || ts < 0)
            return cbf_error_set(err, CBF_EINVAL, "request '%s': '%s': %s is %s the engine's sync_time "
                                 "%.6f", d->name, key, tv[i].text, far ? "too far from" : "before",
                                 cbf_time_to_double(&es->sync_time));
        snprintf(texts[i], sizeof texts[i], "%" PRId64, ts);
        tv[i].key = a->name;
        tv[i].text = texts[i];
    }
    return CBF_OK;
}

/* katgpucbf's steady-state-timestamp (steady_state_timestamp), per node: output with this timestamp
 * or later reflects every timed request the node has accepted, so it is
 * the largest timestamp such a request has replied with. The engine makes
 * the counter (engine.c); two front ends may race here. */
static void raise_steady_state(cbf_node *n, const cbf_request_decl *d, cbf_reply *reply)
{
    cbf_counter *c = cbf_node_counter(n, CBF_RT_STEADY_STATE);
    for (int k = 0; c && k < d->n_args; k++) {
        json_t *v = json_object_get(reply->obj, d->args[k].name);
        if (!(d->args[k].flags & CBF_PARAM_TIMESTAMP) || !json_is_integer(v) || json_integer_value(v) < 0)
            continue;
        uint64_t ts = (uint64_t)json_integer_value(v), cur = atomic_load(&c->value);
        while (ts > cur && !atomic_compare_exchange_weak(&c->value, &cur, ts))
            ;
    }
}

/* The node that answers `name`: the one named, or the only one declaring
 * it. CBF_ENOTSUP when none does (an unknown request), CBF_EINVAL when the
 * node named is not there or several would answer. */
static int request_node(const cbf_graph *g, const char *name, const char *node, size_t *at,
                        cbf_error *err)
{
    if (node) {
        for (size_t i = 0; i < g->n_nodes; i++)
            if (!strcmp(g->nodes[i].name, node)) {
                *at = i;
                if (cbf_rt_request_decl(g->nodes[i].plugin, name))
                    return CBF_OK;
                return cbf_error_set(err, CBF_ENOTSUP, "node '%s' (plugin %s) has no request '%s'",
                                     node, g->nodes[i].plugin->name, name);
            }
        return cbf_error_set(err, CBF_EINVAL, "no node '%s' in this engine", node);
    }
    char names[512] = "";
    size_t found = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (!cbf_rt_request_decl(g->nodes[i].plugin, name))
            continue;
        if (!found++)
            *at = i;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", g->nodes[i].name);
    }
    if (!found) {
        /* A misspelling names its nearest request (cbf-ctl gian: gain). */
        const char *cands[256];
        size_t nc = 0;
        for (size_t i = 0; i < g->n_nodes; i++)
            for (int q = 0; q < g->nodes[i].plugin->n_requests && nc < 256; q++)
                cands[nc++] = g->nodes[i].plugin->requests[q].name;
        const char *near = cbf_closest_name(name, cands, nc);
        return cbf_error_set(err, CBF_ENOTSUP, "unknown request '%s'%s%s%s", name, near ? " (did you mean '" : "",
                             near ? near : "", near ? "'?)" : "");
    }
    if (found > 1)
        return cbf_error_set(err, CBF_EINVAL, "several nodes accept '%s' (%s): name the node", name,
                             names);
    return CBF_OK;
}

int cbf_rt_request_call(cbf_engine *e, const char *name, const char *node, const cbf_text_kv *args,
                        size_t n_args, size_t *node_at, cbf_reply **reply, cbf_error *err)
{
    *reply = NULL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    size_t at = 0;
    int rc = request_node(g, name, node, &at, err);
    if (rc)
        return rc;
    *node_at = at;
    const cbf_graph_node *gn = &g->nodes[at];
    cbf_request r = {.decl = cbf_rt_request_decl(gn->plugin, name), .read_only = g->engine.read_only};
    if (r.read_only && !(r.decl->flags & CBF_REQUEST_READS))
        return cbf_error_set(err, CBF_EINVAL, "request '%s' refused: the engine is read-only (%s: "
                             "engine.read_only: true)", name, g->engine.read_only_where);
    char where[CBF_WHERE_MAX];
    snprintf(where, sizeof where, "request '%s'", name);
    cbf_params_ctx ctx = {NULL, gn->name, gn->where, gn->plugin->name, name};
    cbf_text_kv *tv = calloc(n_args + 1, sizeof *tv);
    char(*texts)[32] = calloc(n_args + 1, sizeof *texts);
    if (!tv || !texts) {
        free(tv);
        free(texts);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    if (n_args)
        memcpy(tv, args, n_args * sizeof *tv);
    rc = unix_args(g, r.decl, tv, n_args, texts, err);
    if (!rc)
        rc = cbf_params_build_text(r.decl->args, r.decl->n_args, tv, n_args, where, &ctx, &r.args, err);
    free(tv);
    free(texts);
    if (rc)
        return rc == CBF_ENOMEM ? rc : (err->code = CBF_EINVAL);
    if (!(r.reply = cbf_rt_reply_new())) {
        cbf_params_free(r.args);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    rc = cbf_rt_node_submit(cbf_rt_engine_node(e, at), &r, CBF_RT_REQUEST_TIMEOUT_MS);
    cbf_params_free(r.args);
    if (rc < 0) {
        *err = r.err;
        cbf_rt_reply_free(r.reply);
        return rc;
    }
    raise_steady_state(cbf_rt_engine_node(e, at), r.decl, r.reply);
    *reply = r.reply;
    return CBF_OK;
}
