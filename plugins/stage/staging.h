/* stage/staging.h: input samples held per polarisation until a stage's
 * windows can use them (pfb, ddc).
 *
 * Input buffers of `chunk` samples per pol are appended to a staging area,
 * host memory on the CPU path and device memory on the GPU path (that copy
 * is the upload), with one presence flag per heap per pol. A plugin makes
 * its outputs from the live stage, then drops the samples no later window
 * needs with cbf_staging_keep, which moves the rest to the front of a
 * second stage (two stages, so the move never overlaps itself). Samples
 * are packed (bits wide) or complex float32 (bits = 64): an offset of n
 * samples is n / 8 x bits bytes, so heaps are multiples of 8 samples.
 *
 * Gap policy (one for every stage that stages samples): a timestamp later
 * than where the staging ends, by at most max_gap samples, is filled with
 * heaps flagged missing (their samples zero). Output timestamps stay
 * continuous, the outputs that touch the gap go out flagged, and
 * downstream sees one presence flag per heap or spectrum as for any lost
 * packet: a correlator or beamformer keeps its integration and its
 * alignment across antennas instead of seeing a stream that starts over.
 * A jump backwards, or forwards by more than max_gap (a digitiser that
 * restarted, or a gap so long that filling it would only send empty
 * buffers), restarts the staging at the new timestamp. max_gap is set by
 * the plugin, a few output buffers' worth. Every gap is counted. */
#ifndef CBF_STAGE_STAGING_H
#define CBF_STAGE_STAGING_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"
#include "cbf/node.h"
#include "stage/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_staging_config {
    cbf_mem_kind kind;     /* CBF_MEM_HOST (CPU path) or CBF_MEM_DEVICE (GPU path) */
    void *stream;          /* GPU path: where uploads, fills and moves are queued */
    int bits;              /* bits per sample: packed width, or 64 for complex float32 */
    size_t heap;           /* samples per presence flag, a multiple of 8 */
    size_t chunk;          /* samples per pol of one input buffer, whole heaps */
    size_t cap;            /* samples per pol a stage holds, whole heaps */
    size_t pol_bytes;      /* bytes allocated per pol (cap samples, as the kernel pads them) */
    size_t slab[2];        /* which chunk-sized slab of an input buffer each pol is */
    size_t flag_row[2];    /* which row of chunk / heap flags of an input buffer each pol reads */
    int64_t max_gap;       /* input samples: a longer jump forwards restarts */
    int64_t scale;         /* digitiser samples per input sample (messages only; 0 = 1) */
    cbf_counter *gaps;     /* counts every gap (may be NULL) */
} cbf_staging_config;

typedef struct cbf_staging {
    cbf_staging_config cfg;
    /* The live stage, read by the plugin: */
    uint8_t *data[2];      /* per pol, cfg.kind memory */
    uint8_t *present;      /* [pol][cap / heap] host flags */
    int64_t first;         /* input sample at its start */
    size_t len;            /* samples it holds */
    int started;           /* a first buffer has been placed */
    /* The other stage: */
    uint8_t *spare[2];
    uint8_t *spare_present;
    /* GPU path: uploads run on a stream of their own. vacated[0] is
     * recorded on cfg.stream when the live stage was last moved out of (by
     * cbf_staging_keep), vacated[1] likewise for the other stage: an upload
     * into a stage waits for it, so it overlaps the kernels reading the
     * other stage. `held` keeps input buffers until their copies are done. */
    void *upload;
    void *vacated[2];
    cbf_stage_hold held;
} cbf_staging;

/* Allocates both stages. On failure what was allocated is freed by
 * cbf_staging_fini (st is zeroed first, so fini is always safe). */
int cbf_staging_init(cbf_staging *st, const cbf_staging_config *cfg, cbf_error *err);
void cbf_staging_fini(cbf_staging *st);

/* Input sample where the staging ends: the next buffer's timestamp when
 * there is no gap. */
static inline int64_t cbf_staging_end(const cbf_staging *st)
{
    return st->first + (int64_t)st->len;
}

/* Makes every output the staging allows now (and drops what they no
 * longer need): called between the missing heaps that fill a gap. */
typedef int (*cbf_staging_drain_fn)(void *ctx, cbf_error *err);

enum {
    CBF_STAGING_CONTINUES = 0, /* ts is where the staging ends */
    CBF_STAGING_FILLED = 1,    /* a gap, now missing heaps */
    CBF_STAGING_RESTARTED = 2, /* the first buffer, or a jump: the staging is empty from ts */
};

/* Places the next input buffer's timestamp ts (input samples, heap
 * aligned) by the gap policy above; *how says which case it was. After
 * CBF_STAGING_RESTARTED the plugin picks its next output from ts. */
int cbf_staging_place(cbf_staging *st, int64_t ts, cbf_staging_drain_fn drain, void *ctx,
                      int *how, cbf_error *err);

/* Appends the buffer's chunk (its slabs and flags per pol). On the GPU
 * path the copies are queued on the upload stream after the buffer's
 * event, cfg.stream is made to wait for them (on the GPU, not the host),
 * and the staging keeps a reference to the buffer until they are done, so
 * the caller may drop its own on return; a device buffer on the CPU path
 * is refused. */
int cbf_staging_append(cbf_staging *st, cbf_buffer *buf, cbf_error *err);

/* GPU path: waits for the uploads queued so far and drops the input
 * buffers held for them (at the end of the stream; fini does it too). */
int cbf_staging_flush(cbf_staging *st, cbf_error *err);

/* Appends `heaps` missing heaps: flags 0, samples zero. */
int cbf_staging_append_missing(cbf_staging *st, size_t heaps, cbf_error *err);

/* Drops the samples before `from` (input samples, heap aligned; past the
 * end: everything), moving the rest to the front of the other stage. */
int cbf_staging_keep(cbf_staging *st, int64_t from, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
