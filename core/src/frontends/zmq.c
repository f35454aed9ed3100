/* zmq.c: the engine's control plane. One thread serves a ZeroMQ
 * ROUTER socket (JSON requests, JSON replies: REQ clients see a REP) and
 * publishes sensor messages on a PUB socket every sensor_period seconds. It
 * knows nothing of what the plugins do: it checks a request against the
 * declarations in the plugin descriptors, hands it to the node (request.c)
 * and returns its answer.
 *
 * A request longer than CTL_INLINE_MAX (a gain table: parsing 8 MiB of
 * JSON takes a good part of a second) goes whole to a second thread, the
 * request thread, which answers it through an inproc socket while the
 * control thread goes on answering the others (sensors, small requests)
 * and publishing. One such request at a time: another long one meanwhile
 * is refused at once ("busy"), so at most two long messages are ever held.
 *
 * Memory per request is bounded by its size: jansson's tree of a request
 * may take at most CTL_READ_FACTOR times the request (CTL_READ_FLOOR for a
 * short one), counted by allocator hooks while that thread reads it, so
 * 8 MiB of `{}` or of one-byte keys is refused instead of taking GBs; keys
 * no request declares are refused by name before any value is read
 * (params.c); and after a large request the heap is trimmed, so the memory
 * goes back to the system instead of staying resident.
 *
 * Built-in requests: requests (what this engine accepts), sensors (the
 * message the PUB socket would send now), log-level [level], shutdown
 * (drain and exit as on SIGTERM). See docs/control.md. */
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "cbf/log.h"
#include "graph/params_priv.h"
#include "runtime/engine_view.h"
#include "runtime/frontend.h"
#include "sensors_json.h"

#define POLL_MS 100               /* how soon the thread notices it should stop */
#define CTL_INLINE_MAX (64 << 10) /* longer requests go to the request thread */
#define CTL_MAX_ENVELOPE 8        /* routing frames kept for a reply (REQ: one) */
#define CTL_READ_FACTOR 8         /* jansson's tree: at most this times the request's size */
#define CTL_READ_FLOOR (32u << 20) /* or this, for short requests (a compact gain table) */
#define CTL_TRIM_OVER (1u << 20)  /* a parse that took more: trim the heap after */

/* One message on the ROUTER socket: the envelope (routing ids) and the
 * body after the empty delimiter. */
typedef struct ctl_msg {
    zmq_msg_t env[CTL_MAX_ENVELOPE];
    int n_env;
    zmq_msg_t body;
    bool has_body;
} ctl_msg;

typedef struct cbf_control cbf_control;
struct cbf_control {
    cbf_engine *e;
    const cbf_graph *g;
    void *ctx, *rep, *pub;
    char rep_ep[256], pub_ep[256];
    double period;
    pthread_t thread;
    bool started;
    atomic_bool quit;
    pthread_mutex_t state_mu;  /* the rate state below: publications and `sensors` requests */
    uint64_t seq;              /* sensor messages published */
    cbf_fe_node_counts *prev;  /* at the last publication, for rates */
    uint64_t prev_ns;

    /* The request thread (long requests): one job at a time. */
    void *done_rx, *done_tx;   /* inproc PAIR: its replies, envelope first */
    pthread_t worker;
    bool worker_started;
    pthread_mutex_t job_mu;
    pthread_cond_t job_cv;
    bool job_ready;            /* job waits for the request thread */
    bool busy;                 /* a job is with it, or its reply is on the way */
    ctl_msg job;
};

/* ---- jansson's allocations while a request is read ----
 *
 * jansson builds a tree of small blocks (some 100 bytes for `{}` or a
 * one-byte key), and has no limit of its own. Its allocation hooks are
 * the process's; they count only on a thread that is reading a request
 * (ctl_reading set), everywhere else they are malloc and free, so a block
 * made before they were set is freed by them correctly. */
typedef struct ctl_budget {
    size_t used, peak, limit;
    bool over;
} ctl_budget;

static _Thread_local ctl_budget *ctl_reading;

static size_t block_size(void *p)
{
    return malloc_usable_size(p) + sizeof(size_t);   /* glibc's chunk header */
}

static void *ctl_json_malloc(size_t n)
{
    ctl_budget *b = ctl_reading;
    if (b && (b->over || b->used >= b->limit || n + sizeof(size_t) > b->limit - b->used)) {
        b->over = true;
        return NULL;
    }
    void *p = malloc(n);
    if (b && p) {
        b->used += block_size(p);
        if (b->used > b->peak)
            b->peak = b->used;
    }
    return p;
}

static void ctl_json_free(void *p)
{
    ctl_budget *b = ctl_reading;
    if (b && p) {
        size_t s = block_size(p);
        b->used -= s < b->used ? s : b->used;
    }
    free(p);
}

static void ctl_json_hooks(void)
{
    json_set_alloc_funcs(ctl_json_malloc, ctl_json_free);
}

void cbf_control_endpoint(const char *text, char *out, size_t n)
{
    char *end;
    long port = strtol(text, &end, 10);
    if (*text && !*end && port > 0 && port < 65536)
        snprintf(out, n, "tcp://127.0.0.1:%ld", port);
    else
        snprintf(out, n, "%s", text);
}

static int bind_socket(cbf_control *c, int type, const char *text, const char *key, void **sock,
                       char *ep, size_t epn, cbf_error *err)
{
    cbf_control_endpoint(text, ep, epn);
    *sock = zmq_socket(c->ctx, type);
    if (!*sock)
        return cbf_error_set(err, CBF_EIO, "%s: engine.%s: zmq_socket: %s", c->g->engine.where, key,
                             zmq_strerror(zmq_errno()));
    int linger = type == ZMQ_PUB ? 500 : 0;   /* let the last sensor message leave */
    /* The largest request any stage needs is a gain table: 2 x 65536
     * values in full double precision, about 3 MB of JSON. A longer
     * message is not read at all (ZeroMQ drops that client's connection),
     * so it cannot hold the control thread or the memory for long; and at
     * most a few requests wait behind the one being answered. */
    int64_t maxmsg = CBF_CONTROL_MAX_REQUEST;
    int hwm = 4;
    zmq_setsockopt(*sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(*sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    zmq_setsockopt(*sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
    if (zmq_bind(*sock, ep) != 0)
        return cbf_error_set(err, CBF_EIO, "%s: engine.%s: cannot bind '%s': %s", c->g->engine.where,
                             key, ep, zmq_strerror(zmq_errno()));
    /* A wildcard port ("tcp://127.0.0.1:*") is resolved by the bind. */
    size_t len = epn;
    zmq_getsockopt(*sock, ZMQ_LAST_ENDPOINT, ep, &len);
    if (strncmp(ep, "tcp://127.", 10) && strncmp(ep, "tcp://localhost:", 16) && strncmp(ep, "ipc://", 6) &&
        strncmp(ep, "inproc://", 9))
        cbf_log_warn("engine.%s listens on %s, beyond this host's loopback: anyone who can reach it "
                     "can %s; bind tcp://127.0.0.1:PORT unless a firewall guards it",
                     key, ep, type == ZMQ_ROUTER ? "change gains and delays, stop captures and shut the engine down"
                                                 : "read every sensor");
    return CBF_OK;
}

static void ctl_msg_close(ctl_msg *m)
{
    for (int i = 0; i < m->n_env; i++)
        zmq_msg_close(&m->env[i]);
    m->n_env = 0;
    if (m->has_body)
        zmq_msg_close(&m->body);
    m->has_body = false;
}

/* Moves the frames of src into dst (which holds none); src is left empty. */
static void ctl_msg_move(ctl_msg *dst, ctl_msg *src)
{
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < src->n_env; i++) {
        zmq_msg_init(&dst->env[i]);
        zmq_msg_move(&dst->env[i], &src->env[i]);
    }
    dst->n_env = src->n_env;
    if (src->has_body) {
        zmq_msg_init(&dst->body);
        zmq_msg_move(&dst->body, &src->body);
        dst->has_body = true;
    }
    ctl_msg_close(src);   /* the moved-from frames are empty now */
}

static void control_free(cbf_control *c)
{
    if (c->rep)
        zmq_close(c->rep);
    if (c->pub)
        zmq_close(c->pub);
    if (c->done_rx)
        zmq_close(c->done_rx);
    if (c->done_tx)
        zmq_close(c->done_tx);
    ctl_msg_close(&c->job);
    pthread_mutex_destroy(&c->state_mu);
    pthread_mutex_destroy(&c->job_mu);
    pthread_cond_destroy(&c->job_cv);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    free(c->prev);
    free(c);
}

static int control_open(cbf_engine *e, void **out, cbf_error *err)
{
    *out = NULL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    if (!g->engine.control && !g->engine.sensors)
        return CBF_OK;
    cbf_control *c = calloc(1, sizeof *c);
    if (!c || !(c->prev = calloc(g->n_nodes + 1, sizeof *c->prev))) {
        free(c);
        return cbf_error_set(err, CBF_ENOMEM, "control: out of memory");
    }
    static pthread_once_t hooks = PTHREAD_ONCE_INIT;
    pthread_once(&hooks, ctl_json_hooks);
    c->e = e;
    c->g = g;
    c->period = g->engine.sensor_period;
    atomic_init(&c->quit, false);
    pthread_mutex_init(&c->state_mu, NULL);
    pthread_mutex_init(&c->job_mu, NULL);
    pthread_cond_init(&c->job_cv, NULL);
    int rc = CBF_OK;
    if (!(c->ctx = zmq_ctx_new()))
        rc = cbf_error_set(err, CBF_EIO, "control: zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (!rc && g->engine.control)
        rc = bind_socket(c, ZMQ_ROUTER, g->engine.control, "control", &c->rep, c->rep_ep,
                         sizeof c->rep_ep, err);
    if (!rc && g->engine.control) {
        /* One name per engine: several engines may share a process. */
        char ep[64];
        snprintf(ep, sizeof ep, "inproc://cbf-control-done-%p", (void *)c);
        if (!(c->done_rx = zmq_socket(c->ctx, ZMQ_PAIR)) || !(c->done_tx = zmq_socket(c->ctx, ZMQ_PAIR)) ||
            zmq_setsockopt(c->done_rx, ZMQ_LINGER, &(int){0}, sizeof(int)) ||
            zmq_setsockopt(c->done_tx, ZMQ_LINGER, &(int){0}, sizeof(int)) ||
            zmq_bind(c->done_rx, ep) || zmq_connect(c->done_tx, ep))
            rc = cbf_error_set(err, CBF_EIO, "control: request thread's socket: %s",
                               zmq_strerror(zmq_errno()));
    }
    if (!rc && g->engine.sensors)
        rc = bind_socket(c, ZMQ_PUB, g->engine.sensors, "sensors", &c->pub, c->pub_ep,
                         sizeof c->pub_ep, err);
    if (rc) {
        control_free(c);
        return rc;
    }
    if (c->rep)
        cbf_log_info("control: requests on %s", c->rep_ep);
    if (c->pub)
        cbf_log_info("control: sensors on %s every %g s", c->pub_ep, c->period);
    *out = c;
    return CBF_OK;
}

/* ---- sensors ---- */

/* The sensor message. Rates are over the time since the last publication
 * (advance: this is a publication, so the next rates start from now). */
static json_t *sensors_locked(cbf_control *c, bool advance)
{
    const cbf_graph *g = c->g;
    uint64_t now = cbf_rt_now_ns();
    double dt = c->prev_ns ? 1e-9 * (double)(now - c->prev_ns) : 0.0;
    json_t *nodes = cbf_fe_sensors_nodes(c->e, c->prev, dt, advance);
    json_t *m = json_object();
    if (!nodes || !m) {
        json_decref(nodes);
        json_decref(m);
        return NULL;
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    json_object_set_new(m, "engine", json_string(g->engine.name ? g->engine.name : ""));
    json_object_set_new(m, "seq", json_integer((json_int_t)c->seq));
    json_object_set_new(m, "time", json_real((double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec));
    json_object_set_new(m, "elapsed_s", json_real(cbf_engine_elapsed(c->e)));
    json_object_set_new(m, "period_s", json_real(c->period));
    cbf_status dev = cbf_rt_engine_status(c->e, cbf_rt_unix_now());
    json_object_set_new(m, "device-status", json_pack("{s:s, s:s}", "value", cbf_rt_device_status_word(dev),
                                                      "status", cbf_status_name(dev)));
    json_object_set_new(m, "nodes", nodes);
    if (advance) {
        c->prev_ns = now;
        c->seq++;
    }
    return m;
}

/* Both threads read sensors: a `sensors` request on the request thread
 * must not race a publication's rate state. */
static json_t *sensors(cbf_control *c, bool advance)
{
    pthread_mutex_lock(&c->state_mu);
    json_t *m = sensors_locked(c, advance);
    pthread_mutex_unlock(&c->state_mu);
    return m;
}

static void publish(cbf_control *c, bool last)
{
    json_t *m = sensors(c, true);
    if (!m)
        return;
    if (last)
        json_object_set_new(m, "final", json_true());
    char *text = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    if (text && zmq_send(c->pub, text, strlen(text), ZMQ_DONTWAIT) < 0 && zmq_errno() != EAGAIN)
        cbf_log_warn("control: publishing sensors: %s", zmq_strerror(zmq_errno()));
    free(text);
}

/* ---- requests ---- */

static json_t *error_reply(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static json_t *error_reply(const char *fmt, ...)
{
    char msg[CBF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_pack("{s:b, s:s}", "ok", 0, "error", msg);
}

static const char *type_word(cbf_param_type t)
{
    static const char *const names[] = {"int", "float", "bool", "string", "choice",
                                        "int list", "float list", "records"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static json_t *describe_args(const cbf_param_decl *a, int n)
{
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack("{s:s, s:s, s:s}", "name", a[i].name, "type", type_word(a[i].type),
                              "doc", a[i].doc ? a[i].doc : "");
        json_object_set_new(o, "default", a[i].def ? json_string(a[i].def) : json_null());
        if (a[i].has_range) {
            json_object_set_new(o, "min", json_real(a[i].min));
            json_object_set_new(o, "max", json_real(a[i].max));
        }
        if (a[i].choices)
            json_object_set_new(o, "choices", json_string(a[i].choices));
        if (a[i].flags & CBF_PARAM_TIMESTAMP)   /* NAME_unix is accepted too (request.c) */
            json_object_set_new(o, "timestamp", json_true());
        json_array_append_new(list, o);
    }
    return list;
}

static const cbf_param_decl log_args[] = {
    {"level", CBF_PARAM_CHOICE, "(current)", CBF_NORANGE, "error|warn|info|debug|trace",
     "new log level; left out: only report the current one"},
};

static const struct builtin {
    const char *name, *doc;
    const cbf_param_decl *args;
    int n_args;
} builtins[] = {
    {"requests", "list the requests this engine accepts, with their arguments", NULL, 0},
    {"sensors", "read the sensors now (the message the PUB socket sends)", NULL, 0},
    {"log-level", "read or set the log level", log_args, 1},
    {"shutdown", "drain the pipeline and exit 0, as on SIGTERM", NULL, 0},
};

static json_t *list_requests(cbf_control *c)
{
    json_t *list = json_array();
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
        json_t *o = json_pack("{s:s, s:n, s:s}", "name", builtins[i].name, "node", "doc", builtins[i].doc);
        json_object_set_new(o, "args", describe_args(builtins[i].args, builtins[i].n_args));
        json_array_append_new(list, o);
    }
    for (size_t i = 0; i < c->g->n_nodes; i++) {
        const cbf_graph_node *gn = &c->g->nodes[i];
        const cbf_plugin_desc *d = gn->plugin;
        for (int k = 0; k < d->n_requests; k++) {
            const cbf_request_decl *r = &d->requests[k];
            json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "name", r->name, "node", gn->name, "plugin",
                                  d->name, "doc", r->doc ? r->doc : "");
            json_object_set_new(o, "args", describe_args(r->args, r->n_args));
            json_array_append_new(list, o);
        }
    }
    return json_pack("{s:b, s:o}", "ok", 1, "requests", list);
}

/* Arguments as text for the shared request path: each JSON value written
 * out as JSON (which YAML reads as a flow value) and checked by the same
 * code that checks YAML parameters, so a request and a parameter of one
 * declared type accept the same values. */
static json_t *plugin_request(cbf_control *c, const char *name, const char *node, json_t *req)
{
    size_t n = json_object_size(req), nt = 0;
    cbf_text_kv *tv = calloc(n + 1, sizeof *tv);
    cbf_error err;
    cbf_error_clear(&err);
    int rc = tv ? CBF_OK : cbf_error_set(&err, CBF_ENOMEM, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(req, key, v)
    {
        if (rc || !strcmp(key, "request") || !strcmp(key, "node"))
            continue;
        if (json_is_null(v) || json_is_object(v)) {
            rc = cbf_error_set(&err, CBF_EINVAL, "request '%s': argument '%s': expected a value or a "
                               "list, got %s", name, key, json_is_null(v) ? "null" : "an object");
        } else if (!(tv[nt].text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT))) {
            rc = cbf_error_set(&err, CBF_ENOMEM, "out of memory");
        } else {
            tv[nt++].key = key;
        }
    }
    size_t at = 0;
    cbf_reply *reply = NULL;
    if (!rc)
        rc = cbf_rt_request_call(c->e, name, node, tv, nt, &at, &reply, &err);
    for (size_t i = 0; i < nt; i++)
        free((char *)tv[i].text);
    free(tv);
    if (rc == CBF_ENOTSUP)
        return error_reply("%s (`requests` lists what this engine accepts)", err.msg);
    if (rc)
        return error_reply("%s", err.msg);
    json_t *out = json_deep_copy(cbf_rt_reply_json(reply));
    cbf_rt_reply_free(reply);
    json_object_set_new(out, "ok", json_true());
    json_object_set_new(out, "node", json_string(c->g->nodes[at].name));
    return out;
}

static json_t *builtin_request(cbf_control *c, const struct builtin *b, json_t *req)
{
    const char *key;
    json_t *v;
    json_object_foreach(req, key, v)
    {
        if (!strcmp(key, "request"))
            continue;
        bool known = false;
        for (int i = 0; i < b->n_args; i++)
            known |= !strcmp(key, b->args[i].name);
        if (!known)
            return error_reply("request '%s' takes no argument '%s'%s", b->name, key,
                               !strcmp(key, "node") ? " (it is the engine's, not a node's)" : "");
    }
    if (!strcmp(b->name, "requests"))
        return list_requests(c);
    if (!strcmp(b->name, "sensors")) {
        json_t *s = sensors(c, false);
        return s ? json_pack("{s:b, s:o, s:o}", "ok", 1, "sensors", s, "publish",
                             c->pub ? json_string(c->pub_ep) : json_null())
                 : error_reply("out of memory");
    }
    if (!strcmp(b->name, "log-level")) {
        static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
        json_t *lv = json_object_get(req, "level");
        if (lv) {
            cbf_log_level l;
            if (!json_is_string(lv) || cbf_log_level_parse(json_string_value(lv), &l))
                return error_reply("request 'log-level': argument 'level': expected one of error, "
                                   "warn, info, debug, trace");
            cbf_log_set_level(l);
            cbf_log_info("log level set to %s", names[l]);
        }
        return json_pack("{s:b, s:s}", "ok", 1, "level", names[cbf_log_get_level()]);
    }
    if (c->g->engine.read_only)
        return error_reply("request 'shutdown' refused: the engine is read-only (%s: engine.read_only: "
                           "true)", c->g->engine.read_only_where);
    /* shutdown: the reply goes first; the graph then drains as on SIGTERM. */
    cbf_log_info("shutdown requested");
    cbf_engine_stop(c->e);
    return json_pack("{s:b, s:b}", "ok", 1, "draining", 1);
}

/* *peak: the most jansson's tree of the request took while it was read. */
static json_t *handle(cbf_control *c, const char *text, size_t len, size_t *peak)
{
    json_error_t jerr;
    ctl_budget b = {.limit = len < CTL_READ_FLOOR / CTL_READ_FACTOR ? CTL_READ_FLOOR : len * CTL_READ_FACTOR};
    ctl_reading = &b;
    json_t *req = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    ctl_reading = NULL;
    *peak = b.peak;
    if (!req && b.over)
        return error_reply("request refused: reading its %zu bytes of JSON takes more than %zu MiB "
                           "(%d times its size, at least %u MiB): too many values, lists or keys for "
                           "its length", len, b.limit >> 20, CTL_READ_FACTOR, CTL_READ_FLOOR >> 20);
    if (!req)
        return error_reply("not valid JSON: %s (at character %d)", jerr.text, jerr.position);
    json_t *out;
    const char *name = json_string_value(json_object_get(req, "request"));
    json_t *node = json_object_get(req, "node");
    if (!json_is_object(req))
        out = error_reply("expected a JSON object such as {\"request\": \"sensors\"}");
    else if (!name)
        out = error_reply("no \"request\" (a string) in the object; {\"request\": \"requests\"} "
                          "lists them");
    else if (node && !json_is_string(node))
        out = error_reply("\"node\" must be a string");
    else {
        out = NULL;
        for (size_t i = 0; i < sizeof builtins / sizeof builtins[0] && !out; i++)
            if (!strcmp(name, builtins[i].name))
                out = builtin_request(c, &builtins[i], req);
        if (!out)
            out = plugin_request(c, name, json_string_value(node), req);
    }
    if (out && name && !json_object_get(out, "request"))
        json_object_set_new(out, "request", json_string(name));
    json_decref(req);
    return out;
}

/* Reads one whole message from the ROUTER socket: the routing frames up
 * to the empty delimiter, then the body. False when there was none, or it
 * had no delimiter (not from a REQ-like client: dropped, as REP drops it). */
static bool ctl_recv(cbf_control *c, ctl_msg *m, bool *multipart)
{
    memset(m, 0, sizeof *m);
    *multipart = false;
    bool more = true, delim = false, ok = true;
    for (int flags = ZMQ_DONTWAIT; more; flags = 0) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, c->rep, flags) < 0) {
            zmq_msg_close(&f);
            ok = false;
            break;
        }
        more = zmq_msg_more(&f);
        if (!delim && zmq_msg_size(&f) == 0) {
            delim = true;
            zmq_msg_close(&f);
        } else if (!delim && m->n_env < CTL_MAX_ENVELOPE) {
            zmq_msg_init(&m->env[m->n_env]);
            zmq_msg_move(&m->env[m->n_env++], &f);
            zmq_msg_close(&f);
        } else if (delim && !m->has_body) {
            zmq_msg_init(&m->body);
            zmq_msg_move(&m->body, &f);
            zmq_msg_close(&f);
            m->has_body = true;
        } else {
            *multipart |= delim;   /* parts after the body: drained */
            zmq_msg_close(&f);
        }
    }
    if (!ok || !delim || !m->has_body || !m->n_env) {
        ctl_msg_close(m);
        return false;
    }
    return true;
}

/* Sends text to sock behind the envelope of m (and the delimiter). */
static void ctl_send(void *sock, ctl_msg *m, const char *text)
{
    for (int i = 0; i < m->n_env; i++)
        zmq_send(sock, zmq_msg_data(&m->env[i]), zmq_msg_size(&m->env[i]), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, ZMQ_SNDMORE);
    if (zmq_send(sock, text, strlen(text), 0) < 0)
        cbf_log_warn("control: sending a reply: %s", zmq_strerror(zmq_errno()));
}

/* The reply text to one request body (the caller frees it); *peak as handle's. */
static char *answer(cbf_control *c, const void *body, size_t len, size_t *peak)
{
    json_t *out = handle(c, body, len, peak);
    char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
    json_decref(out);
    return text;
}

/* glibc keeps freed memory in its arenas (the request's tree, the message
 * from ZeroMQ's thread): after a large request it goes back to the system,
 * so one request does not leave the engine hundreds of MB larger. The
 * body goes first, and all before the reply: a client that has its reply
 * sees the engine as small as it will be. */
static void give_back(ctl_msg *m)
{
    if (m->has_body)
        zmq_msg_close(&m->body);
    m->has_body = false;
    malloc_trim(0);
}

static const char *const ctl_oom = "{\"ok\": false, \"error\": \"out of memory\"}";

static void serve_one(cbf_control *c)
{
    ctl_msg m;
    bool multipart;
    if (!ctl_recv(c, &m, &multipart))
        return;
    const size_t len = zmq_msg_size(&m.body);
    char *text = NULL;
    size_t peak = 0;
    if (multipart) {
        json_t *out = error_reply("expected one message part holding a JSON object");
        text = json_dumps(out, JSON_COMPACT);
        json_decref(out);
    } else if (len > CTL_INLINE_MAX) {
        pthread_mutex_lock(&c->job_mu);
        bool take = !c->busy;
        if (take) {
            ctl_msg_move(&c->job, &m);
            c->busy = c->job_ready = true;
            pthread_cond_signal(&c->job_cv);
        }
        pthread_mutex_unlock(&c->job_mu);
        if (take) {
            cbf_log_debug("control: a request of %zu bytes goes to the request thread", len);
            return;   /* its reply comes back on done_rx */
        }
        json_t *out = error_reply("busy: another request over %d KiB is being answered; send this "
                                  "one again once it is", CTL_INLINE_MAX >> 10);
        text = json_dumps(out, JSON_COMPACT);
        json_decref(out);
    } else {
        text = answer(c, zmq_msg_data(&m.body), len, &peak);
    }
    if (peak > CTL_TRIM_OVER)
        give_back(&m);
    ctl_send(c->rep, &m, text ? text : ctl_oom);
    free(text);
    ctl_msg_close(&m);
}

/* A reply from the request thread, envelope first: on to its client. */
static void forward_done(cbf_control *c)
{
    for (bool more = true; more;) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, c->done_rx, 0) < 0) {
            zmq_msg_close(&f);
            break;
        }
        more = zmq_msg_more(&f);
        if (zmq_msg_send(&f, c->rep, more ? ZMQ_SNDMORE : 0) < 0) {
            zmq_msg_close(&f);
            cbf_log_warn("control: sending a reply: %s", zmq_strerror(zmq_errno()));
        }
    }
    pthread_mutex_lock(&c->job_mu);
    c->busy = false;
    pthread_mutex_unlock(&c->job_mu);
}

/* The request thread: long requests, one at a time. */
static void *worker_main(void *arg)
{
    cbf_control *c = arg;
    cbf_log_set_thread_name("control-long");
    for (;;) {
        pthread_mutex_lock(&c->job_mu);
        while (!c->job_ready && !atomic_load(&c->quit))
            pthread_cond_wait(&c->job_cv, &c->job_mu);
        if (!c->job_ready) {
            pthread_mutex_unlock(&c->job_mu);
            return NULL;
        }
        ctl_msg m;
        ctl_msg_move(&m, &c->job);
        c->job_ready = false;
        pthread_mutex_unlock(&c->job_mu);
        uint64_t t0 = cbf_rt_now_ns();
        size_t peak = 0;
        char *text = answer(c, zmq_msg_data(&m.body), zmq_msg_size(&m.body), &peak);
        cbf_log_debug("control: a request of %zu bytes answered in %.1f ms (its JSON took %.1f MiB)",
                      zmq_msg_size(&m.body), 1e-6 * (double)(cbf_rt_now_ns() - t0), (double)peak / (1 << 20));
        give_back(&m);   /* a long request: its message and tree were large */
        ctl_send(c->done_tx, &m, text ? text : ctl_oom);
        free(text);
        ctl_msg_close(&m);
    }
}

static void *control_main(void *arg)
{
    cbf_control *c = arg;
    cbf_log_set_thread_name("control");
    uint64_t period_ns = (uint64_t)(c->period * 1e9);
    uint64_t next = cbf_rt_now_ns();
    c->prev_ns = next;
    if (c->pub)
        next += period_ns;
    while (!atomic_load(&c->quit)) {
        uint64_t now = cbf_rt_now_ns();
        if (c->pub && now >= next) {
            publish(c, false);
            next += period_ns;
            /* A short stall is caught up (the count over time stays right);
             * after a long one the schedule starts again from now. */
            if (next + 5 * period_ns <= now)
                next = now + period_ns;
        }
        long wait = POLL_MS;
        if (c->pub && (long)((next - now) / 1000000u) < wait)
            wait = (long)((next - now) / 1000000u);
        zmq_pollitem_t it[2] = {{c->rep, 0, ZMQ_POLLIN, 0}, {c->done_rx, 0, ZMQ_POLLIN, 0}};
        int r = zmq_poll(it, c->rep ? 2 : 0, wait);
        if (r > 0 && (it[1].revents & ZMQ_POLLIN))
            forward_done(c);
        if (r > 0 && (it[0].revents & ZMQ_POLLIN))
            serve_one(c);
    }
    return NULL;
}

static int control_start(void *state, cbf_error *err)
{
    cbf_control *c = state;
    if (c->rep) {
        if (pthread_create(&c->worker, NULL, worker_main, c) != 0)
            return cbf_error_set(err, CBF_ENOMEM, "control: cannot start its request thread");
        c->worker_started = true;
    }
    if (pthread_create(&c->thread, NULL, control_main, c) != 0)
        return cbf_error_set(err, CBF_ENOMEM, "control: cannot start its thread");
    c->started = true;
    return CBF_OK;
}

static void control_close(void *state)
{
    cbf_control *c = state;
    atomic_store(&c->quit, true);
    if (c->worker_started) {
        /* It finishes the request it holds (a node answers or times out). */
        pthread_mutex_lock(&c->job_mu);
        pthread_cond_broadcast(&c->job_cv);
        pthread_mutex_unlock(&c->job_mu);
        pthread_join(c->worker, NULL);
    }
    if (c->started) {
        pthread_join(c->thread, NULL);
        if (c->pub)
            publish(c, true);
    }
    control_free(c);
}

/* First of the front ends (frontend.h): closed first, its last sensor
 * message leaves while the others still answer. */
static const cbf_frontend zmq_frontend = {"zmq", 10, control_open, control_start, control_close};
CBF_FRONTEND(zmq_frontend)
