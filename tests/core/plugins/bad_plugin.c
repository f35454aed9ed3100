/* Broken test plugins, one per build (-DBAD=...): each must be refused by
 * the registry with a message naming the file and the fault. */
#include "cbf/cbf.h"

#if BAD != 0
static int run_nothing(cbf_node *node, cbf_error *err)
{
    (void)node;
    (void)err;
    return 0;
}
#endif

#if BAD == 1 /* a plugin built against another ABI */
static const cbf_plugin_desc desc = {99u, "tbadabi", "1.0", "wrong ABI", NULL, 0, NULL, 0,
                                     NULL, run_nothing, NULL, NULL, 0, NULL};
#elif BAD == 2 /* the same name from two directories of one tier */
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "ttwin", "1.0", "twin", NULL, 0, NULL, 0,
                                     NULL, run_nothing, NULL, NULL, 0, NULL};
#elif BAD == 3
static const cbf_param_decl params[] = {
    {"taps", CBF_PARAM_INT, "16", CBF_NORANGE, NULL, "taps"},
    {"taps", CBF_PARAM_INT, "8", CBF_NORANGE, NULL, "taps again"},
};
#elif BAD == 4
static const cbf_param_decl params[] = {
    {"mode", (cbf_param_type)42, "1", CBF_NORANGE, NULL, "no such type"},
};
#elif BAD == 5
static const cbf_param_decl params[] = {
    {"taps", CBF_PARAM_INT, "17", CBF_RANGE(1, 16), NULL, "default out of its own range"},
};
#elif BAD == 6
static const cbf_param_decl params[] = {
    {"taps", CBF_PARAM_INT, "16", CBF_NORANGE, NULL, "taps"},
};
static const cbf_port_decl ports[] = {
    {"out", CBF_PORT_OUT, "test.a", 0, 0, "one"},
    {"out", CBF_PORT_OUT, "test.b", 0, 0, "the same name again"},
};
#elif BAD == 7 || BAD == 8
/* Requests are checked like parameters; names the core answers are reserved. */
static const cbf_param_decl params[] = {
    {"taps", CBF_PARAM_INT, "16", CBF_NORANGE, NULL, "taps"},
};
static const cbf_param_decl gain_args[] = {
    {"value", CBF_PARAM_FLOAT, "3", CBF_RANGE(0, 2), NULL, "default out of its own range"},
};
static const cbf_request_decl requests[] = {
    {BAD == 7 ? "gain" : "shutdown", gain_args, BAD == 7 ? 1 : 0, "a request"},
};
static int on_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    (void)node, (void)req, (void)reply, (void)err;
    return 0;
}
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tbaddecl", "1.0", "invalid request declarations",
                                     params, CBF_COUNT_OF(params), NULL, 0, NULL, run_nothing, NULL,
                                     requests, 1, on_request};
#endif

#if BAD == 6
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tbaddecl", "1.0", "invalid declarations",
                                     params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports),
                                     NULL, run_nothing, NULL, NULL, 0, NULL};
#elif BAD >= 3 && BAD < 6
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tbaddecl", "1.0", "invalid declarations",
                                     params, CBF_COUNT_OF(params), NULL, 0, NULL, run_nothing, NULL, NULL, 0, NULL};
#endif

#if BAD == 0 /* no entry symbol: an ordinary shared object named like a plugin */
int tnosym_something(void);
int tnosym_something(void) { return 1; }
#else
CBF_PLUGIN_DEFINE(desc)
#endif
