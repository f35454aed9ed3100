/* buffer.c: fixed pools of reference-counted buffers.
 *
 * Everything is allocated at creation, so taking and returning a buffer in
 * the steady state touches only the free list (one mutex, one condvar per
 * pool). The refcount is atomic because fan-out hands one buffer to several
 * consumer threads, and whichever drops the last reference returns it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/gpu.h"
#include "cbf/log.h"
#include "runtime.h"

struct cbf_pool {
    cbf_pool_config cfg;
    char name[128];
    cbf_buffer *bufs;
    cbf_buffer **free_list;   /* LIFO: the most recently used buffer is warm in cache */
    size_t n_free;
    uint8_t *present_mem;
    uint8_t *aux_mem;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool aborted;
    cbf_pool *next;           /* a node's list of owned pools */

    /* CBF_POOL_POISON=1 (tests): a returned buffer is filled with
     * POOL_POISON, so a holder that reads it after letting go sees junk. */
    bool poison_on_return;

    /* Harness mode only (cbf_rt_pool_set_growing). */
    atomic_uint_least64_t *grown;   /* non-NULL: grow by one instead of blocking */
    bool poison;
    size_t n_base;            /* buffers in bufs; the rest are extras */
    struct extra *extras;
};

/* A buffer added in harness mode, with its flags and aux after it. */
struct extra {
    cbf_buffer b;
    struct extra *next;
};

#define POOL_POISON 0xa5

bool cbf_pool_keeps_payload(const cbf_pool *pool)
{
    return !pool->poison_on_return && !pool->poison;
}

static bool pool_poison_wanted(void)
{
    const char *v = getenv("CBF_POOL_POISON");
    return v && *v && strcmp(v, "0") != 0;
}

const char *cbf_mem_kind_name(cbf_mem_kind kind)
{
    switch (kind) {
    case CBF_MEM_HOST: return "host";
    case CBF_MEM_PINNED: return "pinned";
    case CBF_MEM_DEVICE: return "device";
    }
    return "unknown";
}

static int alloc_payload(cbf_pool *p, cbf_buffer *b, cbf_error *err)
{
    if (p->cfg.kind == CBF_MEM_HOST) {
        /* aligned_alloc wants a size that is a multiple of the alignment. */
        size_t sz = (p->cfg.size + 63) / 64 * 64;
        b->data = aligned_alloc(64, sz ? sz : 64);
        if (!b->data)
            return cbf_error_set(err, CBF_ENOMEM, "pool '%s': cannot allocate %zu bytes of host memory",
                                 p->name, sz);
        return CBF_OK;
    }
    int rc = cbf_rt_gpu_alloc(p->cfg.kind, p->cfg.size ? p->cfg.size : 1, &b->data, err);
    if (rc == CBF_OK)
        rc = cbf_rt_gpu_event_create(&b->event, err);
    if (rc != CBF_OK)
        cbf_error_prefix(err, "pool '%s'", p->name);
    return rc;
}

static void free_payload(cbf_pool *p, cbf_buffer *b)
{
    if (p->cfg.kind == CBF_MEM_HOST)
        free(b->data);
    else if (b->data)
        cbf_rt_gpu_free(p->cfg.kind, b->data);
    if (b->event)
        cbf_rt_gpu_event_destroy(b->event);
}

static void free_payloads(cbf_pool *p)
{
    for (size_t i = 0; i < p->n_base; i++)
        free_payload(p, &p->bufs[i]);
    for (struct extra *x = p->extras, *next; x; x = next) {
        next = x->next;
        free_payload(p, &x->b);
        free(x);
    }
}

static int setup_buffer(cbf_pool *p, cbf_buffer *b, size_t index, uint8_t *present, uint8_t *aux,
                        cbf_error *err)
{
    b->size = p->cfg.size;
    b->kind = p->cfg.kind;
    b->present = p->cfg.n_present ? present : NULL;
    b->aux = p->cfg.aux_size ? aux : NULL;
    b->aux_size = p->cfg.aux_size;
    b->pool_ = p;
    b->index_ = (unsigned)index;
    atomic_init(&b->refs_, 0);
    return alloc_payload(p, b, err);
}

static void pool_free(cbf_pool *p)
{
    if (p->bufs)
        free_payloads(p);
    free(p->bufs);
    free(p->free_list);
    free(p->present_mem);
    if (p->cfg.kind == CBF_MEM_HOST)
        free(p->aux_mem);
    else if (p->aux_mem)
        cbf_rt_gpu_free(CBF_MEM_PINNED, p->aux_mem);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

int cbf_pool_create(const cbf_pool_config *cfg, cbf_pool **out, cbf_error *err)
{
    *out = NULL;
    const char *name = cfg->name ? cfg->name : "(unnamed)";
    if (cfg->count == 0)
        return cbf_error_set(err, CBF_EINVAL, "pool '%s': count must be at least 1", name);
    if (cfg->kind > CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_EINVAL, "pool '%s': unknown memory kind %d", name, (int)cfg->kind);
    cbf_pool *p = calloc(1, sizeof *p);
    if (!p)
        return cbf_error_set(err, CBF_ENOMEM, "pool '%s': out of memory", name);
    p->cfg = *cfg;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->cfg.name = p->name;
    p->poison_on_return = pool_poison_wanted();
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->aborted, false);

    p->bufs = calloc(cfg->count, sizeof *p->bufs);
    p->free_list = calloc(cfg->count, sizeof *p->free_list);
    if (cfg->n_present)
        p->present_mem = malloc(cfg->count * cfg->n_present);
    /* A GPU producer may copy into aux asynchronously (counts, sums): for
     * pinned and device pools it is pinned, so such a copy never blocks. */
    if (cfg->aux_size && cfg->kind == CBF_MEM_HOST) {
        p->aux_mem = calloc(cfg->count, cfg->aux_size);
    } else if (cfg->aux_size &&
               cbf_rt_gpu_alloc(CBF_MEM_PINNED, cfg->count * cfg->aux_size, (void **)&p->aux_mem,
                                err) == CBF_OK) {
        memset(p->aux_mem, 0, cfg->count * cfg->aux_size);
    } else if (cfg->aux_size) {
        pool_free(p);
        return cbf_error_prefix(err, "pool '%s': aux", name);
    }
    if (!p->bufs || !p->free_list || (cfg->n_present && !p->present_mem) ||
        (cfg->aux_size && !p->aux_mem)) {
        pool_free(p);
        return cbf_error_set(err, CBF_ENOMEM, "pool '%s': out of memory for %zu buffers", name,
                             cfg->count);
    }
    p->n_base = cfg->count;
    for (size_t i = 0; i < cfg->count; i++) {
        cbf_buffer *b = &p->bufs[i];
        int rc = setup_buffer(p, b, i, p->present_mem + i * cfg->n_present,
                              p->aux_mem + i * cfg->aux_size, err);
        if (rc != CBF_OK) {
            pool_free(p);
            return rc;
        }
        p->free_list[cfg->count - 1 - i] = b;
    }
    p->n_free = cfg->count;
    cbf_log_debug("pool '%s': %zu x %zu bytes of %s memory", p->name, cfg->count, cfg->size,
                  cbf_mem_kind_name(cfg->kind));
    *out = p;
    return CBF_OK;
}

int cbf_pool_destroy(cbf_pool *pool, cbf_error *err)
{
    if (!pool)
        return CBF_OK;
    pthread_mutex_lock(&pool->mu);
    size_t out = pool->cfg.count - pool->n_free;
    pthread_mutex_unlock(&pool->mu);
    if (out)
        return cbf_error_set(err, CBF_ELEAK, "pool '%s': %zu of %zu buffers never came back",
                             pool->name, out, pool->cfg.count);
    pool_free(pool);
    return CBF_OK;
}

static void reset(cbf_buffer *b)
{
    atomic_store_explicit(&b->refs_, 1, memory_order_relaxed);
    b->timestamp = 0;
    b->seq = 0;
    b->n_present = b->pool_->cfg.n_present;
    if (b->n_present)
        memset(b->present, 1, b->n_present);
    b->saturated = 0;
    b->missing = 0;
    if (b->pool_->poison && b->kind == CBF_MEM_HOST)
        memset(b->data, POOL_POISON, b->size);
}

/* Everything a holder could read, poisoned as the buffer goes back. */
static void poison(cbf_buffer *b)
{
    if (b->kind == CBF_MEM_DEVICE) {
        if (cbf_rt_gpu_fill(b->data, POOL_POISON, b->size) != CBF_OK)
            cbf_log_error("pool '%s': poisoning buffer %u on the GPU failed", b->pool_->name,
                          b->index_);
    } else {
        memset(b->data, POOL_POISON, b->size);
    }
    if (b->present)
        memset(b->present, POOL_POISON, b->pool_->cfg.n_present);
    if (b->aux)
        memset(b->aux, POOL_POISON, b->aux_size);
    memset(&b->timestamp, POOL_POISON, sizeof b->timestamp);
    memset(&b->seq, POOL_POISON, sizeof b->seq);
    memset(&b->saturated, POOL_POISON, sizeof b->saturated);
    memset(&b->missing, POOL_POISON, sizeof b->missing);
}

/* Harness mode: one more buffer on the free list (the pool's lock held). */
static int grow_one(cbf_pool *p)
{
    cbf_buffer **fl = realloc(p->free_list, (p->cfg.count + 1) * sizeof *fl);
    if (!fl)
        return CBF_ENOMEM;
    p->free_list = fl;
    struct extra *x = calloc(1, sizeof *x + p->cfg.n_present + p->cfg.aux_size);
    if (!x)
        return CBF_ENOMEM;
    uint8_t *tail = (uint8_t *)(x + 1);
    if (setup_buffer(p, &x->b, p->cfg.count, tail, tail + p->cfg.n_present, NULL) != CBF_OK) {
        free_payload(p, &x->b);
        free(x);
        return CBF_ENOMEM;
    }
    x->next = p->extras;
    p->extras = x;
    p->cfg.count++;
    p->free_list[p->n_free++] = &x->b;
    atomic_fetch_add(p->grown, 1);
    return CBF_OK;
}

int cbf_pool_get(cbf_pool *pool, cbf_buffer **out)
{
    *out = NULL;
    pthread_mutex_lock(&pool->mu);
    uint64_t t0 = 0;
    while (pool->n_free == 0 && !atomic_load(&pool->aborted)) {
        if (pool->grown) {
            /* The harness runs the node on the test's thread: nobody else
             * could return a buffer, so waiting would never end. */
            if (grow_one(pool) != CBF_OK) {
                pthread_mutex_unlock(&pool->mu);
                return CBF_ENOMEM;
            }
            continue;
        }
        if (!t0)
            t0 = cbf_rt_now_ns();
        pthread_cond_wait(&pool->cv, &pool->mu);
    }
    if (atomic_load(&pool->aborted)) {
        pthread_mutex_unlock(&pool->mu);
        return CBF_ESTOPPED;
    }
    cbf_buffer *b = pool->free_list[--pool->n_free];
    pthread_mutex_unlock(&pool->mu);
    if (t0)
        cbf_rt_node_add_wait(cbf_rt_node_current(), true, cbf_rt_now_ns() - t0);
    reset(b);
    *out = b;
    return CBF_OK;
}

int cbf_pool_try_get(cbf_pool *pool, cbf_buffer **out)
{
    *out = NULL;
    if (atomic_load(&pool->aborted))
        return CBF_ESTOPPED;
    pthread_mutex_lock(&pool->mu);
    cbf_buffer *b = pool->n_free ? pool->free_list[--pool->n_free] : NULL;
    pthread_mutex_unlock(&pool->mu);
    if (!b)
        return CBF_EAGAIN;
    reset(b);
    *out = b;
    return CBF_OK;
}

size_t cbf_pool_count(const cbf_pool *pool) { return pool->cfg.count; }

size_t cbf_pool_free_count(const cbf_pool *pool)
{
    cbf_pool *p = (cbf_pool *)pool; /* the lock is not part of the pool's value */
    pthread_mutex_lock(&p->mu);
    size_t n = p->n_free;
    pthread_mutex_unlock(&p->mu);
    return n;
}

const cbf_pool_config *cbf_pool_config_of(const cbf_pool *pool) { return &pool->cfg; }

void cbf_buffer_ref(cbf_buffer *buf)
{
    atomic_fetch_add_explicit(&buf->refs_, 1, memory_order_relaxed);
}

bool cbf_buffer_is_writable(const cbf_buffer *buf)
{
    /* acquire: pairs with the release in unref, so a writer that sees 1
     * also sees what the holder that just let go wrote. */
    return atomic_load_explicit(&((cbf_buffer *)buf)->refs_, memory_order_acquire) == 1;
}

void cbf_buffer_unref(cbf_buffer *buf)
{
    if (!buf)
        return;
    /* acq_rel: the thread that returns the buffer must see every write the
     * other holders made before they let go. */
    int before = atomic_fetch_sub_explicit(&buf->refs_, 1, memory_order_acq_rel);
    if (before > 1)
        return;
    cbf_pool *p = buf->pool_;
    if (before < 1) {
        /* A double unref is a plugin bug; keeping the count at 0 stops it
         * from returning the buffer twice. */
        atomic_store(&buf->refs_, 0);
        cbf_log_error("pool '%s': buffer %u released more often than referenced", p->name,
                      buf->index_);
        return;
    }
    if (p->poison_on_return)
        poison(buf);
    pthread_mutex_lock(&p->mu);
    p->free_list[p->n_free++] = buf;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

int cbf_buffer_copy_to_host(const cbf_buffer *buf, void *dst, size_t bytes, cbf_error *err)
{
    if (bytes > buf->size)
        return cbf_error_set(err, CBF_EINVAL, "copy of %zu bytes from a buffer of %zu bytes", bytes,
                             buf->size);
    if (buf->event) {
        int rc = cbf_buffer_sync_host(buf, err);
        if (rc != CBF_OK)
            return rc;
    }
    if (buf->kind == CBF_MEM_DEVICE)
        return cbf_rt_gpu_memcpy_d2h(dst, buf->data, bytes, err);
    memcpy(dst, buf->data, bytes);
    return CBF_OK;
}

void cbf_rt_pool_abort(cbf_pool *pool)
{
    atomic_store(&pool->aborted, true);
    /* Taking the lock after setting the flag means a waiter either saw the
     * flag before sleeping or is asleep and gets this broadcast. */
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
}

void cbf_rt_pool_set_growing(cbf_pool *pool, atomic_uint_least64_t *grown, bool poison)
{
    pool->grown = grown;
    pool->poison = poison;
}

cbf_pool *cbf_rt_pool_next(cbf_pool *pool) { return pool->next; }
void cbf_rt_pool_set_next(cbf_pool *pool, cbf_pool *next) { pool->next = next; }
