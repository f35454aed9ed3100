/* stage/flight.h: a GPU stage's outputs in flight, and its host inputs
 * uploaded in turn, so the host never waits per buffer.
 *
 * Flight: a stage whose output carries something the GPU computes but the
 * host must write (a count folded into `saturated`, a sensor) queues the
 * buffer's work, records the output's event, and puts the (input, output)
 * pair in flight; it sends the output once the event has passed, while the
 * GPU already runs the next buffer's work. An output whose pool has no
 * events (the CPU path) is complete when pushed and lands at once, through
 * the same code. At most `cap` pairs are in flight: landing with keep =
 * cap - 1 after each push waits for the oldest only when the next buffer's
 * work is queued behind it, so the GPU never idles for the host's turn,
 * and between buffers at most cap - 1 inputs are held (cap 2: one, which
 * never starves the producer's pool, as stage/gpu.h's hold). With
 * CBF_FLIGHT_DEFER=1 in the environment (tests) an output without an event
 * counts as incomplete until landing must wait for it, so the CPU path
 * holds its outputs back as a GPU that is behind would, and the
 * deferred paths (requests between a buffer's queueing and its sending,
 * landing at the end of the stream) run without a GPU.
 *
 * Upload: host input buffers copied to the device on a stream of their
 * own, into two device slots in turn: a buffer's upload overlaps the
 * kernels reading the one before, the kernels' stream waits for it on the
 * GPU, and the next upload into a slot waits (on the GPU) for the kernels
 * that read it last. */
#ifndef CBF_STAGE_FLIGHT_H
#define CBF_STAGE_FLIGHT_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called per landed pair, oldest first: it owns `out` (sends it or drops
 * it, even when it fails); the flight drops `in` afterwards. */
typedef int (*cbf_stage_land_fn)(void *ctx, cbf_buffer *in, cbf_buffer *out, cbf_error *err);

typedef struct cbf_stage_flight {
    size_t cap, head, n;
    int defer;             /* CBF_FLIGHT_DEFER */
    cbf_buffer **in, **out;
} cbf_stage_flight;

int cbf_stage_flight_init(cbf_stage_flight *f, size_t cap, cbf_error *err);
/* Puts a pair in flight: takes a reference to in, and the caller's to out
 * (whose event is recorded after the work, or which has none). The caller
 * lands down to cap - 1 first (a full flight refuses with CBF_EINTERNAL
 * and keeps nothing: the caller still owns out). */
int cbf_stage_flight_push(cbf_stage_flight *f, cbf_buffer *in, cbf_buffer *out, cbf_error *err);
/* Lands the pairs whose outputs are complete, oldest first, waiting for
 * the oldest while more than `keep` are in flight (keep 0: every pair, at
 * the end of the stream). land NULL drops them instead (after an error). */
int cbf_stage_flight_land(cbf_stage_flight *f, size_t keep, cbf_stage_land_fn land, void *ctx,
                          cbf_error *err);
/* Waits for and drops every pair, then frees the flight. */
void cbf_stage_flight_fini(cbf_stage_flight *f);

typedef struct cbf_stage_upload {
    size_t bytes;
    void *stream;          /* the uploads */
    uint8_t *slot[2];      /* device */
    void *uploaded[2];     /* on stream, after the copy into slot k */
    void *read[2];         /* on the kernels' stream, after the last kernel reading slot k */
    unsigned next;         /* the slot of the next put */
    int pending;           /* the last put used a slot: cbf_stage_upload_read records */
} cbf_stage_upload;

/* Two device slots of `bytes` and the upload stream (GPU path only). On
 * failure cbf_stage_upload_fini frees what was made (u is zeroed first). */
int cbf_stage_upload_init(cbf_stage_upload *u, size_t bytes, cbf_error *err);
/* The caller has waited for the kernels' stream (nothing reads the slots). */
void cbf_stage_upload_fini(cbf_stage_upload *u);
/* Device input: `stream` waits for buf's event and *data is buf's own
 * data (u need not be initialised). Host or pinned input: queues the copy
 * of buf's first `bytes` bytes into the next slot, after buf's event and
 * after the kernels that read that slot last, and makes `stream` (the
 * kernels') wait for it; *data is the slot.
 * The caller holds buf until the kernels are done (the flight does). */
int cbf_stage_upload_put(cbf_stage_upload *u, const cbf_buffer *buf, void *stream,
                         const uint8_t **data, cbf_error *err);
/* Every kernel reading the data of the last put is queued on `stream`
 * (nothing to record for device input). */
int cbf_stage_upload_read(cbf_stage_upload *u, void *stream, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
