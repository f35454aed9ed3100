/* port.c: port descriptors and the bounded queue of each edge.
 *
 * The queue lives in the consumer's input port: one ring, one mutex, two
 * condvars. An output port only lists the inputs it feeds. Blocking is
 * timed only when it actually happens, so the fast path costs one lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/plugin.h"
#include "runtime.h"

static const struct { const char *name; size_t size; } dtypes[] = {
    [CBF_DTYPE_U8] = {"u8", 1},     [CBF_DTYPE_I8] = {"i8", 1},
    [CBF_DTYPE_I16] = {"i16", 2},   [CBF_DTYPE_I32] = {"i32", 4},
    [CBF_DTYPE_I64] = {"i64", 8},   [CBF_DTYPE_U64] = {"u64", 8},
    [CBF_DTYPE_F32] = {"f32", 4},   [CBF_DTYPE_F64] = {"f64", 8},
    [CBF_DTYPE_CI4] = {"ci4", 1},   [CBF_DTYPE_CI8] = {"ci8", 2},
    [CBF_DTYPE_CI32] = {"ci32", 8}, [CBF_DTYPE_CI64] = {"ci64", 16},
    [CBF_DTYPE_CF32] = {"cf32", 8}, [CBF_DTYPE_PACKED] = {"packed", 0},
};

const char *cbf_dtype_name(cbf_dtype t)
{
    return (unsigned)t < sizeof dtypes / sizeof dtypes[0] ? dtypes[t].name : "unknown";
}

size_t cbf_dtype_size(cbf_dtype t)
{
    return (unsigned)t < sizeof dtypes / sizeof dtypes[0] ? dtypes[t].size : 0;
}

void cbf_port_desc_init(cbf_port_desc *d, cbf_dtype dtype, cbf_mem_kind mem)
{
    memset(d, 0, sizeof *d);
    d->dtype = dtype;
    d->mem = mem;
}

int cbf_port_desc_add_axis(cbf_port_desc *d, const char *name, size_t len)
{
    if (d->ndim >= CBF_MAX_DIMS || strlen(name) >= CBF_AXIS_NAME_MAX)
        return CBF_EINVAL;
    snprintf(d->axes[d->ndim], CBF_AXIS_NAME_MAX, "%s", name);
    d->shape[d->ndim++] = len;
    return CBF_OK;
}

int cbf_port_desc_set_attr(cbf_port_desc *d, const char *name, double value)
{
    if (strlen(name) >= CBF_ATTR_NAME_MAX)
        return CBF_EINVAL;
    for (int i = 0; i < d->n_attrs; i++) {
        if (!strcmp(d->attr_names[i], name)) {
            d->attr_values[i] = value;
            return CBF_OK;
        }
    }
    if (d->n_attrs >= CBF_MAX_ATTRS)
        return CBF_EINVAL;
    snprintf(d->attr_names[d->n_attrs], CBF_ATTR_NAME_MAX, "%s", name);
    d->attr_values[d->n_attrs++] = value;
    return CBF_OK;
}

int cbf_port_desc_get_attr(const cbf_port_desc *d, const char *name, double *value)
{
    for (int i = 0; i < d->n_attrs; i++) {
        if (!strcmp(d->attr_names[i], name)) {
            *value = d->attr_values[i];
            return CBF_OK;
        }
    }
    return CBF_EINVAL;
}

size_t cbf_port_desc_elements(const cbf_port_desc *d)
{
    if (d->ndim <= 0)
        return 0;  /* nothing described yet, rather than a scalar */
    size_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= d->shape[i];
    return n;
}

size_t cbf_port_desc_bytes(const cbf_port_desc *d)
{
    size_t n = cbf_port_desc_elements(d);
    return d->dtype == CBF_DTYPE_PACKED ? n : n * cbf_dtype_size(d->dtype);
}

/* Which type this output gives, in d->type: the descriptor names one of
 * the declared alternatives, or, for a single declared type, may leave it
 * NULL. The loader has checked that every consumer takes at least one of
 * the alternatives; here the one chosen must suit them all. A harness's
 * stand-in producer (type NULL) gives what its one consumer takes, unless
 * that is a choice the descriptor has to make. */
static int resolve_type(const cbf_port *out, cbf_port_desc *d, cbf_error *err)
{
    const char *decl = out->type;
    if (!decl && !d->type && out->n_consumers == 1)
        decl = out->consumers[0]->type;
    if (!d->type) {
        if (decl && (strchr(decl, '|') || !strcmp(decl, "*")))
            return cbf_error_set(err, CBF_EINVAL, "output '%s' may give '%s': its descriptor must "
                                 "name which (cbf_port_desc.type)", out->name, decl);
        d->type = decl;
        return CBF_OK;
    }
    if (out->type && !cbf_port_type_accepts(out->type, d->type))
        return cbf_error_set(err, CBF_EINVAL, "output '%s' declares '%s' and cannot give '%s'",
                             out->name, out->type, d->type);
    for (size_t i = 0; i < out->n_consumers; i++) {
        const cbf_port *in = out->consumers[i];
        if (in->type && !cbf_port_type_accepts(in->type, d->type))
            return cbf_error_set(err, CBF_ECONFIG, "output '%s' gives '%s' in this configuration, "
                                 "which input '%s' does not take ('%s')", out->name, d->type,
                                 in->name, in->type);
    }
    return CBF_OK;
}

int cbf_port_set_desc(cbf_port *out, const cbf_port_desc *d, cbf_error *err)
{
    if (!out)
        return CBF_OK;  /* an unwired optional output: nobody reads it */
    if (out->dir != CBF_PORT_OUT)
        return cbf_error_set(err, CBF_EINVAL, "port '%s' is an input: only outputs set a descriptor",
                             out->name);
    cbf_port_desc c = *d;
    int rc = resolve_type(out, &c, err);
    if (rc)
        return rc;
    out->desc = c;
    out->desc_set = true;
    return CBF_OK;
}

const cbf_port_desc *cbf_port_get_desc(const cbf_port *p)
{
    if (!p)
        return NULL;
    const cbf_port *src = p->dir == CBF_PORT_IN ? p->source : p;
    return src && src->desc_set ? &src->desc : NULL;
}

bool cbf_port_feeds_writer(const cbf_port *out)
{
    for (size_t i = 0; out && i < out->n_consumers; i++)
        if (out->consumers[i]->flags & CBF_PORT_WRITES_INPUT)
            return true;
    return false;
}

const char *cbf_port_name(const cbf_port *p) { return p ? p->name : "(unwired)"; }

cbf_node *cbf_port_peer(const cbf_port *in)
{
    return in && in->dir == CBF_PORT_IN && in->source ? in->source->owner : NULL;
}

int cbf_rt_port_init_input(cbf_port *p, cbf_node *owner, const char *name, size_t depth,
                           const atomic_bool *abort, cbf_error *err)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->owner = owner;
    p->dir = CBF_PORT_IN;
    p->depth = depth ? depth : 1;
    p->abort = abort;
    p->ring = calloc(p->depth, sizeof *p->ring);
    if (!p->ring)
        return cbf_error_set(err, CBF_ENOMEM, "queue of port '%s': out of memory", name);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->not_empty, NULL);
    pthread_cond_init(&p->not_full, NULL);
    return CBF_OK;
}

int cbf_rt_port_init_output(cbf_port *p, cbf_node *owner, const char *name, size_t n_consumers,
                            cbf_error *err)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->owner = owner;
    p->dir = CBF_PORT_OUT;
    p->consumers = calloc(n_consumers ? n_consumers : 1, sizeof *p->consumers);
    if (!p->consumers)
        return cbf_error_set(err, CBF_ENOMEM, "port '%s': out of memory", name);
    return CBF_OK;
}

void cbf_rt_port_link(cbf_port *out, cbf_port *in)
{
    out->consumers[out->n_consumers++] = in;
    in->source = out;
}

void cbf_rt_port_destroy(cbf_port *p)
{
    if (p->dir == CBF_PORT_IN && p->ring) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->not_empty);
        pthread_cond_destroy(&p->not_full);
    }
    free(p->ring);
    free(p->consumers);
}

/* The oldest queued buffer; the caller holds the lock and knows count > 0. */
static cbf_buffer *pop(cbf_port *in)
{
    cbf_buffer *b = in->ring[in->head];
    in->head = (in->head + 1) % in->depth;
    in->count--;
    return b;
}

/* An unbounded queue doubles its ring, keeping the order. */
static int grow(cbf_port *q)
{
    cbf_buffer **ring = calloc(2 * q->depth, sizeof *ring);
    if (!ring)
        return CBF_ENOMEM;
    for (size_t i = 0; i < q->count; i++)
        ring[i] = q->ring[(q->head + i) % q->depth];
    free(q->ring);
    q->ring = ring;
    q->head = 0;
    q->depth *= 2;
    return CBF_OK;
}

/* Queues one reference; on failure the caller still owns it. */
static int push(cbf_port *q, cbf_buffer *buf, cbf_node *producer)
{
    pthread_mutex_lock(&q->mu);
    uint64_t t0 = 0;
    while (q->count == q->depth && !q->unbounded && !q->detached && !atomic_load(q->abort)) {
        if (!t0)
            t0 = cbf_rt_now_ns();
        pthread_cond_wait(&q->not_full, &q->mu);
    }
    int rc = CBF_OK;
    bool release = false;
    if (atomic_load(q->abort)) {
        rc = CBF_ESTOPPED;
    } else if (q->detached) {
        q->discarded++;
        release = true;
    } else if (q->count == q->depth && (rc = grow(q)) != CBF_OK) {
        /* unbounded and out of memory: the caller keeps its reference */
    } else {
        q->ring[(q->head + q->count) % q->depth] = buf;
        q->count++;
        pthread_cond_signal(&q->not_empty);
    }
    pthread_mutex_unlock(&q->mu);
    if (t0)
        cbf_rt_node_add_wait(producer, true, cbf_rt_now_ns() - t0);
    if (release)
        cbf_buffer_unref(buf);
    return rc;
}

int cbf_port_send(cbf_port *out, cbf_buffer *buf)
{
    if (!out || out->n_consumers == 0) {
        cbf_buffer_unref(buf);
        return CBF_OK;
    }
    /* One reference per consumer, taken before the first push so that a
     * fast consumer cannot return the buffer while we still hand it out. */
    size_t n = out->n_consumers;
    for (size_t i = 1; i < n; i++)
        cbf_buffer_ref(buf);
    for (size_t i = 0; i < n; i++) {
        int rc = push(out->consumers[i], buf, out->owner);
        if (rc != CBF_OK) {
            for (size_t j = i; j < n; j++)
                cbf_buffer_unref(buf);
            return rc;
        }
    }
    cbf_node *o = out->owner;
    if (o) {
        atomic_fetch_add_explicit(&o->buffers_out, 1, memory_order_relaxed);
        size_t bytes = out->desc_set ? cbf_port_desc_bytes(&out->desc) : 0;
        atomic_fetch_add_explicit(&o->bytes_out, bytes ? bytes : buf->size, memory_order_relaxed);
    }
    return CBF_OK;
}

int cbf_port_recv(cbf_port *in, cbf_buffer **out)
{
    *out = NULL;
    if (!in || in->dir != CBF_PORT_IN)
        return CBF_EOS;  /* an unwired optional input never delivers anything */
    /* Between buffers: the node's runtime requests are handled here, also
     * while it waits (cbf_rt_node_submit wakes this wait); only on the
     * node's own thread, not on helper threads a plugin reads inputs with. */
    cbf_node *self = in->owner && cbf_rt_node_current() == in->owner ? in->owner : NULL;
    if (in->owner && in->owner->driver)   /* also for a plugin's helper threads */
        in->owner->driver->feed(in->owner->driver->ctx, in);
    cbf_rt_node_drain(self);
    pthread_mutex_lock(&in->mu);
    uint64_t t0 = 0;
    while (in->count == 0 && !in->closed && !atomic_load(in->abort)) {
        if (!t0)
            t0 = cbf_rt_now_ns();
        if (self && atomic_load(&self->mb_pending)) {
            pthread_mutex_unlock(&in->mu);
            cbf_rt_node_drain(self);
            pthread_mutex_lock(&in->mu);
            continue;
        }
        pthread_cond_wait(&in->not_empty, &in->mu);
    }
    int rc = CBF_OK;
    if (atomic_load(in->abort)) {
        rc = CBF_ESTOPPED;
    } else if (in->count == 0) {
        rc = CBF_EOS;
    } else {
        *out = pop(in);
        pthread_cond_signal(&in->not_full);
    }
    pthread_mutex_unlock(&in->mu);
    if (t0)
        cbf_rt_node_add_wait(in->owner, false, cbf_rt_now_ns() - t0);
    if (rc == CBF_OK && in->owner)
        atomic_fetch_add_explicit(&in->owner->buffers_in, 1, memory_order_relaxed);
    return rc;
}

int cbf_rt_port_take(cbf_port *in, cbf_buffer **out)
{
    *out = NULL;
    pthread_mutex_lock(&in->mu);
    int rc = CBF_EOS;
    if (in->count) {
        *out = pop(in);
        pthread_cond_signal(&in->not_full);
        rc = CBF_OK;
    }
    pthread_mutex_unlock(&in->mu);
    return rc;
}

void cbf_rt_port_close(cbf_port *in)
{
    pthread_mutex_lock(&in->mu);
    in->closed = true;
    pthread_cond_broadcast(&in->not_empty);
    pthread_mutex_unlock(&in->mu);
}

uint64_t cbf_rt_port_detach(cbf_port *in)
{
    /* Once detached nothing new is queued, so the queue can be emptied one
     * buffer at a time, each released outside the lock (unref may take the
     * pool's lock). */
    pthread_mutex_lock(&in->mu);
    in->detached = true;
    pthread_cond_broadcast(&in->not_full);
    for (;;) {
        if (in->count == 0)
            break;
        cbf_buffer *b = pop(in);
        in->discarded++;
        pthread_mutex_unlock(&in->mu);
        cbf_buffer_unref(b);
        pthread_mutex_lock(&in->mu);
    }
    uint64_t total = in->discarded;
    pthread_mutex_unlock(&in->mu);
    return total;
}

void cbf_rt_port_wake(cbf_port *in)
{
    pthread_mutex_lock(&in->mu);
    pthread_cond_broadcast(&in->not_empty);
    pthread_cond_broadcast(&in->not_full);
    pthread_mutex_unlock(&in->mu);
}
