/* The receiver's chunk window: see window.h. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "window.h"

int rx_window_init(rx_window *w, int n_ring, cbf_error *err)
{
    pthread_mutex_init(&w->lock, NULL);
    w->n_ring = n_ring;
    w->ring = calloc((size_t)n_ring, sizeof *w->ring);
    for (int i = 0; w->ring && i < n_ring; i++)
        if (!(w->ring[i].pieces = calloc(w->n_flags, sizeof(uint16_t))))
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if (!w->ring)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    return 0;
}

void rx_window_free(rx_window *w)
{
    if (!w->ring)
        return;
    for (int i = 0; i < w->n_ring; i++)
        free(w->ring[i].pieces);
    free(w->ring);
    w->ring = NULL;
    pthread_mutex_destroy(&w->lock);
}

/* Sends a chunk on (lock held). */
static int rx_window_emit(rx_window *w, rx_chunk *c)
{
    /* Other threads may still copy heaps they claimed here: a memcpy each. */
    while (atomic_load_explicit(&c->writers, memory_order_acquire))
        sched_yield();
    cbf_buffer *b = c->buf;
    c->buf = NULL;
    uint64_t missing = 0;
    for (size_t f = 0; f < w->n_flags; f++)
        if (!b->present[f]) {
            missing++;
            if (w->flag_bytes)
                memset((uint8_t *)b->data + f * w->flag_bytes, 0, w->flag_bytes);
        }
    b->missing = missing;
    b->seq = w->seq++;
    cbf_counter_add(w->c_chunks, 1);
    cbf_counter_add(w->c_missing, missing);
    return cbf_port_send(w->out, b);
}

/* Makes sure chunk idx has a buffer: zeroed payload, every flag missing
 * until its heaps arrive. */
static int rx_window_open_chunk(rx_window *w, rx_chunk *c, int64_t idx)
{
    if (c->buf)
        return 0;
    int rc = cbf_pool_get(w->pool, &c->buf);
    if (rc)
        return rc;
    c->buf->timestamp = idx * w->chunk_step;
    if (!w->flag_bytes)
        memset(c->buf->data, 0, w->bytes);
    memset(c->buf->present, 0, w->n_flags);
    c->buf->n_present = w->n_flags;
    memset(c->pieces, 0, w->n_flags * sizeof *c->pieces);
    return 0;
}

/* Moves the window so that idx fits, sending chunks that fall out of it.
 * A chunk that saw no heap at all still goes out, all flagged missing, so
 * the timeline downstream has no holes. */
static int rx_window_advance(rx_window *w, int64_t idx)
{
    while (idx >= w->base + w->n_ring) {
        rx_chunk *c = &w->ring[w->base % w->n_ring];
        int rc = rx_window_open_chunk(w, c, w->base);
        if (!rc)
            rc = rx_window_emit(w, c);
        if (rc)
            return rc;
        w->base++;
    }
    return 0;
}

/* Copies the claimed heaps' bytes and lets their chunks go (lock not held). */
static void rx_window_copy(rx_place *heaps, int n)
{
    for (int i = 0; i < n; i++)
        if (heaps[i].claimed) {
            memcpy((uint8_t *)heaps[i].claimed->buf->data + heaps[i].offset, heaps[i].data, heaps[i].len);
            atomic_fetch_sub_explicit(&heaps[i].claimed->writers, 1, memory_order_release);
            heaps[i].claimed = NULL;
        }
}

/* Claims heap h's place (lock held): false when it has none (late, again,
 * or the window failed). */
static bool rx_window_claim(rx_window *w, rx_place *h)
{
    if (!w->started) {
        w->base = h->idx;
        w->started = true;
    }
    if (atomic_load(&w->send_rc))
        return false;
    if (h->idx < w->base) {
        cbf_counter_add(w->c_late_heaps, 1);
        return false;
    }
    rx_chunk *c = &w->ring[h->idx % w->n_ring];
    int rc = rx_window_advance(w, h->idx);
    if (rc || (rc = rx_window_open_chunk(w, c, h->idx))) {
        atomic_store(&w->send_rc, rc);
        return false;
    }
    if (c->pieces[h->flag] >= h->need) {   /* the same heap again (a second sender, a replay) */
        cbf_counter_add(w->c_bad_heaps, 1);
        return false;
    }
    if (++c->pieces[h->flag] == h->need)
        c->buf->present[h->flag] = 1;   /* seen downstream only once the copy is done */
    if (h->idx > w->last_index)
        w->last_index = h->idx;
    atomic_fetch_add_explicit(&c->writers, 1, memory_order_relaxed);
    h->claimed = c;
    return true;
}

void rx_window_place(rx_window *w, rx_place *heaps, int n)
{
    int done = 0;   /* heaps before this one are copied */
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < n; i++) {
        heaps[i].claimed = NULL;
        /* Moving the window waits for the chunks that leave to be copied
         * into: this thread's own claims first, without the lock. */
        if (done < i && w->started && heaps[i].idx >= w->base + w->n_ring) {
            pthread_mutex_unlock(&w->lock);
            rx_window_copy(heaps + done, i - done);
            done = i;
            pthread_mutex_lock(&w->lock);
        }
        rx_window_claim(w, &heaps[i]);
    }
    pthread_mutex_unlock(&w->lock);
    rx_window_copy(heaps + done, n - done);
}

int rx_window_drain(rx_window *w)
{
    pthread_mutex_lock(&w->lock);
    int rc = atomic_load(&w->send_rc);
    /* rx_window_advance() keeps n_ring chunks open; here every one up to the last goes. */
    if (!rc && w->started && w->last_index >= w->base)
        rc = rx_window_advance(w, w->last_index + w->n_ring);
    for (int i = 0; i < w->n_ring; i++)
        if (w->ring[i].buf) {   /* after an error: give buffers back unsent */
            cbf_buffer_unref(w->ring[i].buf);
            w->ring[i].buf = NULL;
        }
    pthread_mutex_unlock(&w->lock);
    return rc;
}
