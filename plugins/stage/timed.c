/* timed.c: see timed.h. Entries sit in one block of max_pending slots in
 * time order; popping moves the rest down (a handful, between buffers);
 * replacing or cancelling drops a tail, so the entries before `at` keep
 * their place (and their payload pointers). */
#include "stage/timed.h"

#include <stdlib.h>
#include <string.h>

struct cbf_timed {
    cbf_timed_config cfg;
    int64_t next;        /* first unprocessed timestamp */
    int have_next;
    int n;
    int replaced;        /* dropped by the last push or cancel */
    int64_t *at;         /* [max_pending] */
    unsigned char *data; /* [max_pending][payload] */
};

int cbf_timed_create(const cbf_timed_config *cfg, cbf_timed **out, cbf_error *err)
{
    *out = NULL;
    if (cfg->max_pending < 1 || cfg->granule < 0)
        return cbf_error_set(err, CBF_EINTERNAL, "timed changes: %d pending, granule %lld",
                             cfg->max_pending, (long long)cfg->granule);
    cbf_timed *q = calloc(1, sizeof *q);
    if (q) {
        q->cfg = *cfg;
        q->at = calloc((size_t)cfg->max_pending, sizeof *q->at);
        q->data = calloc((size_t)cfg->max_pending, cfg->payload ? cfg->payload : 1);
    }
    if (!q || !q->at || !q->data) {
        cbf_timed_destroy(q);
        return cbf_error_set(err, CBF_ENOMEM, "%d pending %ss of %zu bytes", cfg->max_pending,
                             cfg->noun, cfg->payload);
    }
    *out = q;
    return 0;
}

void cbf_timed_destroy(cbf_timed *q)
{
    if (!q)
        return;
    free(q->at);
    free(q->data);
    free(q);
}

void cbf_timed_processed(cbf_timed *q, int64_t next)
{
    q->next = next;
    q->have_next = 1;
}

int64_t cbf_timed_resolve(const cbf_timed *q, int64_t at)
{
    if (at >= 0)
        return at;
    return q->have_next ? q->next : 0;
}

/* How many pending changes come before `at` (they stay when a change at
 * `at` is pushed). */
static int timed_before(const cbf_timed *q, int64_t at)
{
    int k = 0;
    while (k < q->n && q->at[k] < at)
        k++;
    return k;
}

int cbf_timed_find(const cbf_timed *q, int64_t at)
{
    int k = timed_before(q, at);
    return k < q->n && q->at[k] == at ? k : k - 1;
}

int cbf_timed_check(const cbf_timed *q, int64_t at, cbf_error *err)
{
    const char *noun = q->cfg.noun;
    if (q->have_next && at < q->next)
        return cbf_error_set(err, CBF_EINVAL, "timestamp %lld has already been processed (the "
                             "next spectrum is at %lld)", (long long)at, (long long)q->next);
    const int64_t horizon = q->cfg.horizon > 0 ? q->cfg.horizon : CBF_TIMED_HORIZON;
    /* Before any data there is nothing to measure from: timestamps count
     * from the digitisers' sync, which may be years back. */
    if (q->have_next && at - q->next > horizon)
        return cbf_error_set(err, CBF_EINVAL, "timestamp %lld is %lld samples after the next one to "
                             "process (%lld); at most %lld ahead", (long long)at,
                             (long long)(at - q->next), (long long)q->next, (long long)horizon);
    /* What stays is the changes before `at`: the rules hold against them. */
    const int k = timed_before(q, at);
    if (k < q->n && q->at[k] == at)
        return 0;   /* merges */
    const int64_t G = q->cfg.granule;
    if (G && k && at / G == q->at[k - 1] / G)
        return cbf_error_set(err, CBF_EINVAL, "a %s is already pending at %lld, in the same output "
                             "buffer of %lld samples as %lld; one change per buffer (send the "
                             "change at %lld to replace it)", noun, (long long)q->at[k - 1],
                             (long long)G, (long long)at, (long long)q->at[k - 1]);
    if (k == q->cfg.max_pending)
        return cbf_error_set(err, CBF_EINVAL, "%d %ss are pending already", q->cfg.max_pending,
                             noun);
    return 0;
}

void *cbf_timed_push(cbf_timed *q, int64_t at, int *merged)
{
    const int k = timed_before(q, at);
    *merged = k < q->n && q->at[k] == at;
    const int keep = k + *merged;
    q->replaced = q->n - keep;
    q->n = keep;
    if (*merged)
        return cbf_timed_payload(q, k);
    if (q->n == q->cfg.max_pending)
        return NULL; /* refused by cbf_timed_check */
    q->at[q->n] = at;
    void *p = cbf_timed_payload(q, q->n++);
    memset(p, 0, q->cfg.payload);
    return p;
}

int cbf_timed_cancel(cbf_timed *q, int64_t from)
{
    const int k = timed_before(q, from);
    q->replaced = q->n - k;
    q->n = k;
    return q->replaced;
}

int cbf_timed_replaced(const cbf_timed *q)
{
    return q->replaced;
}

int cbf_timed_reply(const cbf_timed *q, cbf_reply *reply)
{
    int rc = cbf_reply_int(reply, "pending", q->n);
    return rc ? rc : cbf_reply_int(reply, "replaced", q->replaced);
}

int cbf_timed_count(const cbf_timed *q)
{
    return q->n;
}

int64_t cbf_timed_at(const cbf_timed *q, int i)
{
    return q->at[i];
}

void *cbf_timed_payload(const cbf_timed *q, int i)
{
    return q->data + (size_t)i * q->cfg.payload;
}

void cbf_timed_pop(cbf_timed *q, int n)
{
    if (n <= 0)
        return;
    if (n > q->n)
        n = q->n;
    memmove(q->at, q->at + n, sizeof *q->at * (size_t)(q->n - n));
    memmove(q->data, q->data + (size_t)n * q->cfg.payload, q->cfg.payload * (size_t)(q->n - n));
    q->n -= n;
}
