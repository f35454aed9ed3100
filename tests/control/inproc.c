/* inproc.c: see inproc.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include <cmocka.h>

#include "feng_run.h"
#include "inproc.h"

static void *inproc_main(void *arg)
{
    inproc *r = arg;
    r->rc = cbf_engine_run(r->e, &r->err);
    return NULL;
}

void inproc_start(inproc *r, const char *yaml_path, const char *text)
{
    FILE *f = fopen(yaml_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    char here[512];
    snprintf(here, sizeof here, "%s/tests/feng",
             getenv("CBF_BUILD_ROOT") ? getenv("CBF_BUILD_ROOT") : ".");
    const char *dirs[] = {here};
    memset(r, 0, sizeof *r);
    int rc = cbf_registry_open(dirs, 1, &r->reg, &r->err);
    if (!rc)
        rc = cbf_graph_load(yaml_path, NULL, 0, r->reg, &r->g, &r->err);
    if (!rc)
        rc = cbf_engine_create(r->g, &r->e, &r->err);
    if (rc)
        fail_msg("engine: %s", r->err.msg);
    assert_int_equal(pthread_create(&r->thread, NULL, inproc_main, r), 0);
}

static void inproc_close(void);

void inproc_wait(inproc *r)
{
    if (r->joined)
        return;
    inproc_close();
    pthread_join(r->thread, NULL);
    r->joined = 1;
    if (r->rc)
        fail_msg("engine run: %s", r->err.msg);
}

uint64_t inproc_counter(const inproc *r, const char *node, const char *name)
{
    static cbf_node_stats st[64];
    size_t n = cbf_engine_stats(r->e, st, 64);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; !strcmp(st[i].name, node) && k < st[i].n_counters; k++)
            if (!strcmp(st[i].counter_names[k], name))
                return st[i].counter_values[k];
    fail_msg("node '%s' has no counter '%s'", node, name);
    return 0;
}

void inproc_finish(inproc *r)
{
    inproc_wait(r);
    cbf_engine_free(r->e);
    cbf_graph_free(r->g);
    cbf_registry_close(r->reg);
}

static void *zctx, *req_sock;

json_t *inproc_request(const char *endpoint, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (!zctx)
        zctx = zmq_ctx_new();
    if (!req_sock) {
        int ms = 30000, zero = 0, ivl = 10;
        req_sock = zmq_socket(zctx, ZMQ_REQ);
        zmq_setsockopt(req_sock, ZMQ_RCVTIMEO, &ms, sizeof ms);
        zmq_setsockopt(req_sock, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(req_sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
        assert_int_equal(zmq_connect(req_sock, endpoint), 0);
    }
    assert_true(zmq_send(req_sock, text, strlen(text), 0) >= 0);
    char reply[8192];
    int n = zmq_recv(req_sock, reply, sizeof reply - 1, 0);
    if (n < 0)
        fail_msg("no reply to %s within 30 s", text);
    reply[n < (int)sizeof reply - 1 ? n : (int)sizeof reply - 1] = '\0';
    json_error_t je;
    json_t *o = json_loads(reply, 0, &je);
    assert_non_null(o);
    return o;
}

static void inproc_close(void)
{
    if (req_sock)
        zmq_close(req_sock);
    req_sock = NULL;
    if (zctx)
        zmq_ctx_term(zctx);
    zctx = NULL;
}

int inproc_gpu_arg(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--gpu"))
        return 0;
    if (!feng_have_gpu()) {
        printf("no usable GPU: the GPU run is skipped\n");
        return -1;
    }
    return 1;
}

int inproc_begin(int argc, char **argv, const char *name, char *dir, size_t n)
{
    const int gpu = inproc_gpu_arg(argc, argv);
    if (gpu < 0)
        return gpu;
    snprintf(dir, n, "/tmp/cbf-%s-XXXXXX", name);
    return mkdtemp(dir) ? gpu : -2;
}

void inproc_expect_ok(const char *what, json_t *o)
{
    if (!json_is_true(json_object_get(o, "ok")))
        fail_msg("%s: refused: %s", what, json_string_value(json_object_get(o, "error")));
    json_decref(o);
}

void inproc_expect_refused(const char *what, json_t *o, const char *want)
{
    const char *e = json_string_value(json_object_get(o, "error"));
    if (json_is_true(json_object_get(o, "ok")) || !e || !strstr(e, want))
        fail_msg("%s: expected a refusal saying '%s', got %s", what, want, e ? e : "ok");
    printf("refused as it should be: %s: %s\n", what, e);
    json_decref(o);
}
