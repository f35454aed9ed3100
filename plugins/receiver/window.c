/* The receiver's chunk window: see window.h. */
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
    cbf_buffer *b = c->buf;
    c->buf = NULL;
    uint64_t missing = 0;
    for (size_t f = 0; f < w->n_flags; f++)
        missing += !b->present[f];
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

void rx_window_place(rx_window *w, int64_t idx, size_t flag, size_t offset, const uint8_t *data,
                     size_t len, unsigned need)
{
    pthread_mutex_lock(&w->lock);
    if (!w->started) {
        w->base = idx;
        w->started = true;
    }
    int rc = atomic_load(&w->send_rc);
    if (rc)
        goto out;
    if (idx < w->base) {
        cbf_counter_add(w->c_late_heaps, 1);
        goto out;
    }
    rx_chunk *c = &w->ring[idx % w->n_ring];
    if ((rc = rx_window_advance(w, idx)) || (rc = rx_window_open_chunk(w, c, idx))) {
        atomic_store(&w->send_rc, rc);
        goto out;
    }
    if (c->pieces[flag] >= need) {   /* the same heap again (a second sender, a replay) */
        cbf_counter_add(w->c_bad_heaps, 1);
        goto out;
    }
    memcpy((uint8_t *)c->buf->data + offset, data, len);
    if (++c->pieces[flag] == need)
        c->buf->present[flag] = 1;
    if (idx > w->last_index)
        w->last_index = idx;
out:
    pthread_mutex_unlock(&w->lock);
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
