/* katcp_server.h (private to libcbf): what the katcp server's files share
 * (cbf/katcp.h is the interface). katcp_server.c serves connections and
 * splits lines; katcp_calls.c answers requests (built-ins, handlers, the
 * request threads for slow ones); katcp_table.c holds sensors (the table,
 * snapshots); katcp_sampling.c answers the sensor requests and runs the
 * sampling strategies. None of it knows of engines. */
#ifndef CBF_KATCP_SERVER_H
#define CBF_KATCP_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cbf/katcp.h"
#include "katcp_line.h"

#define KC_MAX_CLIENTS CBF_KATCP_MAX_CLIENTS
#define KC_MAX_LINE CBF_KATCP_MAX_LINE
/* Longer lines go to a request thread, so a slow one (8 MiB of values for
 * libyaml) holds no other client. */
#define KC_INLINE_MAX (64 << 10)
#define KC_MAX_OUT (64u << 20)        /* replies waiting for a client that does not read */
#define KC_POLL_MS CBF_KATCP_POLL_MS  /* how soon quit and snapshot changes are noticed */
#define KC_MIN_PERIOD 0.01            /* the shortest sampling period, seconds */
#define KC_MAX_REGEX 256              /* ?sensor-list /regex/: characters */
#define KC_MAX_CHANGES 4096           /* table changes queued for event samplers */
#define KC_DEFAULT_SLOW 4             /* request threads when the options say 0 */

typedef enum { KS_NONE, KS_AUTO, KS_PERIOD, KS_EVENT } kc_strategy;

typedef struct kc_sampling {
    char *name;
    kc_strategy how;
    double period, next;   /* seconds; next: CLOCK_MONOTONIC */
    char *last;            /* status and value last sent (auto, event on a snapshot sensor) */
    uint64_t seq;          /* the table change last sent (auto, event on a table sensor) */
} kc_sampling;

typedef struct kc_client {
    int fd;                /* -1: a free slot */
    unsigned gen;          /* bumped per connection: a late reply finds its own */
    double last_rx;        /* CLOCK_MONOTONIC of its connect or its last line */
    bool waiting;          /* a slow request of its own is on a request thread:
                              its next lines wait, so replies keep their order */
    char *in;
    size_t in_len, in_cap, scanned;
    cbf_katcp_buf out;
    size_t out_off;
    bool closing;          /* close once out is sent */
    kc_sampling *samp;
    size_t n_samp;
} kc_client;

/* One sensor as read: an entry of the table, or of a snapshot. */
typedef struct kc_sensor {
    char *name, *desc, *units;
    cbf_katcp_type type;
    char **values;         /* discrete */
    size_t n_values;
    char *value;
    cbf_katcp_status status;
    double updated;        /* UNIX seconds */
    uint64_t seq;          /* table: tab_seq at its last change (from 1); snapshot: 0 */
} kc_sensor;

struct cbf_katcp_sensors {
    kc_sensor *s;
    size_t n, cap;
};

/* A table sensor's change, queued for the event samplers. */
typedef struct kc_change {
    char *name, *value;
    cbf_katcp_status status;
    double updated;
    uint64_t seq;
} kc_change;

typedef struct kc_handler {
    char *name, *help;
    cbf_katcp_handler fn;
    void *user;
    unsigned flags;
} kc_handler;

/* A slow request on its way through a request thread, and its reply. */
typedef struct kc_job {
    int slot;              /* the client's, with its gen then */
    unsigned gen;
    cbf_katcp_msg m;
    const kc_handler *h;   /* NULL: the fallback */
    cbf_katcp_buf out;
    struct kc_job *next;
} kc_job;

struct cbf_katcp_server {
    char *label, *protocol, *device, *device_build, *idle_setting;
    double idle;           /* seconds a client may send nothing; 0: forever */
    cbf_katcp_handler fallback;
    size_t (*fallback_help)(cbf_katcp_call *call, const char *want, void *user);
    void *fallback_user;
    int (*snapshot)(cbf_katcp_sensors *out, void *user);
    void *snapshot_user;

    int lfd;
    bool v6;
    char addr[300];
    pthread_t thread;
    bool started;
    atomic_bool quit;
    kc_client cl[KC_MAX_CLIENTS];
    kc_handler *req;
    size_t n_req;

    /* Request threads: jobs wait in `queue`, answered ones in `done` for
     * the server thread, which done_fd[1] wakes (table changes wake it too).
     * n_jobs: handed off and not yet collected (the server thread's). */
    pthread_t *workers;
    int n_workers, max_jobs, n_jobs;
    pthread_mutex_t job_mu;
    pthread_cond_t job_cv;
    kc_job *queue, *queue_tail, *done;
    int done_fd[2];

    /* The table, its changes since the server thread last took them, and
     * whether the sensor set changed (#interface-changed). */
    pthread_mutex_t tab_mu;
    struct cbf_katcp_sensors tab;
    kc_change *changes;
    size_t n_changes;
    bool iface_changed;
    uint64_t tab_seq;      /* changes to the table so far */
    int event_samplers;    /* auto and event samplings of every client (under tab_mu) */
};

/* One request being answered: where its informs and reply go. c is NULL
 * on a request thread, which touches no client's state. */
struct cbf_katcp_call {
    cbf_katcp_server *s;
    kc_client *c;
    const cbf_katcp_msg *m;
    cbf_katcp_buf *out;
    bool replied;
};

/* ---- katcp_server.c ---- */
CBF_KATCP_HIDDEN double cbf_katcp_now(clockid_t clk);
CBF_KATCP_HIDDEN void cbf_katcp_wake(cbf_katcp_server *s);
/* Answers the client's whole lines in order, up to one that goes to a
 * request thread (the rest wait for its reply). */
CBF_KATCP_HIDDEN void cbf_katcp_lines(cbf_katcp_server *s, kc_client *c);

/* ---- katcp_calls.c ---- */
/* true when the request has lo..hi arguments; else the fail reply is sent. */
CBF_KATCP_HIDDEN bool cbf_katcp_want_args(cbf_katcp_call *c, size_t lo, size_t hi);
CBF_KATCP_HIDDEN void cbf_katcp_versions(cbf_katcp_server *s, cbf_katcp_buf *b, const char *inform, long long id);
/* One parsed request of client c (on the server thread): answered now, or
 * handed to a request thread (*m is then emptied). */
CBF_KATCP_HIDDEN void cbf_katcp_answer(cbf_katcp_server *s, kc_client *c, cbf_katcp_msg *m, size_t len);
/* Starts and stops the request threads. */
CBF_KATCP_HIDDEN int cbf_katcp_workers_start(cbf_katcp_server *s, cbf_error *err);
CBF_KATCP_HIDDEN void cbf_katcp_workers_stop(cbf_katcp_server *s);
/* Server thread: the answered slow requests, to their clients. */
CBF_KATCP_HIDDEN void cbf_katcp_jobs_done(cbf_katcp_server *s);

/* ---- katcp_table.c ---- */
CBF_KATCP_HIDDEN const char *cbf_katcp_type_name(cbf_katcp_type t);
CBF_KATCP_HIDDEN void cbf_katcp_sensors_clear(struct cbf_katcp_sensors *ss);
/* What the server thread takes of the table at each sampling pass: the
 * changes queued since the last take, and whether the set of sensors
 * changed. */
typedef struct kc_taken {
    kc_change *ch;
    size_t n;
    bool iface;
} kc_taken;
/* The sensors now into ss: the table's, then the snapshot callback's. With
 * t, the table's changes are taken in the same hold of its lock, so every
 * change taken is older than what ss holds, and every later one is queued
 * for the next take. */
CBF_KATCP_HIDDEN int cbf_katcp_sensors_read(cbf_katcp_server *s, struct cbf_katcp_sensors *ss, kc_taken *t);
/* The sensor so named into ss: the table's alone when it is there (one
 * ?sensor-sampling per sensor, as aiokatcp's SensorWatcher sends them,
 * must not copy thousands each time), else the snapshot callback's. */
CBF_KATCP_HIDDEN int cbf_katcp_sensor_read_one(cbf_katcp_server *s, const char *name, struct cbf_katcp_sensors *ss);
CBF_KATCP_HIDDEN void cbf_katcp_changes_take(cbf_katcp_server *s, kc_taken *t);
CBF_KATCP_HIDDEN void cbf_katcp_changes_free(kc_change *ch, size_t n);
CBF_KATCP_HIDDEN const kc_sensor *cbf_katcp_sensor_find(const struct cbf_katcp_sensors *ss, const char *name);
/* A client's auto or event sampling began (+1) or ended (-1). */
CBF_KATCP_HIDDEN void cbf_katcp_event_samplers(cbf_katcp_server *s, int delta);

/* ---- katcp_sampling.c ---- */
CBF_KATCP_HIDDEN void cbf_katcp_sensor_list(cbf_katcp_call *c);
CBF_KATCP_HIDDEN void cbf_katcp_sensor_value(cbf_katcp_call *c);
CBF_KATCP_HIDDEN void cbf_katcp_sensor_sampling(cbf_katcp_call *c);
/* Drops every sampling of client c (it is closing). */
CBF_KATCP_HIDDEN void cbf_katcp_sampling_clear(cbf_katcp_server *s, kc_client *c);
/* Sends what the sampling strategies call for now (ss: a reused snapshot);
 * the time the next period falls due into *next (CLOCK_MONOTONIC). */
CBF_KATCP_HIDDEN void cbf_katcp_sample(cbf_katcp_server *s, struct cbf_katcp_sensors *ss, double *next);

#endif
