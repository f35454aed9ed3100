/* flight.c: see flight.h. */
#include "stage/flight.h"

#include <stdlib.h>
#include <string.h>

#include "cbf/gpu.h"
#include "stage/gpu.h"

int cbf_stage_flight_init(cbf_stage_flight *f, size_t cap, cbf_error *err)
{
    memset(f, 0, sizeof *f);
    f->cap = cap ? cap : 1;
    const char *v = getenv("CBF_FLIGHT_DEFER");
    f->defer = v && *v && strcmp(v, "0") != 0;
    f->in = calloc(f->cap, sizeof *f->in);
    f->out = calloc(f->cap, sizeof *f->out);
    if (!f->in || !f->out)
        return cbf_error_set(err, CBF_ENOMEM, "flight: %zu buffers", f->cap);
    return 0;
}

int cbf_stage_flight_push(cbf_stage_flight *f, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    if (f->n == f->cap)
        return cbf_error_set(err, CBF_EINTERNAL, "flight: %zu buffers in flight already", f->n);
    const size_t k = (f->head + f->n) % f->cap;
    cbf_buffer_ref(in);
    f->in[k] = in;
    f->out[k] = out;
    f->n++;
    return 0;
}

/* 1 when the oldest output is complete, 0 while it is not, or an error;
 * with wait, blocks until it is. */
static int flight_done(const cbf_stage_flight *f, const cbf_buffer *out, int wait, cbf_error *err)
{
    if (!out->event)
        return wait || !f->defer;
    if (wait) {
        int rc = cbf_buffer_sync_host(out, err);
        return rc ? rc : 1;
    }
    return cbf_stage_event_done(out->event, err);
}

int cbf_stage_flight_land(cbf_stage_flight *f, size_t keep, cbf_stage_land_fn land, void *ctx,
                          cbf_error *err)
{
    while (f->n) {
        const int done = flight_done(f, f->out[f->head], !land || f->n > keep, err);
        if (!done)
            return 0;
        cbf_buffer *in = f->in[f->head], *out = f->out[f->head];
        f->in[f->head] = f->out[f->head] = NULL;
        f->head = (f->head + 1) % f->cap;
        f->n--;
        int rc = done < 0 ? done : 0;
        if (rc || !land)
            cbf_buffer_unref(out);
        else
            rc = land(ctx, in, out, err);
        cbf_buffer_unref(in);
        /* dropping after an error goes on: nothing may stay held */
        if (rc && land)
            return rc;
    }
    return 0;
}

void cbf_stage_flight_fini(cbf_stage_flight *f)
{
    if (f->n) {
        cbf_error ignored;
        cbf_stage_flight_land(f, 0, NULL, NULL, &ignored);
    }
    free(f->in);
    free(f->out);
    memset(f, 0, sizeof *f);
}

int cbf_stage_upload_init(cbf_stage_upload *u, size_t bytes, cbf_error *err)
{
    memset(u, 0, sizeof *u);
    u->bytes = bytes;
    int rc = cbf_stage_stream_create(&u->stream, err);
    for (int k = 0; k < 2 && !rc; k++)
        if ((rc = cbf_stage_alloc(CBF_MEM_DEVICE, bytes, (void **)&u->slot[k], "input", err)) ||
            (rc = cbf_stage_event_create(&u->uploaded[k], err)))
            break;
    for (int k = 0; k < 2 && !rc; k++)
        rc = cbf_stage_event_create(&u->read[k], err);
    return rc;
}

void cbf_stage_upload_fini(cbf_stage_upload *u)
{
    if (u->stream) {
        cbf_error ignored;
        cbf_stage_stream_sync(u->stream, "upload", &ignored);
    }
    for (int k = 0; k < 2; k++) {
        cbf_stage_free(CBF_MEM_DEVICE, u->slot[k]);
        cbf_stage_event_destroy(u->uploaded[k]);
        cbf_stage_event_destroy(u->read[k]);
    }
    cbf_stage_stream_destroy(u->stream);
    memset(u, 0, sizeof *u);
}

int cbf_stage_upload_put(cbf_stage_upload *u, const cbf_buffer *buf, void *stream,
                         const uint8_t **data, cbf_error *err)
{
    if (buf->kind == CBF_MEM_DEVICE) {
        u->pending = 0;
        *data = buf->data;
        return cbf_buffer_wait_stream(buf, stream, err);
    }
    const unsigned k = u->next;
    int rc;
    /* read[k] never recorded yet counts as passed (CUDA's rule). */
    if ((rc = cbf_buffer_wait_stream(buf, u->stream, err)) ||
        (rc = cbf_stage_stream_wait(u->stream, u->read[k], err)) ||
        (rc = cbf_stage_copy(u->slot[k], CBF_MEM_DEVICE, buf->data, buf->kind, u->bytes, u->stream,
                             "upload", err)) ||
        (rc = cbf_stage_event_record(u->uploaded[k], u->stream, err)) ||
        (rc = cbf_stage_stream_wait(stream, u->uploaded[k], err)))
        return rc;
    *data = u->slot[k];
    u->pending = 1;
    return 0;
}

int cbf_stage_upload_read(cbf_stage_upload *u, void *stream, cbf_error *err)
{
    if (!u->pending)
        return 0;
    const unsigned k = u->next;
    u->next ^= 1;
    u->pending = 0;
    return cbf_stage_event_record(u->read[k], stream, err);
}
