/* product_ctl_priv.h: what product_ctl.c (sensors, supervision),
 * product_mirror.c (the engines' sensors) and product_fanout.c (the
 * product requests) share. */
#ifndef CBF_PRODUCT_CTL_PRIV_H
#define CBF_PRODUCT_CTL_PRIV_H

#include <pthread.h>

#include "cbf/katcp.h"
#include "product_ctl.h"
#include "run.h"

/* One engine as the product controller sees it. */
typedef struct pc_engine {
    cbf_engine_state state;
    char **mirrored;              /* TASK.NAME of each sensor mirrored so far (under mu) */
    char **last;                  /* the value each was last set to (kept while unreachable) */
    int n_mirrored, cap_mirrored;
    long long steady;             /* its largest nominal *.steady-state-timestamp, -1: none */
    cbf_katcp_client *cl;         /* the mirror thread's connection */
} pc_engine;

struct cbf_product_ctl {
    char name[64];
    char *json;
    size_t len;
    char host[64], address[128];
    double started;
    const cbf_controller_config *c;
    cbf_running_product *rp;      /* NULL until configured */
    cbf_katcp_server *srv;        /* NULL until configured and served */
    cbf_product_ctl_changed changed;
    void *ctx;

    pthread_mutex_t mu;           /* guards what follows, and the sensors' values set from it */
    pthread_cond_t cv;
    pc_engine *eng;               /* indexed as the plan's engines */
    int n_eng;
    char *input_suspect;          /* the channeliser's input-data-suspect mask */
    int capturing;                /* streams between capture-start and capture-stop */
    char *capturing_stream;       /* per product stream: 1 while it captures */
    int stop;                     /* the mirror thread is to end */
    pthread_t mirror;
    int mirror_running;
};

/* Sets a sensor of the product's server (a no-op before it serves). */
void pc_set(cbf_product_ctl *pc, const char *name, cbf_katcp_status st, const char *value);
/* The mirror thread: every engine's sensors as TASK.NAME, every second. */
void *pc_mirror_main(void *arg);
/* An engine's mirrored sensors all made unreachable (under mu). */
void pc_mirror_unreachable(cbf_product_ctl *pc, int engine);
void pc_mirror_free(pc_engine *e);
/* The product requests (requests.h) registered on the server. */
int pc_fanout_register(cbf_product_ctl *pc, cbf_error *err);

#endif
