/* dsim_workers.h: a fixed team of threads that run one job together, made
 * once at init so a chunk costs a wake-up, not a pthread_create. */
#ifndef CBF_DSIM_WORKERS_H
#define CBF_DSIM_WORKERS_H

#include <cbf/cbf.h>

/* Share k of n of a job. */
typedef void (*cbf_dsim_work_fn)(void *arg, int k, int n);

typedef struct cbf_dsim_workers cbf_dsim_workers;

/* A team of n (1..64): the caller and n - 1 threads (named after node). Fewer threads than
 * asked start if the system refuses some; cbf_dsim_workers_size says how
 * many shares a job is cut into. Returns 0 or -2 (out of memory). */
int cbf_dsim_workers_create(const cbf_node *node, int n, cbf_dsim_workers **out);
int cbf_dsim_workers_size(const cbf_dsim_workers *w);
/* Runs fn(arg, k, n) for every k (k = 0 on the calling thread) and
 * returns when all shares are done. One job at a time. */
void cbf_dsim_workers_run(cbf_dsim_workers *w, cbf_dsim_work_fn fn, void *arg);
void cbf_dsim_workers_free(cbf_dsim_workers *w);

#endif
