/* katcp_engine.h (private to libcbf): what the engine's katcp front end's
 * files share. The server is libcbf's own (cbf/katcp.h); these files are
 * only what makes it an engine's: katcp.c opens it from the engine
 * settings and answers ?halt; katcp_requests.c turns every other request
 * into a plugin request (cbf_rt_request_call), with katgpucbf's positional
 * forms; katcp_sensors.c names the engine's sensors NODE.NAME and
 * katgpucbf's names; katcp_clock.c reads the host clock's quality. */
#ifndef CBF_KATCP_ENGINE_H
#define CBF_KATCP_ENGINE_H

#include "cbf/katcp.h"
#include "runtime/engine_view.h"

#define CBF_KATCP_ENGINE_HIDDEN __attribute__((visibility("hidden")))

/* One engine's katcp front end: the user pointer of every hook below. */
typedef struct cbf_katcp_engine {
    cbf_engine *e;
    const cbf_graph *g;
    cbf_katcp_server *srv;
} cbf_katcp_engine;

/* ---- katcp_requests.c ---- */
/* The server's fallback: any request that is not a built-in or ?halt. */
CBF_KATCP_ENGINE_HIDDEN void cbf_katcp_engine_request(cbf_katcp_call *c, void *user);
/* ?help's lines for the plugin requests (only `want` when not NULL). */
CBF_KATCP_ENGINE_HIDDEN size_t cbf_katcp_engine_help(cbf_katcp_call *c, const char *want, void *user);

/* ---- katcp_sensors.c ---- */
/* The server's snapshot: the sensors of every node (NODE.NAME, and the
 * katgpucbf names plugins give theirs), the engine's steady-state-timestamp,
 * device-status and the clock's. */
CBF_KATCP_ENGINE_HIDDEN int cbf_katcp_engine_sensors(cbf_katcp_sensors *out, void *user);
/* At open: warns of each engine-level katcp name that several nodes claim
 * (each is then published as NODE.name). */
CBF_KATCP_ENGINE_HIDDEN void cbf_katcp_engine_check_names(cbf_katcp_engine *k);

/* ---- katcp_clock.c ---- */
/* katgpucbf's time.esterror, time.maxerror, time.state, time.synchronised. */
CBF_KATCP_ENGINE_HIDDEN int cbf_katcp_engine_clock(cbf_katcp_sensors *out, double now);

#endif
