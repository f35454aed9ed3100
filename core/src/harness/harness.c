/* harness.c: one plugin on the test's thread (cbf/harness.h).
 *
 * The node is a real cbf_node with the engine's ports, pools, counters and
 * mailbox; what differs is at the ends of its edges. Each input is fed by
 * an output port of the harness's own, each output feeds a queue of the
 * harness's own, and all of these queues are unbounded. What the test
 * pushes and requests is kept in one ordered script, moved onto the queues
 * and into the mailbox only when run() asks for input (harness_feed
 * from cbf_port_recv), which is what puts a request between the right two
 * buffers. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/harness.h"
#include "cbf/log.h"
#include "graph/params_priv.h"
#include "runtime/runtime.h"

#define WHERE "harness"

struct cbf_harness_reply {
    struct cbf_request req;
    struct cbf_harness_reply *next;   /* every reply, for freeing */
};

typedef enum { ITEM_BUFFER, ITEM_REQUEST, ITEM_END } item_kind;

typedef struct item {
    item_kind kind;
    int slot;                  /* port declaration (BUFFER, END) */
    cbf_buffer *buf;
    cbf_harness_reply *reply;
} item;

/* The harness's end of one declared port. */
typedef struct hport {
    cbf_port queue;    /* input: the node's queue; output: where its buffers wait for pull */
    cbf_port up;       /* input: the harness's output feeding it */
    cbf_pool *pool;    /* input: buffers of cbf_harness_new_buffer */
    bool ended;        /* input: cbf_harness_end given */
} hport;

struct cbf_harness {
    cbf_registry *reg;             /* when the plugin was found by name */
    cbf_rt_driver driver;          /* how the runtime calls back into this file */
    cbf_graph_node g;
    cbf_node node;
    bool node_set_up;
    hport *ports;                  /* one per port declaration */
    atomic_bool stopping, aborting;   /* never set: nothing runs beside the node */
    item *script;
    size_t n_items, cap_items, next_item;
    cbf_harness_reply *replies;
    atomic_uint_least64_t grown, input_grown;
    uint64_t pushed, requests;
    bool ran;
    pthread_mutex_t feed_mu;   /* a plugin's helper threads may read inputs too */
};

/* ---- parameters and arguments as "name=value" ---- */

static int split_texts(const char *const *texts, size_t n, const char *what, cbf_text_kv **out,
                       cbf_error *err)
{
    cbf_text_kv *tv = calloc(n + 1, sizeof *tv);
    if (!tv)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(texts[i], '=');
        if (!eq || eq == texts[i]) {
            for (size_t k = 0; k < i; k++)
                free((char *)tv[k].key);
            free(tv);
            return cbf_error_set(err, CBF_EINVAL, WHERE ": %s '%s': expected NAME=VALUE", what, texts[i]);
        }
        tv[i].key = strndup(texts[i], (size_t)(eq - texts[i]));
        tv[i].text = eq + 1;
        tv[i].origin = texts[i];
    }
    *out = tv;
    return CBF_OK;
}

static void free_texts(cbf_text_kv *tv, size_t n)
{
    for (size_t i = 0; tv && i < n; i++)
        free((char *)tv[i].key);
    free(tv);
}

static int build_values(const cbf_param_decl *decls, int n_decls, const char *const *texts, size_t n,
                        const char *what, const char *where, const cbf_params_ctx *ctx,
                        cbf_params **out, cbf_error *err)
{
    cbf_text_kv *tv = NULL;
    int rc = split_texts(texts, n, what, &tv, err);
    for (size_t i = 0; i < n && rc == CBF_OK; i++)
        if (!tv[i].key)
            rc = cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if (rc == CBF_OK)
        rc = cbf_params_build_text(decls, n_decls, tv, n, where, ctx, out, err);
    free_texts(tv, n);
    return rc;
}

/* ---- making one ---- */

static int wire(cbf_harness *h, int pi, cbf_error *err)
{
    cbf_node *n = &h->node;
    cbf_port_slot *s = &n->slots[pi];
    hport *hp = &h->ports[pi];
    char name[64], far[64];
    snprintf(name, sizeof name, "%s.%s", h->g.name, s->decl->name);
    snprintf(far, sizeof far, WHERE ".%s", name);
    if (!(s->ports = calloc(1, sizeof *s->ports)))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if (s->decl->dir == CBF_PORT_IN) {
        s->ports[0] = &hp->queue;
        s->n = 1;
        int rc = cbf_rt_port_init_input(&hp->queue, n, name, 1, &h->aborting, err);
        if (rc == CBF_OK)
            rc = cbf_rt_port_init_output(&hp->up, NULL, far, 1, err);
        if (rc == CBF_OK) {
            hp->queue.type = s->decl->type;
            hp->queue.flags = s->decl->flags;
            hp->queue.unbounded = true;
            cbf_rt_port_link(&hp->up, &hp->queue);
        }
        return rc;
    }
    /* Outputs are the engine's kind (cbf_rt_node_release frees them). */
    cbf_port *out = calloc(1, sizeof *out);
    if (!out)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    s->ports[0] = out;
    s->n = 1;
    int rc = cbf_rt_port_init_output(out, n, name, 1, err);
    out->type = s->decl->type;
    if (rc == CBF_OK)
        rc = cbf_rt_port_init_input(&hp->queue, NULL, far, 1, &h->aborting, err);
    if (rc == CBF_OK) {
        hp->queue.unbounded = true;
        cbf_rt_port_link(out, &hp->queue);
    }
    return rc;
}

/* The runtime's calls back into the harness (cbf_rt_driver), below. */
static void harness_feed(void *ctx, cbf_port *in);
static void harness_pool(void *ctx, cbf_pool *pool);

static int make(cbf_harness *h, const cbf_plugin_desc *d, const char *path, const char *const *params,
                size_t n_params, cbf_error *err)
{
    int rc = cbf_registry_check_desc(d, err);
    if (rc)
        return rc;
    h->g.plugin = d;
    h->g.name = strdup(d->name);
    h->g.plugin_path = strdup(path);
    h->ports = calloc(d->n_ports ? (size_t)d->n_ports : 1, sizeof *h->ports);
    if (!h->g.name || !h->g.plugin_path || !h->ports)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    snprintf(h->g.where, sizeof h->g.where, WHERE);
    cbf_params_ctx ctx = {NULL, d->name, WHERE, d->name, NULL};
    rc = build_values(d->params, d->n_params, params, n_params, "parameter", WHERE, &ctx, &h->g.params, err);
    if (rc)
        return rc;
    rc = cbf_rt_node_setup(&h->node, &h->g, &h->stopping, &h->aborting, err);
    h->node_set_up = true;
    h->driver = (cbf_rt_driver){harness_feed, harness_pool, h};
    h->node.driver = &h->driver;
    for (int pi = 0; pi < d->n_ports && rc == CBF_OK; pi++)
        rc = wire(h, pi, err);
    return rc;
}

static int create(const cbf_plugin_desc *d, cbf_registry *reg, const char *path,
                  const char *const *params, size_t n_params, cbf_harness **out, cbf_error *err)
{
    *out = NULL;
    cbf_harness *h = calloc(1, sizeof *h);
    if (!h) {
        cbf_registry_close(reg);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    h->reg = reg;
    pthread_mutex_init(&h->feed_mu, NULL);
    atomic_init(&h->stopping, false);
    atomic_init(&h->aborting, false);
    atomic_init(&h->grown, 0);
    atomic_init(&h->input_grown, 0);
    int rc = make(h, d, path, params, n_params, err);
    if (rc) {
        cbf_harness_free(h, NULL);
        return rc;
    }
    *out = h;
    return CBF_OK;
}

int cbf_harness_new_desc(const cbf_plugin_desc *desc, const char *const *params, size_t n_params,
                         cbf_harness **out, cbf_error *err)
{
    return create(desc, NULL, "(in the test)", params, n_params, out, err);
}

int cbf_harness_new(const char *plugin, const char *const *params, size_t n_params, cbf_harness **out,
                    cbf_error *err)
{
    *out = NULL;
    cbf_registry *reg;
    int rc = cbf_registry_open(NULL, 0, &reg, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < cbf_registry_count(reg); i++)
        if (!strcmp(cbf_registry_at(reg, i)->name, plugin))
            return create(cbf_registry_at(reg, i), reg, cbf_registry_path_at(reg, i), params, n_params,
                          out, err);
    cbf_registry_close(reg);
    return cbf_error_set(err, CBF_ECONFIG, WHERE ": no plugin '%s' found (cbf-inspect lists the plugins; "
                         "CBF_PLUGIN_PATH adds directories)", plugin);
}

/* ---- ports ---- */

static hport *find_port(const cbf_harness *h, const char *name, cbf_port_dir dir, int *slot, cbf_error *err)
{
    const cbf_plugin_desc *d = h->g.plugin;
    for (int i = 0; i < d->n_ports; i++) {
        if (strcmp(d->ports[i].name, name) || d->ports[i].dir != dir)
            continue;
        if (slot)
            *slot = i;
        return &h->ports[i];
    }
    cbf_error_set(err, CBF_EINVAL, WHERE ": plugin '%s' has no %s '%s'", d->name,
                  dir == CBF_PORT_IN ? "input" : "output", name);
    return NULL;
}

int cbf_harness_set_input_desc(cbf_harness *h, const char *port, const cbf_port_desc *desc, cbf_error *err)
{
    hport *hp = find_port(h, port, CBF_PORT_IN, NULL, err);
    if (!hp)
        return CBF_EINVAL;
    if (h->node.init_called || hp->pool)
        return cbf_error_set(err, CBF_EINVAL, WHERE ": input '%s': the descriptor is set before init "
                             "and before its first buffer", port);
    return cbf_port_set_desc(&hp->up, desc, err);
}

const cbf_port_desc *cbf_harness_output_desc(const cbf_harness *h, const char *port)
{
    int slot;
    if (!find_port(h, port, CBF_PORT_OUT, &slot, NULL))
        return NULL;
    return cbf_port_get_desc(h->node.slots[slot].ports[0]);
}

cbf_node *cbf_harness_node(cbf_harness *h) { return &h->node; }

int cbf_harness_new_buffer(cbf_harness *h, const char *port, cbf_buffer **out, cbf_error *err)
{
    *out = NULL;
    hport *hp = find_port(h, port, CBF_PORT_IN, NULL, err);
    if (!hp)
        return CBF_EINVAL;
    const cbf_port_desc *d = cbf_port_get_desc(&hp->up);
    if (!hp->pool) {
        if (!d || !cbf_port_desc_bytes(d))
            return cbf_error_set(err, CBF_EINVAL, WHERE ": input '%s': set its descriptor (with a shape) "
                                 "first: it says how large a buffer is", port);
        char name[80];
        snprintf(name, sizeof name, WHERE ".%s", port);
        cbf_pool_config cfg = {name, CBF_MEM_HOST, 1, cbf_port_desc_bytes(d), d->n_present, d->aux_size};
        int rc = cbf_pool_create(&cfg, &hp->pool, err);
        if (rc)
            return rc;
        cbf_rt_pool_set_growing(hp->pool, &h->input_grown, false);
    }
    int rc = cbf_pool_get(hp->pool, out);
    if (rc)
        return cbf_error_set(err, rc, WHERE ": input '%s': no buffer: %s", port, cbf_error_name(rc));
    memset((*out)->data, 0, (*out)->size);
    if ((*out)->aux)
        memset((*out)->aux, 0, (*out)->aux_size);
    return CBF_OK;
}

static int add_item(cbf_harness *h, item it, cbf_error *err)
{
    if (h->ran)
        return cbf_error_set(err, CBF_EINVAL, WHERE ": run has returned; nothing more reaches the plugin");
    if (h->n_items == h->cap_items) {
        size_t cap = h->cap_items ? 2 * h->cap_items : 64;
        item *s = realloc(h->script, cap * sizeof *s);
        if (!s)
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        h->script = s;
        h->cap_items = cap;
    }
    h->script[h->n_items++] = it;
    return CBF_OK;
}

int cbf_harness_push(cbf_harness *h, const char *port, cbf_buffer *buf, cbf_error *err)
{
    int slot;
    hport *hp = find_port(h, port, CBF_PORT_IN, &slot, err);
    int rc = hp ? CBF_OK : CBF_EINVAL;
    if (hp && hp->ended)
        rc = cbf_error_set(err, CBF_EINVAL, WHERE ": input '%s' has ended", port);
    if (rc == CBF_OK)
        rc = add_item(h, (item){ITEM_BUFFER, slot, buf, NULL}, err);
    if (rc) {
        cbf_buffer_unref(buf);
        return rc;
    }
    h->pushed++;
    return CBF_OK;
}

int cbf_harness_end(cbf_harness *h, const char *port, cbf_error *err)
{
    const cbf_plugin_desc *d = h->g.plugin;
    if (port && !find_port(h, port, CBF_PORT_IN, NULL, err))
        return CBF_EINVAL;
    for (int i = 0; i < d->n_ports; i++) {
        if (d->ports[i].dir != CBF_PORT_IN || h->ports[i].ended || (port && strcmp(port, d->ports[i].name)))
            continue;
        int rc = add_item(h, (item){ITEM_END, i, NULL, NULL}, err);
        if (rc)
            return rc;
        h->ports[i].ended = true;
    }
    return CBF_OK;
}

/* ---- requests ---- */

int cbf_harness_request(cbf_harness *h, const char *name, const char *const *args, size_t n_args,
                        cbf_harness_reply **reply, cbf_error *err)
{
    *reply = NULL;
    const cbf_plugin_desc *d = h->g.plugin;
    const cbf_request_decl *decl = NULL;
    for (int i = 0; i < d->n_requests && !decl; i++)
        if (!strcmp(d->requests[i].name, name))
            decl = &d->requests[i];
    if (!decl)
        return cbf_error_set(err, CBF_EINVAL, WHERE ": plugin '%s' has no request '%s'", d->name, name);
    cbf_harness_reply *r = calloc(1, sizeof *r);
    if (!r || !(r->req.reply = cbf_rt_reply_new())) {
        free(r);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    r->req.decl = decl;
    r->next = h->replies;
    h->replies = r;
    char where[CBF_WHERE_MAX];
    snprintf(where, sizeof where, "request '%s'", name);
    cbf_params_ctx ctx = {NULL, d->name, WHERE, d->name, name};
    int rc = build_values(decl->args, decl->n_args, args, n_args, "argument", where, &ctx, &r->req.args, err);
    if (rc == CBF_OK)
        rc = add_item(h, (item){ITEM_REQUEST, -1, NULL, r}, err);
    if (rc == CBF_OK)
        *reply = r;
    return rc;
}

int cbf_harness_reply_status(const cbf_harness_reply *r, cbf_error *err)
{
    if (!r->req.done)
        return 1;
    if (err)
        *err = r->req.err;
    return r->req.rc;
}

static json_t *reply_field(const cbf_harness_reply *r, const char *key)
{
    return json_object_get(cbf_rt_reply_json(r->req.reply), key);
}

int cbf_harness_reply_int(const cbf_harness_reply *r, const char *key, int64_t *v)
{
    json_t *j = reply_field(r, key);
    if (!json_is_integer(j))
        return CBF_EINVAL;
    *v = json_integer_value(j);
    return CBF_OK;
}

int cbf_harness_reply_float(const cbf_harness_reply *r, const char *key, double *v)
{
    json_t *j = reply_field(r, key);
    if (!json_is_number(j) && !json_is_null(j))
        return CBF_EINVAL;
    *v = json_is_null(j) ? NAN : json_number_value(j);   /* cbf_reply_float writes NaN as null */
    return CBF_OK;
}

int cbf_harness_reply_string(const cbf_harness_reply *r, const char *key, const char **v)
{
    json_t *j = reply_field(r, key);
    if (!json_is_string(j))
        return CBF_EINVAL;
    *v = json_string_value(j);
    return CBF_OK;
}

/* ---- running ---- */

static void close_inputs(cbf_harness *h)
{
    for (int i = 0; i < h->g.plugin->n_ports; i++)
        if (h->g.plugin->ports[i].dir == CBF_PORT_IN)
            cbf_rt_port_close(&h->ports[i].queue);
}

/* One script item onto its queue or into the mailbox. */
static void feed_one(cbf_harness *h)
{
    item *it = &h->script[h->next_item++];
    if (it->kind == ITEM_BUFFER) {
        cbf_port_send(&h->ports[it->slot].up, it->buf);   /* unbounded: never blocks */
        it->buf = NULL;
    } else if (it->kind == ITEM_END) {
        cbf_rt_port_close(&h->ports[it->slot].queue);
    } else if (cbf_rt_node_post(&h->node, &it->reply->req) == CBF_OK) {
        h->requests++;
    }
}

static bool has_input(cbf_port *in)
{
    pthread_mutex_lock(&in->mu);
    bool yes = in->count || in->closed;
    pthread_mutex_unlock(&in->mu);
    return yes;
}

static void harness_feed(void *ctx, cbf_port *in)
{
    cbf_harness *h = ctx;
    pthread_mutex_lock(&h->feed_mu);
    if (!in) {
        if (h->next_item < h->n_items && h->script[h->next_item].kind == ITEM_REQUEST)
            feed_one(h);
    } else {
        while (h->next_item < h->n_items && !has_input(in))
            feed_one(h);
        if (h->next_item == h->n_items)
            close_inputs(h);   /* nothing more can ever come */
    }
    pthread_mutex_unlock(&h->feed_mu);
}

static void harness_pool(void *ctx, cbf_pool *pool)
{
    cbf_harness *h = ctx;
    cbf_rt_pool_set_growing(pool, &h->grown, true);
}

int cbf_harness_init(cbf_harness *h, cbf_error *err)
{
    if (h->node.init_called)
        return cbf_error_set(err, CBF_EINVAL, WHERE ": init may be called once");
    cbf_error local;
    int rc = cbf_rt_node_init(&h->node, &local);
    if (rc && err)
        *err = local;
    return rc;
}

/* What the plugin did not take: buffers released, requests answered. */
static void drop_script(cbf_harness *h)
{
    for (; h->next_item < h->n_items; h->next_item++) {
        item *it = &h->script[h->next_item];
        if (it->kind == ITEM_BUFFER)
            cbf_buffer_unref(it->buf);
        else if (it->kind == ITEM_REQUEST)
            cbf_rt_node_post(&h->node, &it->reply->req);   /* closed: answered CBF_ESTOPPED */
    }
}

int cbf_harness_run(cbf_harness *h, cbf_error *err)
{
    if (h->ran)
        return cbf_error_set(err, CBF_EINVAL, WHERE ": run may be called once");
    if (!h->node.init_called) {
        int rc = cbf_harness_init(h, err);
        if (rc)
            return rc;
    }
    h->ran = true;
    cbf_node *n = &h->node;
    cbf_error local;
    cbf_error_clear(&local);
    cbf_log_set_thread_name(n->g->name);
    cbf_rt_node_set_current(n);
    atomic_store(&n->run_start_ns, cbf_rt_now_ns());
    int rc = n->g->plugin->run(n, &local);
    atomic_store(&n->run_end_ns, cbf_rt_now_ns());
    cbf_rt_node_mailbox_close(n);
    cbf_rt_node_set_current(NULL);
    cbf_log_set_thread_name(NULL);
    drop_script(h);
    for (int i = 0; i < n->g->plugin->n_ports; i++)
        if (n->g->plugin->ports[i].dir == CBF_PORT_IN)
            cbf_rt_port_detach(&h->ports[i].queue);
    if (rc >= 0)
        return CBF_OK;
    cbf_rt_node_fail(n, "run", rc, &local);
    if (err)
        *err = local;
    return rc;
}

int cbf_harness_pull(cbf_harness *h, const char *port, cbf_buffer **out)
{
    *out = NULL;
    hport *hp = find_port(h, port, CBF_PORT_OUT, NULL, NULL);
    return hp ? cbf_rt_port_take(&hp->queue, out) : CBF_EINVAL;
}

void cbf_harness_get_stats(const cbf_harness *h, cbf_harness_stats *out)
{
    out->pool_grown = atomic_load(&h->grown);
    out->pushed = h->pushed;
    out->received = atomic_load(&h->node.buffers_in);
    out->sent = atomic_load(&h->node.buffers_out);
    out->requests = h->requests;
}

int cbf_harness_counter(const cbf_harness *h, const char *name, uint64_t *v)
{
    for (int i = 0; i < atomic_load(&h->node.n_counters); i++)
        if (!strcmp(h->node.counters[i].name, name)) {
            *v = cbf_counter_get(&h->node.counters[i]);
            return CBF_OK;
        }
    return CBF_EINVAL;
}

int cbf_harness_gauge(const cbf_harness *h, const char *name, double *v)
{
    for (int i = 0; i < atomic_load(&h->node.n_gauges); i++)
        if (!strcmp(h->node.gauges[i].name, name)) {
            *v = cbf_gauge_get(&h->node.gauges[i]);
            return CBF_OK;
        }
    return CBF_EINVAL;
}

/* ---- the end ---- */

static void free_ports(cbf_harness *h)
{
    const cbf_plugin_desc *d = h->g.plugin;
    for (int i = 0; h->ports && i < d->n_ports; i++) {
        cbf_rt_port_destroy(&h->ports[i].queue);
        cbf_rt_port_destroy(&h->ports[i].up);
    }
    free(h->ports);
}

/* Unpulled outputs and unread inputs go back, as the engine releases what
 * is queued when a graph ends. */
static void release_queued(cbf_harness *h)
{
    const cbf_plugin_desc *d = h->g.plugin;
    for (int i = 0; h->ports && i < d->n_ports; i++)
        if (h->ports[i].queue.ring)
            cbf_rt_port_detach(&h->ports[i].queue);
}

static int check_input_pools(cbf_harness *h, int first, cbf_error *err)
{
    for (int i = 0; h->ports && i < h->g.plugin->n_ports; i++) {
        cbf_error perr;
        if (!h->ports[i].pool || cbf_pool_destroy(h->ports[i].pool, &perr) == CBF_OK)
            continue;
        cbf_error_prefix(&perr, "%s: input '%s' of node '%s'", WHERE, h->g.plugin->ports[i].name, h->g.name);
        cbf_log_error("%s", perr.msg);
        if (first == CBF_OK) {
            first = perr.code;
            if (err)
                *err = perr;
        }
    }
    return first;
}

int cbf_harness_free(cbf_harness *h, cbf_error *err)
{
    if (!h)
        return CBF_OK;
    int first = CBF_OK;
    if (h->node_set_up) {
        cbf_rt_node_mailbox_close(&h->node);
        drop_script(h);
        release_queued(h);
        if (h->node.init_called && h->g.plugin->fini) {
            cbf_log_set_thread_name(h->g.name);
            h->g.plugin->fini(&h->node);
            cbf_log_set_thread_name(NULL);
        }
        first = cbf_rt_node_free_pools(&h->node, err);
        first = check_input_pools(h, first, err);
        cbf_rt_node_release(&h->node);
    }
    free_ports(h);
    for (cbf_harness_reply *r = h->replies, *next; r; r = next) {
        next = r->next;
        cbf_rt_reply_free(r->req.reply);
        cbf_params_free(r->req.args);
        free(r);
    }
    free(h->script);
    pthread_mutex_destroy(&h->feed_mu);
    cbf_params_free(h->g.params);
    free(h->g.name);
    free(h->g.plugin_path);
    cbf_registry_close(h->reg);
    free(h);
    return first;
}
