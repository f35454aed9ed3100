/* katcp_server.h (private to libcbf): what the katcp front end's files
 * share. katcp.c serves connections and dispatches lines;
 * katcp_requests.c answers the built-in and plugin requests and writes
 * replies; katcp_sensors.c reads sensors and runs sampling strategies. */
#ifndef CBF_KATCP_SERVER_H
#define CBF_KATCP_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "katcp.h"
#include "runtime/engine_view.h"

/* Connections served at once. When all are taken a newcomer is still
 * served: the client idle longest makes room (katcp.c, docs/control.md). */
#define KC_MAX_CLIENTS 64
#define KC_MAX_LINE CBF_CONTROL_MAX_REQUEST   /* as the ZeroMQ plane's message cap */
/* Longer lines go to the request thread (as the ZeroMQ plane's), so a
 * slow one (8 MiB of values for libyaml) holds no other client. */
#define KC_INLINE_MAX (64 << 10)
#define KC_MAX_OUT (64u << 20)        /* replies waiting for a client that does not read */
#define KC_POLL_MS 100                /* how soon quit and event sampling are noticed */
#define KC_MIN_PERIOD 0.01            /* the shortest sampling period, seconds */
#define KC_MAX_REGEX 256              /* ?sensor-list /regex/: characters */

typedef enum { KS_NONE, KS_AUTO, KS_PERIOD, KS_EVENT } kc_strategy;

typedef struct kc_sampling {
    char *name;
    kc_strategy how;
    double period, next;   /* seconds; next: CLOCK_MONOTONIC */
    char *last;            /* value and status last sent (auto, event) */
} kc_sampling;

typedef struct kc_client {
    int fd;                /* -1: a free slot */
    unsigned gen;          /* bumped per connection: a late reply finds its own */
    double last_rx;        /* CLOCK_MONOTONIC of its connect or its last line */
    bool waiting;          /* a long request of its own is on the request thread:
                              its next lines wait, so replies keep their order */
    char *in;
    size_t in_len, in_cap, scanned;
    cbf_katcp_buf out;
    size_t out_off;
    bool closing;          /* close once out is sent */
    kc_sampling *samp;
    size_t n_samp;
} kc_client;

typedef struct kc_sensor {
    char name[192], desc[256];
    const char *units, *type;   /* katcp type: integer, float, string or discrete */
    char *value;                /* malloc'd */
    const char *status;
    double updated;             /* UNIX seconds its value last changed */
} kc_sensor;

typedef struct kc_sensors {
    kc_sensor *s;
    size_t n, cap;
    double time;           /* UNIX seconds when read */
} kc_sensors;

/* A long request on the request thread and its reply. */
typedef struct kc_job {
    int slot;              /* the client's, with its gen then */
    unsigned gen;
    cbf_katcp_msg m;
    cbf_katcp_buf out;
} kc_job;

typedef struct cbf_katcp cbf_katcp;
struct cbf_katcp {
    cbf_engine *e;
    const cbf_graph *g;
    double idle;           /* seconds a client may send nothing; 0: forever */
    int lfd;
    bool v6;
    char addr[300];
    pthread_t thread;
    bool started;
    atomic_bool quit;
    kc_client cl[KC_MAX_CLIENTS];
    /* The request thread: one long request at a time (busy: the server
     * thread's flag); done_fd[1] wakes the server thread when it is answered. */
    pthread_t worker;
    bool worker_started, busy;
    pthread_mutex_t job_mu;
    pthread_cond_t job_cv;
    bool job_ready;
    kc_job job;
    int done_fd[2];
};

/* One request being answered: where replies and informs go. c is NULL on
 * the request thread, which touches no client's state. */
typedef struct kc_req {
    cbf_katcp *k;
    kc_client *c;
    const cbf_katcp_msg *m;
    cbf_katcp_buf *out;
} kc_req;

/* ---- katcp_requests.c ---- */
CBF_KATCP_HIDDEN double cbf_katcp_now(clockid_t clk);
/* Starts this request's reply or inform: type, its name, its id. */
CBF_KATCP_HIDDEN void cbf_katcp_reply_begin(kc_req *r, char type);
CBF_KATCP_HIDDEN void cbf_katcp_reply_end(kc_req *r);
/* A whole reply: !name[id] status [message]. */
CBF_KATCP_HIDDEN void cbf_katcp_reply(kc_req *r, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
CBF_KATCP_HIDDEN void cbf_katcp_inform(cbf_katcp_buf *b, const char *name, long long id, int n,
                                       const char *const *args);
CBF_KATCP_HIDDEN void cbf_katcp_versions(cbf_katcp_buf *b, const char *inform, long long id);
/* true when the request has lo..hi arguments; else the fail reply is sent. */
CBF_KATCP_HIDDEN bool cbf_katcp_want_args(kc_req *r, size_t lo, size_t hi);
/* Answers one request (a built-in or a plugin's). */
CBF_KATCP_HIDDEN void cbf_katcp_dispatch(kc_req *r);
/* Whether name is a built-in request (answered on the server thread:
 * each is quick and bounded, and some change the client's state). */
CBF_KATCP_HIDDEN bool cbf_katcp_builtin(const char *name);

/* ---- katcp_sensors.c ---- */
CBF_KATCP_HIDDEN void cbf_katcp_sensor_line(cbf_katcp_buf *b, const char *inform, long long id,
                                            const kc_sensor *s);
CBF_KATCP_HIDDEN void cbf_katcp_sensors_free(kc_sensors *ss);
CBF_KATCP_HIDDEN void cbf_katcp_sensor_list(kc_req *r);
CBF_KATCP_HIDDEN void cbf_katcp_sensor_value(kc_req *r);
CBF_KATCP_HIDDEN void cbf_katcp_sensor_sampling(kc_req *r);
/* Sends what the sampling strategies call for now (ss: a reused snapshot);
 * the time the next period falls due into *next (CLOCK_MONOTONIC). */
CBF_KATCP_HIDDEN void cbf_katcp_sample(cbf_katcp *k, kc_sensors *ss, double *next);

#endif
