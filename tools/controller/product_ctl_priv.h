/* product_ctl_priv.h: what product_ctl.c (sensors, supervision),
 * product_mirror.c (the engines' sensors) and product_fanout.c (the
 * product requests) share. */
#ifndef CBF_PRODUCT_CTL_PRIV_H
#define CBF_PRODUCT_CTL_PRIV_H

#include <pthread.h>

#include "cbf/katcp.h"
#include "product_ctl.h"
#include "run.h"

/* The engines' node names (tools/array/write.c names them), where a product
 * request's stream goes (product_fanout.c) and whose sensors are renamed
 * into the product's streams (product_renames.c). */
#define PC_NODE_EQ "post"       /* F: fft_post, the gains and requantiser */
#define PC_NODE_DELAY "pfb"     /* F: the delays */
#define PC_NODE_RECV "recv"     /* X/B: the receiver */
#define PC_NODE_CORR "corr"     /* X/B: the correlator */
#define PC_NODE_REDUCE "reduce" /* X/B: the visibilities' reducer */
#define PC_NODE_VSEND "vsend"   /* X/B: the visibilities' sender */
#define PC_NODE_BSEND "bsend"   /* X/B: every beam's sender */

/* One of an engine's sensors under a product stream's name: to, or (to
 * NULL) child `child` of aggregate `agg`. */
typedef struct pc_rename {
    char *from, *to;
    int agg, child;
} pc_rename;

typedef struct pc_aggregate pc_aggregate;

/* One engine as the product controller sees it. */
typedef struct pc_engine {
    cbf_engine_state state;
    char **mirrored;              /* TASK.NAME of each sensor mirrored so far (under mu) */
    char **last;                  /* the value each was last set to (kept while unreachable) */
    int n_mirrored, cap_mirrored;
    long long steady;             /* its largest nominal *.steady-state-timestamp, -1: none */
    cbf_katcp_client *cl;         /* the mirror thread's connection */
    /* Bumped by each fresh reading a product request takes (under mu): a
     * poll that began before one is older than it and is dropped. */
    unsigned long refreshed;
    pc_rename *renames;           /* made once served, fixed from then on */
    int n_renames, cap_renames;
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
    int capturing;                /* streams between capture-start and capture-stop */
    char *capturing_stream;       /* per product stream: 1 while it captures */
    pc_aggregate *aggs;           /* the product-level sensors made from the engines' */
    int n_aggs;
    int stop;                     /* the mirror thread is to end */
    pthread_t mirror;
    int mirror_running;
    int mirror_passes;            /* readings of every engine done (cv signalled after each) */
};

/* Sets a sensor of the product's server (a no-op before it serves). */
void pc_set(cbf_product_ctl *pc, const char *name, cbf_katcp_status st, const char *value);
/* The mirror thread: every engine's sensors as TASK.NAME, every second. */
void *pc_mirror_main(void *arg);
/* Waits until the mirror has read every engine once (0), or timeout_s
 * went by (-1): a client that syncs its sensors once the product is
 * configured (katgpucbf's suite) then finds the engines' among them. */
int pc_mirror_wait_first(cbf_product_ctl *pc, double timeout_s);
/* An engine's mirrored sensors all made unreachable (under mu). */
void pc_mirror_unreachable(cbf_product_ctl *pc, int engine);
/* A ?sensor-value reply read from engine `engine` outside the mirror
 * thread (the fan-out's, right after a request took effect) set on the
 * mirrored sensors at once; sensors not mirrored yet are left to the
 * mirror thread. */
void pc_mirror_reading(cbf_product_ctl *pc, int engine, const cbf_katcp_result *r);
void pc_mirror_free(pc_engine *e);
/* product_renames.c: the renames of every engine's sensors and the
 * aggregates' sensors, added once the server is open (CBF_ENOMEM). */
int pc_renames_make(cbf_product_ctl *pc, cbf_error *err);
void pc_renames_free(cbf_product_ctl *pc);
/* The product names the engine's sensor `name` is shown as, one a call
 * from *at = 0 on; NULL after the last. */
const char *pc_renames_next(const pc_engine *e, const char *name, int *at);
/* The engine's sensor `name` read: the aggregates it feeds (under mu). */
void pc_renames_reading(cbf_product_ctl *pc, int engine, const char *name, cbf_katcp_status st,
                        const char *value, double timestamp);
/* The engine gone: the sums and syncs it fed lose it (under mu). */
void pc_renames_unreachable(cbf_product_ctl *pc, int engine);
/* A beam stream's beam name in its X/B-engines: beamB, B its place among
 * the product's beam streams. */
void pc_beam_name(const cbf_product *p, const cbf_product_stream *s, char *buf, size_t n);
/* The product requests (requests.h) registered on the server. */
int pc_fanout_register(cbf_product_ctl *pc, cbf_error *err);

#endif
