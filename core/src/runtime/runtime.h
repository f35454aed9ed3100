/* runtime.h (private to libcbf): what buffer.c, port.c, node.c, engine.c and
 * the GPU glue share, and the harness (harness/) drives. Symbols here are
 * cbf_rt_* and hidden from the .so's exported interface: plugins see only
 * the public headers. The front ends (frontends/) do not include it: what
 * they may read of an engine is engine_view.h (included here, so the
 * runtime sees the same declarations), and how they register frontend.h. */
#ifndef CBF_RUNTIME_H
#define CBF_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cbf/buffer.h"
#include "cbf/control.h"
#include "cbf/graph.h"
#include "cbf/node.h"
#include "cbf/port.h"
#include "graph/graph_model.h"

#define CBF_RT_HIDDEN __attribute__((visibility("hidden")))
#include "engine_view.h"
#define CBF_MAX_COUNTERS CBF_MAX_NODE_COUNTERS
#define CBF_MAX_GAUGES CBF_MAX_NODE_GAUGES
#define CBF_COUNTER_NAME_MAX 32
/* Texts are named per beam with katgpucbf's stream names
 * ("tied-array-channelised-voltage.0x.quantiser-gain"). */
#define CBF_TEXT_NAME_MAX 128

/* ---- pools (buffer.c) ---- */
/* Wakes every waiter of the pool; cbf_pool_get returns CBF_ESTOPPED from now on. */
CBF_RT_HIDDEN void cbf_rt_pool_abort(cbf_pool *pool);
/* Links pools into a node's list (engine-owned pools). */
CBF_RT_HIDDEN cbf_pool *cbf_rt_pool_next(cbf_pool *pool);
CBF_RT_HIDDEN void cbf_rt_pool_set_next(cbf_pool *pool, cbf_pool *next);
/* Harness mode (harness.c): a pool that runs dry grows by one buffer
 * (counted in *grown) instead of blocking, and with poison set, host
 * payloads are filled with 0xa5 when taken, so unwritten output shows. */
CBF_RT_HIDDEN void cbf_rt_pool_set_growing(cbf_pool *pool, atomic_uint_least64_t *grown, bool poison);

/* ---- ports and queues (port.c) ---- */
struct cbf_port {
    char name[64];
    cbf_node *owner;
    cbf_port_dir dir;
    const char *type;  /* the declared type ("a|b": alternatives); NULL: a harness stand-in */
    unsigned flags;    /* input: the declaration's CBF_PORT_* flags */

    /* Output: the descriptor, and one consumer input per edge (fan-out). */
    cbf_port_desc desc;
    bool desc_set;
    struct cbf_port **consumers;
    size_t n_consumers;

    /* Input: the bounded queue of its edge (one mutex per queue). */
    struct cbf_port *source;
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    cbf_buffer **ring;
    size_t depth, head, count;
    bool unbounded;    /* harness: the ring grows instead of blocking the sender */
    bool closed;       /* producer finished: EOS once drained */
    bool detached;     /* consumer finished: later sends are released at once */
    uint64_t discarded; /* buffers released because the consumer had gone */
    const atomic_bool *abort;
};

CBF_RT_HIDDEN int cbf_rt_port_init_input(cbf_port *p, cbf_node *owner, const char *name,
                                         size_t depth, const atomic_bool *abort, cbf_error *err);
/* An output feeding n_consumers inputs, linked with cbf_rt_port_link. */
CBF_RT_HIDDEN int cbf_rt_port_init_output(cbf_port *p, cbf_node *owner, const char *name,
                                          size_t n_consumers, cbf_error *err);
CBF_RT_HIDDEN void cbf_rt_port_link(cbf_port *out, cbf_port *in);
CBF_RT_HIDDEN void cbf_rt_port_destroy(cbf_port *p);
/* Takes the next queued buffer without waiting: 0, or CBF_EOS when none. */
CBF_RT_HIDDEN int cbf_rt_port_take(cbf_port *in, cbf_buffer **out);
/* Producer finished: wake the consumer so it sees EOS after the queue drains. */
CBF_RT_HIDDEN void cbf_rt_port_close(cbf_port *in);
/* Consumer finished: release what is queued and everything sent later.
 * Returns how many buffers were released. */
CBF_RT_HIDDEN uint64_t cbf_rt_port_detach(cbf_port *in);
/* Abort: wake everyone blocked on this queue. */
CBF_RT_HIDDEN void cbf_rt_port_wake(cbf_port *in);

/* ---- nodes (node.c) ---- */
struct cbf_counter {
    char name[CBF_COUNTER_NAME_MAX];
    cbf_rt_about about;           /* set from init */
    atomic_uint_least64_t value;
    atomic_bool warn_on_rise;
    /* What readers last saw (sensor.c, under the node's sensor_mu). */
    uint64_t seen;
    double updated, rose;         /* UNIX seconds; 0: never */
};

struct cbf_gauge {
    char name[CBF_COUNTER_NAME_MAX];
    cbf_rt_about about;
    atomic_uint_least64_t bits;   /* the double's bits */
    atomic_int status;            /* -1: from the rule; else a cbf_status */
    double lo, hi;                /* nominal range (set from init) */
    bool has_range;
    uint64_t seen;                /* sensor.c, under the node's sensor_mu */
    double updated;
};

struct cbf_text {
    char name[CBF_TEXT_NAME_MAX];
    cbf_rt_about about;
    pthread_mutex_t *mu;          /* its node's sensor_mu */
    char *value;                  /* NULL until set; under the node's sensor_mu */
    cbf_status status;
    double updated;
};

/* One runtime request on its way to a node (request.c). The front end's
 * thread owns it; the node thread fills rc/err/reply and sets done. */
struct cbf_request {
    const cbf_request_decl *decl;
    cbf_params *args;
    struct cbf_reply *reply;
    int rc;
    cbf_error err;
    bool read_only;    /* the engine's read_only: true */
    bool taken, done;
    struct cbf_request *next;
};

typedef struct cbf_port_slot {
    const cbf_port_decl *decl;
    cbf_port **ports;      /* inputs: one per edge in to_index order; outputs: one or none */
    int n;
} cbf_port_slot;

struct cbf_node {
    cbf_engine *engine;    /* NULL for a harness's node */
    const struct cbf_rt_driver *driver;   /* NULL for an engine's node */
    const cbf_graph_node *g;
    void *state;
    cbf_port_slot *slots;  /* one per plugin port declaration */
    bool use_gpu;
    int gpu_device;
    const atomic_bool *stopping, *aborting;

    cbf_pool *pools;       /* owned, checked by the engine at the end */

    atomic_uint_least64_t buffers_in, buffers_out, bytes_out;
    atomic_uint_least64_t wait_in_ns, wait_out_ns;
    atomic_uint_least64_t run_start_ns, run_end_ns;

    struct cbf_counter counters[CBF_MAX_COUNTERS];
    atomic_int n_counters;
    struct cbf_gauge gauges[CBF_MAX_GAUGES];
    atomic_int n_gauges;
    /* Text sensors and what readers last saw of counters and gauges
     * (sensor.c). */
    pthread_mutex_t sensor_mu;
    struct cbf_text **texts;
    size_t n_texts, cap_texts;

    /* Mailbox of runtime requests (request.c): the control thread queues,
     * the node's thread takes them between buffers. */
    pthread_mutex_t mb_mu;
    pthread_cond_t mb_cv;
    struct cbf_request *mb_head;
    atomic_bool mb_pending;
    bool mb_closed;        /* run has returned: no more requests */

    /* Engine bookkeeping. */
    bool init_called;
    pthread_t thread;
    bool thread_started;
    int rc;
    cbf_error err;
};

/* Sets up a node of plugin g (ports unwired, one slot per declaration). */
CBF_RT_HIDDEN int cbf_rt_node_setup(cbf_node *n, const cbf_graph_node *g, const atomic_bool *stopping,
                                    const atomic_bool *aborting, cbf_error *err);
/* Frees what setup and wiring allocated: slots, output ports, mailbox. */
CBF_RT_HIDDEN void cbf_rt_node_release(cbf_node *n);
/* Calls the plugin's init (as the node's thread), and on failure completes
 * err as cbf_rt_node_fail does. */
CBF_RT_HIDDEN int cbf_rt_node_init(cbf_node *n, cbf_error *err);
/* Completes a node's error: a message when the plugin left none ("<what>
 * failed: ..."), its code, and the node's place and name in front. */
CBF_RT_HIDDEN void cbf_rt_node_fail(const cbf_node *n, const char *what, int rc, cbf_error *err);
/* Frees the node's pools; one with buffers still out stays allocated (a
 * late write stays harmless) and is logged. Returns the first leak, in err
 * prefixed with the node. */
CBF_RT_HIDDEN int cbf_rt_node_free_pools(cbf_node *n, cbf_error *err);
/* The node whose thread is calling (NULL outside node threads and init). */
CBF_RT_HIDDEN cbf_node *cbf_rt_node_current(void);
CBF_RT_HIDDEN void cbf_rt_node_set_current(cbf_node *n);
/* Adds blocked time to a node's wait counters (n may be NULL). */
CBF_RT_HIDDEN void cbf_rt_node_add_wait(cbf_node *n, bool output, uint64_t ns);
CBF_RT_HIDDEN void cbf_rt_node_stats(const cbf_node *n, uint64_t now_ns, cbf_node_stats *out);

/* ---- sensor status (sensor.c) ---- */
CBF_RT_HIDDEN void cbf_rt_node_sensors_init(cbf_node *n);
CBF_RT_HIDDEN void cbf_rt_node_sensors_destroy(cbf_node *n);
/* Readers' looks at counters, gauges and texts: engine_view.h. */

/* ---- requests (request.c) ---- */
CBF_RT_HIDDEN void cbf_rt_node_mailbox_init(cbf_node *n);
CBF_RT_HIDDEN void cbf_rt_node_mailbox_destroy(cbf_node *n);
/* Node thread: handles what is queued. Cheap (one atomic load) when empty. */
CBF_RT_HIDDEN void cbf_rt_node_drain(cbf_node *n);
/* Node thread, after run returned: fails what is queued and refuses more. */
CBF_RT_HIDDEN void cbf_rt_node_mailbox_close(cbf_node *n);
/* Queues req without waiting (the harness: the node runs on this thread). */
CBF_RT_HIDDEN int cbf_rt_node_post(cbf_node *n, struct cbf_request *req);
/* Control thread: queues req, wakes the node, waits for it to be handled.
 * When the node has not taken it within timeout_ms, it is withdrawn
 * (nothing changed) and CBF_EIO returned with a message in req->err. */
CBF_RT_HIDDEN int cbf_rt_node_submit(cbf_node *n, struct cbf_request *req, int timeout_ms);
/* reply objects (jansson inside; freed and read: engine_view.h) */
CBF_RT_HIDDEN struct cbf_reply *cbf_rt_reply_new(void);

/* ---- a node driven from outside an engine (the harness) ---- */
/* What drives a node no engine runs: the runtime calls it where an
 * engine's node would wait for input or make a pool, so the harness
 * (harness/) can feed a test's script in order and let pools grow. The
 * runtime knows it only through these pointers. */
typedef struct cbf_rt_driver {
    /* Before a node reads `in` (NULL: a source between buffers, on its
     * thread): moves what the test queued, in order, onto the inputs and
     * into the mailbox, until `in` has a buffer or has ended. */
    void (*feed)(void *ctx, cbf_port *in);
    /* A pool the node made: it grows rather than blocks. */
    void (*pool)(void *ctx, cbf_pool *pool);
    void *ctx;
} cbf_rt_driver;

/* ---- requests (request.c; the front ends' call is in engine_view.h) ---- */
#define CBF_RT_REQUEST_TIMEOUT_MS 5000   /* how long a node may take to reach its mailbox */
/* The counter a node declaring a timed request (CBF_PARAM_TIMESTAMP) gets. */
CBF_RT_HIDDEN const cbf_request_decl *cbf_rt_request_decl(const cbf_plugin_desc *d, const char *name);

/* ---- GPU glue (gpu_cuda.c / gpu_none.c) ---- */
CBF_RT_HIDDEN int cbf_rt_gpu_alloc(cbf_mem_kind kind, size_t size, void **out, cbf_error *err);
CBF_RT_HIDDEN void cbf_rt_gpu_free(cbf_mem_kind kind, void *p);
CBF_RT_HIDDEN int cbf_rt_gpu_event_create(void **out, cbf_error *err);
CBF_RT_HIDDEN void cbf_rt_gpu_event_destroy(void *ev);
CBF_RT_HIDDEN int cbf_rt_gpu_set_device(int device, cbf_error *err);
CBF_RT_HIDDEN int cbf_rt_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes, cbf_error *err);
/* Sets device memory to value and waits for it (pool poisoning only). */
CBF_RT_HIDDEN int cbf_rt_gpu_fill(void *dst, int value, size_t bytes);

#endif
