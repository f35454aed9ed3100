/* frontend.h (private to libcbf): how a control front end (frontends/)
 * makes itself known to the engine, which names none of them.
 *
 * A front end fills one cbf_frontend and registers it from its own file:
 *
 *     static const cbf_frontend katcp_frontend = {"katcp", 30, kc_open, kc_start, kc_close};
 *     CBF_FRONTEND(katcp_frontend)
 *
 * CBF_FRONTEND adds it to the registry (frontend.c) from a constructor,
 * which runs when libcbf is loaded, before any engine exists. libcbf is a
 * shared library (core/meson.build) so every front end's object file is
 * in it, and its constructor runs, whether or not anything calls into it;
 * linked statically, an object nothing refers to would be left out and its
 * front end would silently be missing.
 *
 * The engine (engine.c) opens every registered front end when it is
 * created, starts them when it runs, and closes them when its nodes have
 * finished, each in the order of `order` (lowest first): the ZeroMQ plane
 * is closed first, so its last sensor message (with the final counts)
 * goes out while the other front ends still answer, as before this file
 * existed. The orders taken: 10 the ZeroMQ plane (zmq.c), 20 Prometheus
 * (metrics.c), 30 katcp (katcp.c); a new front end takes a free number
 * where it should stand.
 *
 * A front end reads the engine only through engine_view.h. */
#ifndef CBF_FRONTEND_H
#define CBF_FRONTEND_H

#include "cbf/error.h"
#include "cbf/graph.h"

#ifndef CBF_RT_HIDDEN
#define CBF_RT_HIDDEN __attribute__((visibility("hidden")))
#endif

/* The most front ends the registry holds. */
#define CBF_MAX_FRONTENDS 8

typedef struct cbf_frontend {
    const char *name;   /* for the log and errors */
    int order;          /* unique; see the orders taken, above */
    /* Reads the engine settings (cbf_rt_engine_graph(e)->engine) and binds
     * what they name. 0 with *state NULL when they configure none of this
     * front end; 0 with *state set; or an error naming the YAML place. */
    int (*open)(cbf_engine *e, void **state, cbf_error *err);
    /* Starts serving (its threads); called once, only with a state. */
    int (*start)(void *state, cbf_error *err);
    /* Stops (joins its threads) and frees; called once per state, started
     * or not. */
    void (*close)(void *state);
} cbf_frontend;

/* Adds f (from a constructor: before any engine exists, one thread).
 * A second front end of the same order, or more than CBF_MAX_FRONTENDS, is
 * remembered and makes every engine creation fail (cbf_rt_frontends). */
CBF_RT_HIDDEN void cbf_rt_frontend_register(const cbf_frontend *f);
/* The registered front ends in order: how many, in *list. CBF_EINTERNAL
 * (with err) when registration went wrong. */
CBF_RT_HIDDEN int cbf_rt_frontends(const cbf_frontend *const **list, size_t *n, cbf_error *err);

#define CBF_FRONTEND(var)                                                  \
    __attribute__((constructor)) static void cbf_frontend_register_##var(void) \
    {                                                                      \
        cbf_rt_frontend_register(&var);                                    \
    }

#endif
