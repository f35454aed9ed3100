/* stage/timed.h: changes that take effect at a digitiser timestamp (gains,
 * delay models, beam weights), queued by requests on the node's thread and
 * taken by the same thread as its data reaches them.
 *
 * One set of rules for every such queue, so a control client sees the
 * same answers from every stage. A new change at `at` REPLACES every
 * pending change after `at` (they are dropped: a mistaken far-ahead change
 * is corrected by sending the right one, not by waiting for it), and
 * merges into a pending change at `at` itself (the caller updates that
 * entry's payload). A change at `at` is refused when:
 * - at is before the next unprocessed timestamp (already processed: it
 *   could only ever take effect late);
 * - at is more than `horizon` samples after the next unprocessed
 *   timestamp (a typing error, or a far-future time that would hold the
 *   queue until restart);
 * - max_pending changes before `at` are already waiting;
 * - with a granule G, at falls in the same G-aligned span as a pending
 *   change before it (a stage that switches once per output buffer:
 *   fft_post's gains).
 * A refusal changes nothing. cbf_timed_cancel drops pending changes on
 * request (a request's `cancel` argument, CBF_TIMED_CANCEL_ARG).
 *
 * Each entry carries `payload` bytes, fixed at create time, that the
 * queue copies and never reads. */
#ifndef CBF_STAGE_TIMED_H
#define CBF_STAGE_TIMED_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/control.h"
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_timed cbf_timed;

typedef struct cbf_timed_config {
    const char *noun;   /* what a change is, for messages ("gain change", "delay model") */
    size_t payload;     /* bytes per entry */
    int max_pending;    /* > 0 */
    int64_t granule;    /* digitiser samples: one change per aligned span; 0: no limit */
    int64_t horizon;    /* digitiser samples ahead of the data a change may be; 0: CBF_TIMED_HORIZON */
} cbf_timed_config;

/* 2^43 samples: 85 minutes at MeerKAT L-band's 1712 Msample/s. */
#define CBF_TIMED_HORIZON (INT64_C(1) << 43)

int cbf_timed_create(const cbf_timed_config *cfg, cbf_timed **out, cbf_error *err);
void cbf_timed_destroy(cbf_timed *q);

/* Every timestamp before next has been processed (called as buffers go). */
void cbf_timed_processed(cbf_timed *q, int64_t next);
/* The timestamp a request means: at itself, or for at < 0 the next
 * unprocessed one (0 before any data). */
int64_t cbf_timed_resolve(const cbf_timed *q, int64_t at);

/* 0 when a change at `at` would be accepted; otherwise CBF_EINVAL and why.
 * Nothing changes either way, so a caller can check its own conditions
 * after this and before cbf_timed_push. */
int cbf_timed_check(const cbf_timed *q, int64_t at, cbf_error *err);
/* Queues a change at `at` (after a successful check): drops every pending
 * change after `at` (cbf_timed_replaced says how many) and returns the
 * payload to fill: a new zeroed entry, or the pending entry at `at`
 * itself, payload as it was (*merged is then 1). */
void *cbf_timed_push(cbf_timed *q, int64_t at, int *merged);
/* Drops every pending change at or after `from` (all of them for from <=
 * the next unprocessed timestamp) and returns how many went. */
int cbf_timed_cancel(cbf_timed *q, int64_t from);
/* How many pending changes the last push or cancel dropped. */
int cbf_timed_replaced(const cbf_timed *q);
/* The newest pending change at or before `at`: its index, or -1 when none
 * is (the table in force then is the one in force now). */
int cbf_timed_find(const cbf_timed *q, int64_t at);
/* The reply fields every timed request gives: "pending" (changes now
 * waiting) and "replaced" (dropped by this request). */
int cbf_timed_reply(const cbf_timed *q, cbf_reply *reply);

/* The `cancel` argument of a timed request: with it the request drops the
 * pending changes at or after its `at` (every pending one by default) and
 * queues nothing. */
#define CBF_TIMED_CANCEL_ARG                                                                       \
    {.name = "cancel", .type = CBF_PARAM_BOOL, .def = "false",                                     \
     .doc = "drop the pending changes at or after `at` (-1: every pending one) instead of "        \
            "queueing one; the reply's `replaced` says how many"}

/* Pending changes, in time order: i from 0 to count - 1. */
int cbf_timed_count(const cbf_timed *q);
int64_t cbf_timed_at(const cbf_timed *q, int i);
void *cbf_timed_payload(const cbf_timed *q, int i);
/* Drops the n oldest (they have taken effect). */
void cbf_timed_pop(cbf_timed *q, int n);

#ifdef __cplusplus
}
#endif
#endif
