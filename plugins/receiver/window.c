/* The receiver's chunk window: see window.h. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "window.h"

int rx_window_init(rx_window *w, int n_ring, cbf_error *err)
{
    if (w->piece_bytes == 0 || w->piece_bytes > UINT32_MAX || w->per_flag > UINT16_MAX)
        return cbf_error_set(err, CBF_ECONFIG, "a heap of %zu bytes, %zu to a flag, is beyond the "
                             "receiver's counts", w->piece_bytes, w->per_flag);
    pthread_mutex_init(&w->lock, NULL);
    w->n_ring = n_ring;
    w->ring = calloc((size_t)n_ring, sizeof *w->ring);
    w->n_hold = w->jump_packets > 1 ? (int)w->jump_packets - 1 : 0;
    w->hold = calloc((size_t)w->n_hold + 1, sizeof *w->hold);
    if (!w->ring || !w->hold)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (int i = 0; i < w->n_hold; i++)
        if (!(w->hold[i].bytes = malloc(w->hold_bytes)))
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (int i = 0; i < n_ring; i++)
        if (!(w->ring[i].got = calloc(w->n_flags * w->per_flag, sizeof(uint32_t))) ||
            !(w->ring[i].done = calloc(w->n_flags, sizeof(uint16_t))))
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    return 0;
}

void rx_window_free(rx_window *w)
{
    for (int i = 0; w->hold && i < w->n_hold; i++)
        free(w->hold[i].bytes);
    free(w->hold);
    w->hold = NULL;
    if (!w->ring)
        return;
    for (int i = 0; i < w->n_ring; i++) {
        free(w->ring[i].got);
        free(w->ring[i].done);
    }
    free(w->ring);
    w->ring = NULL;
    pthread_mutex_destroy(&w->lock);
}

/* Sends a chunk on (lock held). Pieces not complete are zeroed: their flag
 * is missing, and what part of them came is not passed on. */
static int rx_window_emit(rx_window *w, rx_chunk *c)
{
    /* Other threads may still copy bytes they claimed here: a memcpy each. */
    while (atomic_load_explicit(&c->writers, memory_order_acquire))
        sched_yield();
    cbf_buffer *b = c->buf;
    c->buf = NULL;
    uint64_t missing = 0, incomplete = 0, notes = 0;
    uint32_t *note = w->piece_notes ? b->aux : NULL;
    for (size_t p = 0; p < w->n_flags * w->per_flag; p++)
        if (c->got[p] != w->piece_bytes) {
            incomplete += c->got[p] != 0;
            memset((uint8_t *)b->data + p * w->piece_bytes, 0, w->piece_bytes);
            if (note)
                note[p] = 0;
        } else if (note) {
            notes += note[p];
        }
    cbf_counter_add(w->c_notes, notes);
    for (size_t f = 0; f < w->n_flags; f++)
        missing += !b->present[f];
    b->missing = missing;
    b->seq = w->seq++;
    cbf_counter_add(w->c_chunks, 1);
    cbf_counter_add(w->c_missing, missing);
    cbf_counter_add(w->c_incomplete, incomplete);
    /* katgpucbf's rx.synchronised: error while data is missing */
    cbf_gauge_set_status(w->g_sync, missing == 0, missing ? CBF_STATUS_ERROR : CBF_STATUS_NOMINAL);
    double unix_s = cbf_node_unix_time(w->node, b->timestamp);
    cbf_counter_set(w->c_rx_ts, (uint64_t)b->timestamp);
    cbf_gauge_set(w->g_rx_unix, unix_s);
    if (missing)
        cbf_gauge_set(w->g_missing_unix, unix_s);
    return cbf_port_send(w->out, b);
}

/* Makes sure chunk idx has a buffer, every flag missing until its pieces
 * are complete. The payload is not cleared: emit zeroes what did not come. */
static int rx_window_open_chunk(rx_window *w, rx_chunk *c, int64_t idx)
{
    if (c->buf)
        return 0;
    int rc = cbf_pool_get(w->pool, &c->buf);
    if (rc)
        return rc;
    c->buf->timestamp = idx * w->chunk_step;
    memset(c->buf->present, 0, w->n_flags);
    c->buf->n_present = w->n_flags;
    memset(c->got, 0, w->n_flags * w->per_flag * sizeof *c->got);
    memset(c->done, 0, w->n_flags * sizeof *c->done);
    c->flags_done = 0;
    if (w->piece_notes)
        memset(c->buf->aux, 0, c->buf->aux_size);
    return 0;
}

/* Moves the window so that idx fits, sending chunks that fall out of it.
 * A chunk that saw no packet at all still goes out, all flagged missing, so
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

/* The stream has moved far from the window (lock held): every open chunk
 * goes on, and the window starts again at idx, as at the first packet. */
static int rx_window_resync(rx_window *w, int64_t idx)
{
    int64_t from = w->base;
    int rc = w->last_index >= w->base ? rx_window_advance(w, w->last_index + w->n_ring) : 0;
    if (rc)
        return rc;
    cbf_log_warn("the stream moved from chunk %lld to chunk %lld (timestamp %lld) with nothing in "
                 "between for %.1f s: the window restarts there",
                 (long long)from, (long long)idx, (long long)(idx * w->chunk_step), 1e-9 * (double)w->resync_ns);
    w->base = w->last_index = idx;
    return 0;
}

/* Copies the claimed bytes and lets their chunks go (lock not held). */
static void rx_window_copy(rx_window *w, rx_place *places, int n)
{
    for (int i = 0; i < n; i++)
        if (places[i].claimed) {
            memcpy((uint8_t *)places[i].claimed->buf->data + places[i].piece * w->piece_bytes + places[i].offset,
                   places[i].data, places[i].len);
            atomic_fetch_sub_explicit(&places[i].claimed->writers, 1, memory_order_release);
            places[i].claimed = NULL;
        }
}

/* The held packets are not the stream's after all (lock held): outliers. */
static void rx_window_drop_held(rx_window *w)
{
    for (int i = 0; i < w->n_held; i++)
        cbf_counter_add(w->c_outlier, w->hold[i].p.packets ? w->hold[i].p.packets : 1);
    w->n_held = 0;
    w->cand_packets = 0;
}

enum { RX_OUTLIER, RX_HELD, RX_JUMP };

/* Place h is for a chunk past the one after the newest open chunk (lock
 * held). RX_JUMP when it makes jump_packets distinct packets for chunks
 * within the window's width of where the first of them asked for: the
 * stream itself has moved there (a gap, or a digitiser restarted with
 * timestamps ahead). Before that it is held (RX_HELD), or dropped when it
 * repeats a held packet or is too large to hold (RX_OUTLIER, counted by
 * the caller; it still counts as evidence when distinct). A packet that
 * disagrees starts again, the ones held dropped: a lone spoofed or corrupt
 * timestamp never gathers the count. */
static int rx_window_agrees(rx_window *w, const rx_place *h)
{
    if (!w->cand_packets || h->idx < w->cand_idx || h->idx >= w->cand_idx + w->n_ring) {
        rx_window_drop_held(w);
        w->cand_idx = h->idx;
    }
    for (int i = 0; i < w->n_held; i++) {
        const rx_place *o = &w->hold[i].p;
        if (o->idx == h->idx && o->piece == h->piece && o->offset == h->offset)
            return RX_OUTLIER;   /* one packet again is no more evidence */
    }
    w->cand_packets += h->packets ? h->packets : 1;
    if (w->cand_packets >= w->jump_packets)
        return RX_JUMP;
    if (w->n_held == w->n_hold || h->len > w->hold_bytes)
        return RX_OUTLIER;
    struct rx_held *k = &w->hold[w->n_held++];
    memcpy(k->bytes, h->data, h->len);
    k->p = *h;
    k->p.data = k->bytes;
    return RX_HELD;
}

static bool rx_window_claim(rx_window *w, rx_place *h);

/* The jump is taken (lock held): the window moves so that h and every held
 * packet fit, and the held ones are placed (copied here: they are few). */
static void rx_window_take_jump(rx_window *w, const rx_place *h)
{
    int64_t to = h->idx;
    for (int i = 0; i < w->n_held; i++)
        to = w->hold[i].p.idx > to ? w->hold[i].p.idx : to;
    cbf_log_warn("the stream moved from chunk %lld to chunk %lld (timestamp %lld), %u packets agreeing: "
                 "the window follows, the chunks in between flagged missing",
                 (long long)(w->base + w->n_ring - 1), (long long)h->idx,
                 (long long)(h->idx * w->chunk_step), w->jump_packets);
    int rc = rx_window_advance(w, to);
    if (rc)
        atomic_store(&w->send_rc, rc);
    int n = w->n_held;
    w->n_held = 0;
    w->cand_packets = 0;
    for (int i = 0; i < n; i++)
        if (rx_window_claim(w, &w->hold[i].p))
            rx_window_copy(w, &w->hold[i].p, 1);
}

/* Claims place h (lock held): false when it has none (late, ahead, an
 * outlier or held, bytes beyond a complete piece, or the window failed),
 * each counted by the packets the place stands for (a held one once it is
 * placed or dropped). */
static bool rx_window_claim(rx_window *w, rx_place *h)
{
    uint64_t n = h->packets ? h->packets : 1;
    if (!w->started) {
        w->base = h->idx;
        w->started = true;
    }
    if (atomic_load(&w->send_rc)) {
        cbf_counter_add(w->c_stopped, n);
        return false;
    }
    int64_t head = w->base + w->n_ring - 1;
    if (w->cand_packets && w->cand_idx <= head + 1)
        rx_window_drop_held(w);   /* the stream came there step by step, without them */
    bool ahead = h->idx > head + w->max_ahead, far = !ahead && h->idx > head + 1;
    if ((ahead || far || h->idx < w->base) && w->now_ns - w->last_fit_ns >= w->resync_ns) {
        rx_window_drop_held(w);
        int rc = rx_window_resync(w, h->idx);
        if (rc) {
            atomic_store(&w->send_rc, rc);
            cbf_counter_add(w->c_stopped, n);
            return false;
        }
        ahead = far = false;
    }
    if (ahead) {
        cbf_counter_add(w->c_ahead, n);
        return false;
    }
    if (far) {
        int v = rx_window_agrees(w, h);
        if (v == RX_OUTLIER)
            cbf_counter_add(w->c_outlier, n);
        if (v != RX_JUMP)
            return false;
        rx_window_take_jump(w, h);
        if (atomic_load(&w->send_rc)) {
            cbf_counter_add(w->c_stopped, n);
            return false;
        }
    }
    if (h->idx < w->base) {
        cbf_counter_add(w->c_late_packets, n);
        cbf_counter_add(w->c_late_heaps, h->first);
        return false;
    }
    rx_chunk *c = &w->ring[h->idx % w->n_ring];
    int rc = rx_window_advance(w, h->idx);
    if (rc || (rc = rx_window_open_chunk(w, c, h->idx))) {
        atomic_store(&w->send_rc, rc);
        cbf_counter_add(w->c_stopped, n);
        return false;
    }
    /* More bytes than the heap holds: a packet again, or the same heap from
     * a second sender. Counting bytes cannot tell which packet, so it is the
     * one that overflows that is dropped. */
    uint32_t *got = &c->got[h->piece];
    if (*got + h->len > w->piece_bytes) {
        cbf_counter_add(w->c_duplicate, n);
        return false;
    }
    w->accepted += n;   /* added to c_accepted once per batch */
    *got += (uint32_t)h->len;
    if (h->first && w->piece_notes)
        ((uint32_t *)c->buf->aux)[h->piece] = h->note;
    if (*got == w->piece_bytes) {
        cbf_counter_add(w->c_heaps, 1);
        size_t f = h->piece / w->per_flag;
        if (++c->done[f] == w->per_flag) {
            c->buf->present[f] = 1;   /* seen downstream only once the copies are done */
            if (++c->flags_done == w->n_flags)
                w->complete_pending = true;
        }
    }
    if (h->idx > w->last_index)
        w->last_index = h->idx;
    w->last_fit_ns = w->now_ns;
    atomic_fetch_add_explicit(&c->writers, 1, memory_order_relaxed);
    h->claimed = c;
    return true;
}

/* Sends on the complete chunks at the window's tail, in order (lock held;
 * this thread's copies done, others' waited for by emit). */
static void rx_window_release(rx_window *w)
{
    w->complete_pending = false;
    while (w->started && !atomic_load(&w->send_rc)) {
        rx_chunk *c = &w->ring[w->base % w->n_ring];
        if (!c->buf || c->flags_done != w->n_flags)
            break;
        int rc = rx_window_emit(w, c);
        if (rc) {
            atomic_store(&w->send_rc, rc);
            break;
        }
        w->base++;
    }
}

void rx_window_place(rx_window *w, rx_place *places, int n, uint64_t now_ns)
{
    int done = 0;   /* places before this one are copied */
    pthread_mutex_lock(&w->lock);
    if (now_ns > w->now_ns)   /* threads' clocks are read outside the lock */
        w->now_ns = now_ns;
    if (!w->started)
        w->last_fit_ns = w->now_ns;
    for (int i = 0; i < n; i++) {
        places[i].claimed = NULL;
        /* Moving the window (forwards, or back to resynchronise) waits for
         * the chunks that leave to be copied into: this thread's own claims
         * first, without the lock. */
        if (done < i && w->started && (places[i].idx >= w->base + w->n_ring || places[i].idx < w->base)) {
            pthread_mutex_unlock(&w->lock);
            rx_window_copy(w, places + done, i - done);
            done = i;
            pthread_mutex_lock(&w->lock);
        }
        rx_window_claim(w, &places[i]);
    }
    cbf_counter_add(w->c_accepted, w->accepted);
    w->accepted = 0;
    const bool release = w->release_complete && w->complete_pending;
    pthread_mutex_unlock(&w->lock);
    rx_window_copy(w, places + done, n - done);
    if (release) {
        pthread_mutex_lock(&w->lock);
        rx_window_release(w);
        pthread_mutex_unlock(&w->lock);
    }
}

int rx_window_drain(rx_window *w)
{
    pthread_mutex_lock(&w->lock);
    int rc = atomic_load(&w->send_rc);
    rx_window_drop_held(w);   /* the stream ended without them */
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
