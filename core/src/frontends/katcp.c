/* katcp.c: the engine's katcp v5 front end (engine key `katcp:`), the line
 * protocol MeerKAT's CAM speaks: libcbf's katcp server (cbf/katcp.h) with
 * the engine's requests and sensors.
 *
 * Built-in requests are the server's (help, watchdog, log-level,
 * version-list, sensor-list, sensor-value, sensor-sampling) and ?halt.
 * Any other name is a plugin request, run through the same path as the
 * ZeroMQ plane's (cbf_rt_request_call, katcp_requests.c): `?NAME
 * [node=NODE] [key=value ...]`, with katgpucbf's positional forms for
 * capture-start, capture-stop and gain. Sensors are the ones the ZeroMQ
 * `sensors` request reads (cbf_fe_sensors_nodes), named NODE.NAME and
 * by katgpucbf's names, with katgpucbf's engine-wide ones
 * (katcp_sensors.c, katcp_clock.c, docs/control.md).
 *
 * A plugin request longer than 64 KiB is answered on the server's request
 * thread, one at a time: another meanwhile is refused "busy", as on the
 * ZeroMQ plane, so at most one long request is held. */
#include <stdlib.h>

#include "cbf/log.h"
#include "katcp_engine.h"
#include "runtime/frontend.h"

static void kc_halt(cbf_katcp_call *c, void *user)
{
    cbf_katcp_engine *k = user;
    if (cbf_katcp_call_nargs(c)) {
        cbf_katcp_reply_fmt(c, "fail", "?halt takes 0 to 0 arguments, got %zu", cbf_katcp_call_nargs(c));
        return;
    }
    if (k->g->engine.read_only) {
        cbf_katcp_reply_fmt(c, "fail", "?halt refused: the engine is read-only (%s: engine.read_only: true)",
                            k->g->engine.read_only_where);
        return;
    }
    /* The reply goes first; the graph then drains as on SIGTERM. */
    cbf_katcp_reply(c, "ok", 0, NULL);
    cbf_log_info("halt requested over katcp");
    cbf_engine_stop(k->e);
}

static void katcp_close(void *state)
{
    cbf_katcp_engine *k = state;
    cbf_katcp_server_close(k->srv);
    free(k);
}

static int katcp_open(cbf_engine *e, void **out, cbf_error *err)
{
    *out = NULL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    if (!g->engine.katcp)
        return CBF_OK;
    cbf_katcp_engine *k = calloc(1, sizeof *k);
    if (!k)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: out of memory");
    k->e = e;
    k->g = g;
    const cbf_katcp_server_options opt = {
        .label = "engine.katcp",
        .where = g->engine.katcp_where,
        .exposes = "change gains and delays, stop captures and halt the engine",
        .idle_timeout = g->engine.katcp_idle_timeout,
        .idle_setting = "engine.katcp_idle_timeout",
        /* katgpucbf's suite reads the build from katcp-device's third
         * argument (qualification/cbf.py, _get_git_version_conn) */
        .device = "cbf-engine",
        .device_build = CBF_VERSION,
        .slow_threads = 1,
        .slow_waiting = 0,
        .fallback = cbf_katcp_engine_request,
        .fallback_help = cbf_katcp_engine_help,
        .fallback_user = k,
        .snapshot = cbf_katcp_engine_sensors,
        .snapshot_user = k,
    };
    const cbf_katcp_request halt = {"halt", "?halt: drain the pipeline and exit 0, as on SIGTERM", kc_halt, k, 0};
    int rc = cbf_katcp_server_open(g->engine.katcp, &opt, &k->srv, err);
    if (!rc)
        rc = cbf_katcp_server_add_request(k->srv, &halt, err);
    if (rc) {
        katcp_close(k);
        return rc;
    }
    cbf_log_info("katcp: requests on %s", cbf_katcp_server_address(k->srv));
    cbf_katcp_engine_check_names(k);
    *out = k;
    return CBF_OK;
}

static int katcp_start(void *state, cbf_error *err)
{
    cbf_katcp_engine *k = state;
    return cbf_katcp_server_start(k->srv, err);
}

static const cbf_frontend katcp_frontend = {"katcp", 30, katcp_open, katcp_start, katcp_close};
CBF_FRONTEND(katcp_frontend)
