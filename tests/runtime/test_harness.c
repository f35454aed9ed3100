/* test_harness.c: the test harness (cbf/harness.h) itself: buffers pushed
 * and pulled in order, a pool that grows instead of blocking the one
 * thread, requests handled between the right two buffers, leaks reported,
 * and a plugin's errors surfacing as the engine reports them. A plugin
 * compiled in here (th_scale) and the runtime's rt_pass, found by name as
 * cbf-run finds it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cbf/cbf.h"
#include "cbf/harness.h"

#define WORDS 16

/* ---- th_scale: out[i] = factor * in[i]; request "set" changes factor ---- */

typedef struct {
    cbf_pool *pool;
    int64_t factor;
    cbf_buffer *kept;   /* leak=true: the first input, never released */
} scale;

static int scale_init(cbf_node *n, cbf_error *err)
{
    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(n, "in", 0));
    if (!in)
        return cbf_error_set(err, CBF_EINVAL, "no input descriptor");
    scale *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(n, s);
    s->factor = cbf_params_int(cbf_node_params(n), "factor");
    cbf_node_counter(n, "scaled");
    cbf_node_gauge(n, "factor");
    cbf_pool_config cfg = {.name = "out", .kind = CBF_MEM_HOST, .count = 1,
                           .size = cbf_port_desc_bytes(in)};
    int rc = cbf_node_pool_create(n, &cfg, &s->pool, err);
    return rc ? rc : cbf_port_set_desc(cbf_node_port(n, "out", 0), in, err);
}

static int scale_run(cbf_node *n, cbf_error *err)
{
    (void)err;
    scale *s = cbf_node_state(n);
    bool leak = cbf_params_bool(cbf_node_params(n), "leak");
    for (;;) {
        cbf_buffer *in, *out;
        int rc = cbf_port_recv(cbf_node_port(n, "in", 0), &in);
        if (rc == CBF_EOS)
            return CBF_OK;
        if (rc || (rc = cbf_pool_get(s->pool, &out)))
            return rc;
        for (size_t i = 0; i < WORDS; i++)
            ((uint64_t *)out->data)[i] = (uint64_t)s->factor * ((const uint64_t *)in->data)[i];
        out->seq = in->seq;
        if (leak && !s->kept)
            s->kept = in;
        else
            cbf_buffer_unref(in);
        cbf_counter_add(cbf_node_counter(n, "scaled"), 1);
        if ((rc = cbf_port_send(cbf_node_port(n, "out", 0), out)))
            return rc;
    }
}

static int scale_request(cbf_node *n, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    scale *s = cbf_node_state(n);
    int64_t f = cbf_params_int(cbf_request_args(req), "factor");
    if (f == 13)
        return cbf_error_set(err, CBF_EINVAL, "13 brings bad luck");
    cbf_reply_int(reply, "was", s->factor);
    s->factor = f;
    cbf_gauge_set(cbf_node_gauge(n, "factor"), (double)f);
    return CBF_OK;
}

static void scale_fini(cbf_node *n) { free(cbf_node_state(n)); }

static const cbf_param_decl scale_params[] = {
    {"factor", CBF_PARAM_INT, "1", CBF_RANGE(0, 1000), NULL, "multiplier"},
    {"leak", CBF_PARAM_BOOL, "false", CBF_NORANGE, NULL, "keep the first input forever"},
};
static const cbf_param_decl set_args[] = {
    {"factor", CBF_PARAM_INT, NULL, CBF_RANGE(0, 1000), NULL, "the new multiplier"},
};
static const cbf_request_decl scale_requests[] = {{"set", set_args, 1, "change the multiplier"}};
static const cbf_port_decl scale_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "cbf.test.u64", .doc = "words"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = "cbf.test.u64", .doc = "words times factor"},
};
static const cbf_plugin_desc scale_desc = {
    .abi = CBF_PLUGIN_ABI, .name = "th_scale", .version = "1", .summary = "test: multiplies words",
    .params = scale_params, .n_params = CBF_COUNT_OF(scale_params),
    .ports = scale_ports, .n_ports = CBF_COUNT_OF(scale_ports),
    .init = scale_init, .run = scale_run, .fini = scale_fini,
    .requests = scale_requests, .n_requests = 1, .request = scale_request,
};

/* ---- helpers ---- */

static cbf_port_desc words_desc(void)
{
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_U64, CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "word", WORDS);
    return d;
}

static cbf_harness *make(const cbf_plugin_desc *d, const char *plugin, const char *const *params,
                         size_t n)
{
    cbf_harness *h = NULL;
    cbf_error err = {0};
    int rc = d ? cbf_harness_new_desc(d, params, n, &h, &err) : cbf_harness_new(plugin, params, n, &h, &err);
    if (rc)
        fail_msg("harness: %s", err.msg);
    cbf_port_desc in = words_desc();
    assert_int_equal(cbf_harness_set_input_desc(h, "in", &in, &err), 0);
    return h;
}

/* Pushes buffer seq with words seq * 100 + i. */
static void push_words(cbf_harness *h, uint64_t seq)
{
    cbf_buffer *b;
    cbf_error err;
    assert_int_equal(cbf_harness_new_buffer(h, "in", &b, &err), 0);
    assert_int_equal(b->size, WORDS * 8);
    b->seq = seq;
    for (size_t i = 0; i < WORDS; i++)
        ((uint64_t *)b->data)[i] = seq * 100 + i;
    assert_int_equal(cbf_harness_push(h, "in", b, &err), 0);
}

static void pull_words(cbf_harness *h, uint64_t seq, uint64_t factor)
{
    cbf_buffer *b;
    assert_int_equal(cbf_harness_pull(h, "out", &b), 0);
    assert_int_equal(b->seq, seq);
    for (size_t i = 0; i < WORDS; i++)
        assert_int_equal(((uint64_t *)b->data)[i], factor * (seq * 100 + i));
    cbf_buffer_unref(b);
}

/* ---- tests ---- */

static void push_run_pull(void **state)
{
    (void)state;
    const char *params[] = {"factor=3"};
    cbf_harness *h = make(&scale_desc, NULL, params, 1);
    cbf_error err;
    assert_int_equal(cbf_harness_init(h, &err), 0);
    const cbf_port_desc *out = cbf_harness_output_desc(h, "out");
    assert_non_null(out);
    assert_int_equal(cbf_port_desc_bytes(out), WORDS * 8);
    for (uint64_t s = 0; s < 5; s++)
        push_words(h, s);
    assert_int_equal(cbf_harness_end(h, NULL, &err), 0);
    assert_int_equal(cbf_harness_run(h, &err), 0);
    for (uint64_t s = 0; s < 5; s++)
        pull_words(h, s, 3);
    cbf_buffer *none = (cbf_buffer *)1;
    assert_int_equal(cbf_harness_pull(h, "out", &none), CBF_EOS);
    assert_null(none);
    cbf_harness_stats st;
    cbf_harness_get_stats(h, &st);
    /* A pool of one, five outputs waiting for the test: it grew four times. */
    assert_int_equal(st.pool_grown, 4);
    assert_int_equal(st.pushed, 5);
    assert_int_equal(st.received, 5);
    assert_int_equal(st.sent, 5);
    uint64_t scaled;
    assert_int_equal(cbf_harness_counter(h, "scaled", &scaled), 0);
    assert_int_equal(scaled, 5);
    assert_int_equal(cbf_harness_counter(h, "nothing", &scaled), CBF_EINVAL);
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

/* Without cbf_harness_end the inputs end when what was pushed is used up. */
static void implicit_end(void **state)
{
    (void)state;
    cbf_harness *h = make(&scale_desc, NULL, NULL, 0);
    cbf_error err;
    push_words(h, 0);
    assert_int_equal(cbf_harness_run(h, &err), 0);   /* init too */
    pull_words(h, 0, 1);
    assert_int_equal(cbf_harness_run(h, &err), CBF_EINVAL);
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

static void requests_between_buffers(void **state)
{
    (void)state;
    cbf_harness *h = make(&scale_desc, NULL, NULL, 0);
    cbf_error err;
    const char *two[] = {"factor=2"}, *five[] = {"factor=5"}, *bad[] = {"factor=13"};
    cbf_harness_reply *r1, *r2, *r3, *r4;
    push_words(h, 0);
    assert_int_equal(cbf_harness_request(h, "set", two, 1, &r1, &err), 0);
    push_words(h, 1);
    assert_int_equal(cbf_harness_request(h, "set", bad, 1, &r2, &err), 0);
    assert_int_equal(cbf_harness_request(h, "set", five, 1, &r3, &err), 0);
    push_words(h, 2);
    assert_int_equal(cbf_harness_request(h, "set", two, 1, &r4, &err), 0);
    assert_int_equal(cbf_harness_reply_status(r1, &err), 1);   /* not yet delivered */
    /* Checked when queued, by the control plane's code. */
    const char *wrong[] = {"factor=many"}, *typo[] = {"facter=1"};
    cbf_harness_reply *x;
    assert_int_equal(cbf_harness_request(h, "set", wrong, 1, &x, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "argument 'factor'"));
    assert_int_equal(cbf_harness_request(h, "set", typo, 1, &x, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "did you mean 'factor'"));
    assert_int_equal(cbf_harness_request(h, "reset", NULL, 0, &x, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "no request 'reset'"));

    assert_int_equal(cbf_harness_run(h, &err), 0);
    pull_words(h, 0, 1);
    pull_words(h, 1, 2);
    pull_words(h, 2, 5);
    int64_t was;
    assert_int_equal(cbf_harness_reply_status(r1, &err), 0);
    assert_int_equal(cbf_harness_reply_int(r1, "was", &was), 0);
    assert_int_equal(was, 1);
    assert_int_equal(cbf_harness_reply_status(r2, &err), CBF_EINVAL);
    assert_string_equal(err.msg, "13 brings bad luck");
    assert_int_equal(cbf_harness_reply_int(r3, "was", &was), 0);
    assert_int_equal(was, 2);
    /* After the last buffer: handled when run() asks for the next one. */
    assert_int_equal(cbf_harness_reply_status(r4, &err), 0);
    double g;
    assert_int_equal(cbf_harness_gauge(h, "factor", &g), 0);
    assert_true(g == 2.0);
    cbf_harness_stats st;
    cbf_harness_get_stats(h, &st);
    assert_int_equal(st.requests, 4);
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

static void leaks_reported(void **state)
{
    (void)state;
    const char *leak[] = {"leak=true"};
    cbf_harness *h = make(&scale_desc, NULL, leak, 1);
    cbf_error err;
    push_words(h, 0);
    push_words(h, 1);
    assert_int_equal(cbf_harness_run(h, &err), 0);
    assert_int_equal(cbf_harness_free(h, &err), CBF_ELEAK);
    assert_non_null(strstr(err.msg, "input 'in' of node 'th_scale'"));
    assert_non_null(strstr(err.msg, "pool 'harness.in': 1 of 2 buffers never came back"));

    /* An output the test pulled and kept is a leak too. */
    h = make(&scale_desc, NULL, NULL, 0);
    push_words(h, 0);
    assert_int_equal(cbf_harness_run(h, &err), 0);
    cbf_buffer *kept;
    assert_int_equal(cbf_harness_pull(h, "out", &kept), 0);
    assert_int_equal(cbf_harness_free(h, &err), CBF_ELEAK);
    assert_non_null(strstr(err.msg, "harness: node 'th_scale' (plugin th_scale): pool 'th_scale.out'"));
}

static void params_validated(void **state)
{
    (void)state;
    cbf_harness *h = NULL;
    cbf_error err;
    const char *big[] = {"factor=1001"}, *typo[] = {"facter=2"}, *noeq[] = {"factor"};
    assert_int_equal(cbf_harness_new_desc(&scale_desc, big, 1, &h, &err), CBF_ECONFIG);
    assert_null(h);
    assert_non_null(strstr(err.msg, "parameter 'factor'"));
    assert_non_null(strstr(err.msg, "1001"));
    assert_int_equal(cbf_harness_new_desc(&scale_desc, typo, 1, &h, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "did you mean 'factor'"));
    assert_int_equal(cbf_harness_new_desc(&scale_desc, noeq, 1, &h, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "expected NAME=VALUE"));
    cbf_plugin_desc old = scale_desc;
    old.abi = 2;
    assert_int_equal(cbf_harness_new_desc(&old, NULL, 0, &h, &err), CBF_EPLUGIN);
    assert_non_null(strstr(err.msg, "ABI 2 found"));
}

/* A real plugin file, found as cbf-run finds it; rt_pass forwards the
 * very buffers it gets, and fails on purpose when asked. */
static void plugin_by_name_and_errors(void **state)
{
    (void)state;
    cbf_harness *h = make(NULL, "rt_pass", NULL, 0);
    cbf_error err;
    push_words(h, 0);
    push_words(h, 1);
    assert_int_equal(cbf_harness_run(h, &err), 0);
    pull_words(h, 0, 1);
    pull_words(h, 1, 1);
    assert_int_equal(cbf_harness_free(h, &err), 0);

    const char *fail_at[] = {"fail_at=1"};
    h = make(NULL, "rt_pass", fail_at, 1);
    for (uint64_t s = 0; s < 4; s++)
        push_words(h, s);
    assert_int_equal(cbf_harness_run(h, &err), CBF_EIO);
    assert_non_null(strstr(err.msg, "harness: node 'rt_pass' (plugin rt_pass): failing on purpose at buffer 1"));
    pull_words(h, 0, 1);
    cbf_buffer *b;
    assert_int_equal(cbf_harness_pull(h, "out", &b), CBF_EOS);
    assert_int_equal(cbf_harness_free(h, &err), 0);   /* what it never read went back */

    const char *fail_init[] = {"fail_init=1"};
    h = make(NULL, "rt_pass", fail_init, 1);
    assert_int_equal(cbf_harness_init(h, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "harness: node 'rt_pass' (plugin rt_pass): failing init on purpose"));
    assert_int_equal(cbf_harness_free(h, &err), 0);

    assert_int_equal(cbf_harness_new("rt_nothing", NULL, 0, &h, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "no plugin 'rt_nothing'"));
}

/* rt_negate writes its input: a pushed buffer is the plugin's alone. */
static void writes_input(void **state)
{
    (void)state;
    cbf_harness *h = make(NULL, "rt_negate", NULL, 0);
    cbf_error err;
    push_words(h, 4);
    assert_int_equal(cbf_harness_run(h, &err), 0);
    cbf_buffer *b;
    assert_int_equal(cbf_harness_pull(h, "out", &b), 0);
    for (size_t i = 0; i < WORDS; i++)
        assert_int_equal(((uint64_t *)b->data)[i], ~(uint64_t)(400 + i));
    assert_true(cbf_buffer_is_writable(b));
    cbf_buffer_unref(b);
    uint64_t shared = 1;
    assert_int_equal(cbf_harness_counter(h, "shared", &shared), 0);
    assert_int_equal(shared, 0);
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

int main(void)
{
    /* The runtime's test plugins, searched first as the user's path would be. */
    const char *dir = getenv("CBF_RT_PLUGIN_DIR");
    if (dir)
        setenv("CBF_PLUGIN_PATH", dir, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(push_run_pull),
        cmocka_unit_test(implicit_end),
        cmocka_unit_test(requests_between_buffers),
        cmocka_unit_test(leaks_reported),
        cmocka_unit_test(params_validated),
        cmocka_unit_test(plugin_by_name_and_errors),
        cmocka_unit_test(writes_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
