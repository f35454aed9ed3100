/* staging.c: see staging.h. */
#include "stage/staging.h"

#include <stdlib.h>
#include <string.h>

#include "cbf/gpu.h"
#include "cbf/log.h"
#include "stage/gpu.h"

static size_t staging_bytes(const cbf_staging *st, size_t samples)
{
    return samples / 8 * (size_t)st->cfg.bits;
}

static size_t staging_cap_heaps(const cbf_staging *st)
{
    return st->cfg.cap / st->cfg.heap;
}

int cbf_staging_init(cbf_staging *st, const cbf_staging_config *cfg, cbf_error *err)
{
    memset(st, 0, sizeof *st);
    st->cfg = *cfg;
    if (!st->cfg.scale)
        st->cfg.scale = 1;
    if (!cfg->heap || cfg->heap % 8 || cfg->cap % cfg->heap || cfg->chunk % cfg->heap ||
        (cfg->kind != CBF_MEM_HOST && cfg->kind != CBF_MEM_DEVICE))
        return cbf_error_set(err, CBF_EINTERNAL, "staging: heaps of %zu samples do not tile "
                             "stages of %zu and chunks of %zu in %s memory", cfg->heap, cfg->cap,
                             cfg->chunk, cbf_mem_kind_name(cfg->kind));
    const size_t flags = 2 * staging_cap_heaps(st);
    st->present = calloc(flags, 1);
    st->spare_present = calloc(flags, 1);
    if (!st->present || !st->spare_present)
        return cbf_error_set(err, CBF_ENOMEM, "staging: flags");
    for (int q = 0; q < 2; q++) {
        int rc;
        if ((rc = cbf_stage_alloc(cfg->kind, cfg->pol_bytes, (void **)&st->data[q], "staging", err)) ||
            (rc = cbf_stage_alloc(cfg->kind, cfg->pol_bytes, (void **)&st->spare[q], "staging", err)))
            return rc;
    }
    if (cfg->kind != CBF_MEM_DEVICE)
        return 0;
    int rc;
    if ((rc = cbf_stage_stream_create(&st->upload, err)) ||
        (rc = cbf_stage_event_create(&st->vacated[0], err)) ||
        (rc = cbf_stage_event_create(&st->vacated[1], err)))
        return rc;
    return cbf_stage_hold_init(&st->held, 1, err);
}

int cbf_staging_flush(cbf_staging *st, cbf_error *err)
{
    return st->held.buf ? cbf_stage_hold_release(&st->held, 1, err) : 0;
}

void cbf_staging_fini(cbf_staging *st)
{
    if (st->held.buf)
        cbf_stage_hold_fini(&st->held);
    /* Nothing is queued on the streams once the held buffers are done but
     * kernels the plugin may still have queued on cfg.stream: the plugin
     * waits for its own stream before freeing the stages. */
    cbf_stage_event_destroy(st->vacated[0]);
    cbf_stage_event_destroy(st->vacated[1]);
    cbf_stage_stream_destroy(st->upload);
    for (int q = 0; q < 2; q++) {
        cbf_stage_free(st->cfg.kind, st->data[q]);
        cbf_stage_free(st->cfg.kind, st->spare[q]);
    }
    free(st->present);
    free(st->spare_present);
    memset(st, 0, sizeof *st);
}

/* Whether `samples` more fit in the live stage. */
static int staging_room(const cbf_staging *st, size_t samples, cbf_error *err)
{
    if (st->len + samples <= st->cfg.cap)
        return 0;
    return cbf_error_set(err, CBF_EINTERNAL, "staging: %zu samples held, %zu more do not fit in "
                         "%zu", st->len, samples, st->cfg.cap);
}

static int staging_restart(cbf_staging *st, int64_t ts, cbf_error *err)
{
    st->started = 1;
    st->first = ts;
    st->len = 0;
    /* The live stage is written again from its start: uploads wait for
     * what reads it now, as after a move. */
    return st->upload ? cbf_stage_event_record(st->vacated[0], st->cfg.stream, err) : 0;
}

int cbf_staging_place(cbf_staging *st, int64_t ts, cbf_staging_drain_fn drain, void *ctx,
                      int *how, cbf_error *err)
{
    const int64_t end = cbf_staging_end(st);
    *how = CBF_STAGING_CONTINUES;
    if (st->started && ts == end)
        return 0;
    if (!st->started) {
        *how = CBF_STAGING_RESTARTED;
        return staging_restart(st, ts, err);
    }
    if (st->cfg.gaps)
        cbf_counter_add(st->cfg.gaps, 1);
    if (ts < end || ts - end > st->cfg.max_gap) {
        cbf_log_warn("input jumps from digitiser sample %lld to %lld: restarting",
                     (long long)(end * st->cfg.scale), (long long)(ts * st->cfg.scale));
        *how = CBF_STAGING_RESTARTED;
        return staging_restart(st, ts, err);
    }
    *how = CBF_STAGING_FILLED;
    /* One heap at a time, draining in between: the gap may be longer than
     * a stage holds. The check keeps room for the buffer that follows. */
    for (size_t gap = (size_t)(ts - end) / st->cfg.heap; gap; gap--) {
        int rc = drain(ctx, err);
        if (!rc)
            rc = staging_room(st, st->cfg.heap + st->cfg.chunk, err);
        if (!rc)
            rc = cbf_staging_append_missing(st, 1, err);
        if (rc)
            return rc;
    }
    return 0;
}

int cbf_staging_append(cbf_staging *st, cbf_buffer *buf, cbf_error *err)
{
    const cbf_staging_config *c = &st->cfg;
    const int gpu = c->kind == CBF_MEM_DEVICE;
    void *up = gpu ? st->upload : NULL;
    int rc = staging_room(st, c->chunk, err);
    if (!rc && gpu && buf->event)
        rc = cbf_buffer_wait_stream(buf, up, err);
    /* The bytes written here were last read (as the other stage) before
     * the move that vacated this stage. */
    if (!rc && gpu)
        rc = cbf_stage_stream_wait(up, st->vacated[0], err);
    if (!rc && !gpu && buf->kind != CBF_MEM_HOST)
        rc = cbf_buffer_sync_host(buf, err);
    if (!rc && !gpu && buf->kind == CBF_MEM_DEVICE)
        rc = cbf_error_set(err, CBF_ENOTSUP, "staging: device input on the CPU path");
    if (rc)
        return rc;
    const size_t heaps = c->chunk / c->heap, at = st->len / c->heap, slab = staging_bytes(st, c->chunk);
    for (int q = 0; q < 2; q++) {
        rc = cbf_stage_copy(st->data[q] + staging_bytes(st, st->len), c->kind,
                            (const uint8_t *)buf->data + c->slab[q] * slab, buf->kind, slab,
                            up, "staging upload", err);
        if (rc)
            return rc;
        memcpy(st->present + (size_t)q * staging_cap_heaps(st) + at,
               buf->present + c->flag_row[q] * heaps, heaps);
    }
    st->len += c->chunk;
    if (!gpu)
        return 0;
    /* The input buffer goes back once its copies are done; the kernels
     * reading them wait on the GPU. */
    void *copied;
    rc = cbf_stage_hold_push(&st->held, buf, up, &copied, err);
    return rc ? rc : cbf_stage_stream_wait(c->stream, copied, err);
}

int cbf_staging_append_missing(cbf_staging *st, size_t heaps, cbf_error *err)
{
    const size_t n = heaps * st->cfg.heap, at = st->len / st->cfg.heap;
    int rc = staging_room(st, n, err);
    for (int q = 0; q < 2 && !rc; q++) {
        rc = cbf_stage_fill(st->data[q] + staging_bytes(st, st->len), st->cfg.kind, 0,
                            staging_bytes(st, n), st->cfg.stream, "staging gap", err);
        memset(st->present + (size_t)q * staging_cap_heaps(st) + at, 0, heaps);
    }
    if (!rc)
        st->len += n;
    return rc;
}

int cbf_staging_keep(cbf_staging *st, int64_t from, cbf_error *err)
{
    if (from <= st->first)
        return 0;
    size_t drop = (size_t)(from - st->first);
    if (drop > st->len)
        drop = st->len;
    const size_t left = st->len - drop, cap_heaps = staging_cap_heaps(st);
    for (int q = 0; q < 2; q++) {
        int rc = cbf_stage_copy(st->spare[q], st->cfg.kind, st->data[q] + staging_bytes(st, drop),
                                st->cfg.kind, staging_bytes(st, left), st->cfg.stream,
                                "staging move", err);
        if (rc)
            return rc;
        memcpy(st->spare_present + (size_t)q * cap_heaps,
               st->present + (size_t)q * cap_heaps + drop / st->cfg.heap, left / st->cfg.heap);
    }
    if (st->upload) {
        int rc = cbf_stage_event_record(st->vacated[0], st->cfg.stream, err);
        if (rc)
            return rc;
        void *t = st->vacated[0];
        st->vacated[0] = st->vacated[1];
        st->vacated[1] = t;
    }
    for (int q = 0; q < 2; q++) {
        uint8_t *t = st->data[q];
        st->data[q] = st->spare[q];
        st->spare[q] = t;
    }
    uint8_t *t = st->present;
    st->present = st->spare_present;
    st->spare_present = t;
    st->first += (int64_t)drop;
    st->len = left;
    return 0;
}
