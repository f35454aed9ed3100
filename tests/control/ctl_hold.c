/* ctl_hold: a test plugin whose `hold` request keeps its node busy for
 * `ms` milliseconds (gauge `holding` 1 meanwhile), taking any number list
 * (`values`, any size up to the request cap): a request in flight that
 * lasts as long as the test needs, so a test can see what the engine
 * answers meanwhile by reading `holding` (test_control_busy.py). The node
 * itself is a source that only waits for the stop. */
#include <time.h>

#include "cbf/cbf.h"

static int hold_init(cbf_node *node, cbf_error *err)
{
    (void)err;
    cbf_gauge_set(cbf_node_gauge(node, "holding"), 0);
    return 0;
}

static int hold_run(cbf_node *node, cbf_error *err)
{
    (void)err;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    while (!cbf_node_stopping(node))
        nanosleep(&tick, NULL);
    return 0;
}

static int hold_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    (void)err;
    const cbf_params *p = cbf_request_args(req);
    cbf_gauge *g = cbf_node_gauge(node, "holding");
    int64_t ms = cbf_params_int(p, "ms");
    cbf_gauge_set(g, 1);
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t))
        ;
    cbf_gauge_set(g, 0);
    size_t n = cbf_params_len(p, "values");
    cbf_reply_int(reply, "values", (int64_t)n);
    cbf_reply_float(reply, "last", n ? cbf_params_float_at(p, "values", n - 1) : 0.0);
    return 0;
}

static const cbf_param_decl hold_args[] = {
    {.name = "ms", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0, .max = 60000,
     .doc = "how long the node holds the request"},
    {.name = "values", .type = CBF_PARAM_FLOAT_LIST, .def = "[]", .doc = "any numbers (counted)"},
};

static const cbf_request_decl hold_requests[] = {
    {.name = "hold", .args = hold_args, .n_args = CBF_COUNT_OF(hold_args),
     .doc = "keep the node busy for ms milliseconds"},
};

static const cbf_plugin_desc hold_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "ctl_hold",
    .version = "0.1.0",
    .summary = "test: a request that holds its node for a while",
    .init = hold_init,
    .run = hold_run,
    .requests = hold_requests,
    .n_requests = CBF_COUNT_OF(hold_requests),
    .request = hold_request,
};

CBF_PLUGIN_DEFINE(hold_desc)
