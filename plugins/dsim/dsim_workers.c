/* dsim_workers.c: see dsim_workers.h. A generation count tells each
 * thread there is a new job; `pending` counts the shares not yet done. */
#include "dsim_workers.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define MAX_WORKERS 64

struct cbf_dsim_workers {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t th[MAX_WORKERS];
    const cbf_node *node;
    int n;                 /* shares per job: 1 + threads started */
    unsigned long gen;
    int pending;
    bool quit;
    cbf_dsim_work_fn fn;
    void *arg;
};

typedef struct {
    cbf_dsim_workers *w;
    int k;
} worker_arg;

static void *dsim_worker_main(void *p)
{
    cbf_dsim_workers *w = ((worker_arg *)p)->w;
    const int k = ((worker_arg *)p)->k;
    free(p);
    cbf_node_thread_start(w->node, "w", k);
    unsigned long seen = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->quit && w->gen == seen)
            pthread_cond_wait(&w->go, &w->mu);
        if (w->quit)
            break;
        seen = w->gen;
        cbf_dsim_work_fn fn = w->fn;
        void *arg = w->arg;
        const int n = w->n;
        pthread_mutex_unlock(&w->mu);
        fn(arg, k, n);
        pthread_mutex_lock(&w->mu);
        if (--w->pending == 0)
            pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int cbf_dsim_workers_create(const cbf_node *node, int n, cbf_dsim_workers **out)
{
    cbf_dsim_workers *w = calloc(1, sizeof *w);
    if (!w)
        return -2;
    w->node = node;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->go, NULL);
    pthread_cond_init(&w->done, NULL);
    w->n = 1;
    n = n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : n;
    /* No job runs before this returns, so threads read the final n. */
    for (int k = 1; k < n; k++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a)
            break;
        *a = (worker_arg){.w = w, .k = k};
        if (pthread_create(&w->th[k], NULL, dsim_worker_main, a)) {
            free(a);
            break;
        }
        w->n = k + 1;
    }
    *out = w;
    return 0;
}

int cbf_dsim_workers_size(const cbf_dsim_workers *w)
{
    return w->n;
}

void cbf_dsim_workers_run(cbf_dsim_workers *w, cbf_dsim_work_fn fn, void *arg)
{
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->arg = arg;
    w->pending = w->n - 1;
    w->gen++;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    fn(arg, 0, w->n);
    pthread_mutex_lock(&w->mu);
    while (w->pending > 0)
        pthread_cond_wait(&w->done, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void cbf_dsim_workers_free(cbf_dsim_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    for (int k = 1; k < w->n; k++)
        pthread_join(w->th[k], NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->go);
    pthread_cond_destroy(&w->done);
    free(w);
}
