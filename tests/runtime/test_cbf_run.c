/* test_cbf_run.c: the real cbf-run executable on test pipelines: SIGINT in
 * the middle of an endless run drains it (exit 0, every buffer accounted
 * for in the table), a second interrupt exits at once (130), gpu: required
 * without a GPU is refused, and a bad pipeline exits 2. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cbf/gpu.h"

typedef struct {
    pid_t pid;
    FILE *err;          /* the child's stderr, read line by line */
    char out_path[256]; /* its stdout, for the table */
    char log[65536];    /* everything read from stderr */
    size_t log_len;
} child;

static void path_of(char *dst, size_t cap, const char *env, const char *rel)
{
    const char *root = getenv(env);
    snprintf(dst, cap, "%s/%s", root ? root : ".", rel);
}

static void start(child *c, const char *yaml, const char *const *extra)
{
    char exe[1024], pipeline[1024];
    path_of(exe, sizeof exe, "CBF_BUILD_ROOT", "tools/cbf-run");
    path_of(pipeline, sizeof pipeline, "CBF_SOURCE_ROOT", yaml);
    const char *plugins = getenv("CBF_RT_PLUGIN_DIR");
    snprintf(c->out_path, sizeof c->out_path, "/tmp/cbf-run-test-%d.out", (int)getpid());
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        int out = open(c->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out, STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        const char *argv[16] = {exe, pipeline, "--plugin-path", plugins ? plugins : "."};
        int n = 4;
        for (int i = 0; extra && extra[i] && n < 15; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    c->err = fdopen(fds[0], "r");
    c->log_len = 0;
    c->log[0] = '\0';
}

/* Reads stderr until a line contains `what` (1) or EOF (0). */
static int wait_for(child *c, const char *what)
{
    char line[4096];
    while (fgets(line, sizeof line, c->err)) {
        size_t n = strlen(line);
        if (c->log_len + n < sizeof c->log) {
            memcpy(c->log + c->log_len, line, n + 1);
            c->log_len += n;
        }
        if (what && strstr(line, what))
            return 1;
    }
    return 0;
}

/* Drains stderr, reaps the child, returns its exit status; stdout in out. */
static int finish(child *c, char *out, size_t cap)
{
    wait_for(c, NULL);
    fclose(c->err);
    int status;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
        ;
    FILE *f = fopen(c->out_path, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f)
        fclose(f);
    unlink(c->out_path);
    if (!WIFEXITED(status)) {
        print_error("cbf-run died by signal %d; stderr:\n%s", WTERMSIG(status), c->log);
        return -1;
    }
    return WEXITSTATUS(status);
}

/* The text after `name=` on the table row of node `node`, or NULL. */
static const char *table_find(const char *table, const char *node, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "\n%s ", node);
    const char *row = strstr(table, key);
    if (!row)
        return NULL;
    const char *end = strchr(row + 1, '\n');
    snprintf(key, sizeof key, " %s=", name);
    const char *v = strstr(row, key);
    return !v || (end && v > end) ? NULL : v + strlen(key);
}

/* A counter's value on the table: -1 when absent. */
static long long table_value(const char *table, const char *node, const char *name)
{
    const char *v = table_find(table, node, name);
    return v ? atoll(v) : -1;
}

/* A gauge's value on the table: NaN when absent. */
static double table_gauge(const char *table, const char *node, const char *name)
{
    const char *v = table_find(table, node, name);
    return v ? strtod(v, NULL) : NAN;
}

static void test_sigint_drains(void **st)
{
    (void)st;
    child c;
    start(&c, "tests/runtime/endless.yaml", NULL);
    /* The source logs its first buffer: the graph is really running. */
    if (!wait_for(&c, "first buffer sent")) {
        char out[8192];
        finish(&c, out, sizeof out);
        fail_msg("cbf-run never got going; stderr:\n%s", c.log);
    }
    assert_int_equal(kill(c.pid, SIGINT), 0);
    static char out[65536];
    int rc = finish(&c, out, sizeof out);
    if (rc != 0)
        print_error("stderr:\n%s\nstdout:\n%s", c.log, out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "stopped (SIGINT) and drained"));
    long long sent = table_value(out, "src", "sent");
    long long got = table_value(out, "snk", "received");
    assert_true(sent >= 1);
    assert_int_equal(got, sent);
    assert_int_equal(table_value(out, "mid", "passed"), sent);
    assert_int_equal(table_value(out, "snk", "order_errors"), 0);
    assert_int_equal(table_value(out, "snk", "data_errors"), 0);
    /* gauges follow the counters (6 significant digits); unset ones are left out */
    double last = table_gauge(out, "snk", "last_seq");
    assert_true(fabs(last - (double)(sent - 1)) <= 1e-5 * (double)sent);
    assert_null(strstr(out, "never_set="));
}

static void test_second_interrupt_exits_at_once(void **st)
{
    (void)st;
    /* A sink this slow takes seconds to drain what is queued, so the second
     * interrupt surely lands while it drains. */
    const char *extra[] = {"--set", "snk.delay_us=2000000", NULL};
    child c;
    start(&c, "tests/runtime/endless.yaml", extra);
    assert_true(wait_for(&c, "first buffer sent"));
    assert_int_equal(kill(c.pid, SIGINT), 0);
    assert_true(wait_for(&c, "draining the graph"));
    assert_int_equal(kill(c.pid, SIGINT), 0);
    char out[8192];
    assert_int_equal(finish(&c, out, sizeof out), 130);
    assert_non_null(strstr(c.log, "second interrupt"));
}

static void test_gpu_required_without_gpu(void **st)
{
    (void)st;
    if (cbf_gpu_count() > 0)
        skip(); /* a GPU is here: the refusal cannot happen */
    child c;
    start(&c, "tests/runtime/gpu_required.yaml", NULL);
    char out[8192];
    int rc = finish(&c, out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(c.log, "gpu: required, but no GPU is usable"));
    assert_non_null(strstr(c.log, "gpu_required.yaml:"));
    assert_null(strstr(c.log, "first buffer sent")); /* nothing started */
}

static void test_bad_pipeline(void **st)
{
    (void)st;
    const char *extra[] = {"--set", "src.no_such_param=1", NULL};
    child c;
    start(&c, "tests/runtime/endless.yaml", extra);
    char out[8192];
    assert_int_equal(finish(&c, out, sizeof out), 2);
    assert_non_null(strstr(c.log, "cbf-run: "));
    assert_null(strstr(c.log, "first buffer sent"));
}

/* Fan-out into an input that writes its buffers is a pipeline error. */
static void test_fanout_into_writer(void **st)
{
    (void)st;
    child c;
    start(&c, "tests/runtime/fanout_writer.yaml", NULL);
    char out[8192];
    assert_int_equal(finish(&c, out, sizeof out), 2);
    assert_non_null(strstr(c.log, "fanout_writer.yaml:10:5: edge src.out -> snk.in: output 'src.out' "
                                  "already feeds neg.in (at "));
    assert_non_null(strstr(c.log, "input 'neg.in' writes its buffers in place"));
    assert_null(strstr(c.log, "first buffer sent"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigint_drains),
        cmocka_unit_test(test_second_interrupt_exits_at_once),
        cmocka_unit_test(test_gpu_required_without_gpu),
        cmocka_unit_test(test_bad_pipeline),
        cmocka_unit_test(test_fanout_into_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
