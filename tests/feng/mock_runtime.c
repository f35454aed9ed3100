/* mock_runtime.c: see mock_runtime.h. */
#include "mock_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 32
#define MAXV 16

struct cbf_params {
    int n;
    char name[MAXP][40], text[MAXP][128];
    double v[MAXP][MAXV];
    size_t len[MAXP];
};

struct cbf_pool {
    cbf_pool_config cfg;
};

struct cbf_counter {
    uint64_t v;
};

static void parse_value(cbf_params *p, int i, const char *text)
{
    snprintf(p->text[i], sizeof p->text[i], "%s", text);
    p->len[i] = 0;
    const char *s = text[0] == '[' ? text + 1 : text;
    while (*s && p->len[i] < MAXV) {
        char *e;
        double x = strtod(s, &e);
        if (e == s)
            break;
        p->v[i][p->len[i]++] = x;
        s = e;
        while (*s == ',' || *s == ' ')
            s++;
    }
}

static int find(const cbf_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->name[i], name))
            return i;
    return -1;
}

cbf_node *mock_node(const cbf_plugin_desc *d, const char *const *overrides, size_t n,
                    const cbf_port_desc *in_desc)
{
    cbf_node *node = calloc(1, sizeof *node);
    cbf_params *p = calloc(1, sizeof *p);
    node->plugin = d;
    node->params = p;
    for (int i = 0; i < d->n_params && i < MAXP; i++) {
        snprintf(p->name[i], sizeof p->name[i], "%s", d->params[i].name);
        parse_value(p, i, d->params[i].def ? d->params[i].def : "");
        p->n++;
    }
    for (size_t k = 0; k < n; k++) {
        const char *eq = strchr(overrides[k], '=');
        char name[40];
        snprintf(name, sizeof name, "%.*s", (int)(eq - overrides[k]), overrides[k]);
        int i = find(p, name);
        if (i >= 0)
            parse_value(p, i, eq + 1);
    }
    node->in.upstream = in_desc;
    return node;
}

void mock_node_free(cbf_node *n)
{
    for (size_t i = n->out.next; i < n->out.n; i++)
        cbf_buffer_unref(n->out.q[i]);
    for (size_t i = n->in.next; i < n->in.n; i++)
        cbf_buffer_unref(n->in.q[i]);
    free(n->params);
    free(n);
}

cbf_buffer *mock_buffer(size_t bytes, size_t n_present, size_t aux_size)
{
    cbf_buffer *b = calloc(1, sizeof *b);
    b->data = calloc(bytes ? bytes : 1, 1);
    b->size = bytes;
    b->present = malloc(n_present ? n_present : 1);
    memset(b->present, 1, n_present);
    b->n_present = n_present;
    b->aux = calloc(aux_size ? aux_size : 1, 1);
    b->aux_size = aux_size;
    atomic_init(&b->refs_, 1);
    return b;
}

void mock_push(cbf_node *n, cbf_buffer *b) { n->in.q[n->in.n++] = b; }

int mock_run(cbf_node *n, cbf_error *err) { return n->plugin->run(n, err); }

/* ---- the libcbf surface the plugins use ---- */

int64_t cbf_params_int(const cbf_params *p, const char *name)
{
    int i = find(p, name);
    return i < 0 || !p->len[i] ? 0 : (int64_t)p->v[i][0];
}
double cbf_params_float(const cbf_params *p, const char *name)
{
    int i = find(p, name);
    return i < 0 || !p->len[i] ? 0 : p->v[i][0];
}
const char *cbf_params_string(const cbf_params *p, const char *name)
{
    int i = find(p, name);
    return i < 0 ? NULL : p->text[i];
}
size_t cbf_params_len(const cbf_params *p, const char *name)
{
    int i = find(p, name);
    return i < 0 ? 0 : p->len[i];
}
int64_t cbf_params_int_at(const cbf_params *p, const char *name, size_t k)
{
    return (int64_t)p->v[find(p, name)][k];
}
double cbf_params_float_at(const cbf_params *p, const char *name, size_t k)
{
    return p->v[find(p, name)][k];
}
const char *cbf_params_where(const cbf_params *p, const char *name)
{
    (void)p;
    (void)name;
    return "test.yaml:1:1";
}

const cbf_params *cbf_node_params(const cbf_node *n) { return n->params; }
cbf_port *cbf_node_port(cbf_node *n, const char *name, int index)
{
    (void)index;
    return !strcmp(name, "in") ? &n->in : &n->out;
}
void *cbf_node_state(const cbf_node *n) { return n->state; }
void cbf_node_set_state(cbf_node *n, void *state) { n->state = state; }
bool cbf_node_use_gpu(const cbf_node *n)
{
    (void)n;
    return false;
}
int cbf_node_pool_create(cbf_node *n, const cbf_pool_config *cfg, cbf_pool **out, cbf_error *err)
{
    (void)n;
    (void)err;
    cbf_pool *p = calloc(1, sizeof *p);
    p->cfg = *cfg;
    *out = p; /* freed with the process: tests are short */
    return 0;
}
cbf_counter *cbf_node_counter(cbf_node *n, const char *name)
{
    (void)n;
    (void)name;
    return calloc(1, sizeof(cbf_counter));
}
void cbf_counter_add(cbf_counter *c, uint64_t v) { c->v += v; }

int cbf_pool_get(cbf_pool *pool, cbf_buffer **out)
{
    *out = mock_buffer(pool->cfg.size, pool->cfg.n_present, pool->cfg.aux_size);
    /* Poison, so unwritten output shows. */
    memset((*out)->data, 0xa5, pool->cfg.size);
    return 0;
}
void cbf_buffer_unref(cbf_buffer *b)
{
    if (atomic_fetch_sub(&b->refs_, 1) != 1)
        return;
    free(b->data);
    free(b->present);
    free(b->aux);
    free(b);
}
int cbf_buffer_record(cbf_buffer *b, void *s, cbf_error *e)
{
    (void)b, (void)s, (void)e;
    return 0;
}
int cbf_buffer_wait_stream(const cbf_buffer *b, void *s, cbf_error *e)
{
    (void)b, (void)s, (void)e;
    return 0;
}
int cbf_buffer_sync_host(const cbf_buffer *b, cbf_error *e)
{
    (void)b, (void)e;
    return 0;
}
const char *cbf_mem_kind_name(cbf_mem_kind k) { return k == CBF_MEM_HOST ? "host" : "gpu"; }

const cbf_port_desc *cbf_port_get_desc(const cbf_port *in) { return in->upstream; }
int cbf_port_set_desc(cbf_port *out, const cbf_port_desc *d, cbf_error *err)
{
    (void)err;
    out->desc = *d;
    return 0;
}
int cbf_port_recv(cbf_port *in, cbf_buffer **out)
{
    if (in->next == in->n)
        return CBF_EOS;
    *out = in->q[in->next++];
    return 0;
}
int cbf_port_send(cbf_port *out, cbf_buffer *buf)
{
    out->q[out->n++] = buf;
    return 0;
}
void cbf_port_desc_init(cbf_port_desc *d, cbf_dtype dtype, cbf_mem_kind mem)
{
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->mem = mem;
}
int cbf_port_desc_add_axis(cbf_port_desc *d, const char *name, size_t len)
{
    snprintf(d->axes[d->ndim], CBF_AXIS_NAME_MAX, "%s", name);
    d->shape[d->ndim++] = len;
    return 0;
}
int cbf_port_desc_set_attr(cbf_port_desc *d, const char *name, double value)
{
    snprintf(d->attr_names[d->n_attrs], CBF_ATTR_NAME_MAX, "%s", name);
    d->attr_values[d->n_attrs++] = value;
    return 0;
}
int cbf_port_desc_get_attr(const cbf_port_desc *d, const char *name, double *value)
{
    for (int i = 0; i < d->n_attrs; i++)
        if (!strcmp(d->attr_names[i], name)) {
            *value = d->attr_values[i];
            return 0;
        }
    return CBF_EINVAL;
}
size_t cbf_port_desc_bytes(const cbf_port_desc *d)
{
    static const size_t sz[] = {1, 1, 2, 4, 8, 8, 4, 8, 1, 2, 8, 16, 8, 1};
    size_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= d->shape[i];
    return n * sz[d->dtype];
}

/* Runtime requests and gauges: these tests deliver no requests (the
 * control tests do, through the real engine); gauges are kept but unread. */
struct cbf_gauge {
    double v;
};
const cbf_params *cbf_request_args(const cbf_request *r)
{
    (void)r;
    return NULL;
}
int cbf_reply_int(cbf_reply *r, const char *key, int64_t v)
{
    (void)r, (void)key, (void)v;
    return 0;
}
int cbf_reply_float(cbf_reply *r, const char *key, double v)
{
    (void)r, (void)key, (void)v;
    return 0;
}
cbf_gauge *cbf_node_gauge(cbf_node *n, const char *name)
{
    (void)n, (void)name;
    static struct cbf_gauge g[16];
    static int used;
    return &g[used++ % 16];
}
void cbf_gauge_set(cbf_gauge *g, double v)
{
    if (g)
        g->v = v;
}
/* The GPU path never runs on the stand-in runtime (CPU only). */
int cbf_gpu_timer_create(cbf_gpu_timer **out, cbf_error *err)
{
    (void)err;
    *out = NULL;
    return 0;
}
int cbf_gpu_timer_start(cbf_gpu_timer *t, void *stream, cbf_error *err)
{
    (void)t, (void)stream, (void)err;
    return 0;
}
int cbf_gpu_timer_stop(cbf_gpu_timer *t, void *stream, cbf_error *err)
{
    (void)t, (void)stream, (void)err;
    return 0;
}
double cbf_gpu_timer_ms(const cbf_gpu_timer *t)
{
    (void)t;
    return 0;
}
void cbf_gpu_timer_destroy(cbf_gpu_timer *t) { (void)t; }
