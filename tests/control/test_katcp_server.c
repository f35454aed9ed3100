/* libcbf's katcp server and client (cbf/katcp.h) in a program that is not
 * an engine: katcp_demo.h's two servers in this process, asked through the
 * C client and, where the informs that no call collects matter
 * (#sensor-status, #interface-changed), through a raw socket.
 *
 * - built-ins, registered requests, informs and replies, a handler that
 *   forgets to reply, an unknown request, registration refused;
 * - slow requests: two at once from two clients (?meet 2 is answered only
 *   when both run together), other clients served while one is held, and
 *   one client's replies in the order it asked;
 * - the sensor table: values checked against the type, set from another
 *   thread, every change of an event sampling seen in order, removal and
 *   #interface-changed; a snapshot sensor sampled by period;
 * - one server's slow handler asking the other with the C client;
 * - a client call that times out, and the next call on that client
 *   passing the late reply over.
 * Waits are bounded (a hang fails); nothing passes by timing. */
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "katcp_demo.h"

#define WAIT_S 20   /* a safety net: a working server answers at once */

static katcp_demo demo;

static int setup(void **state)
{
    (void)state;
    cbf_error err;
    if (katcp_demo_open(&demo, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    katcp_demo_close(&demo);
    return 0;
}

/* One call on a new client; the result in *r (free it). */
static void call(cbf_katcp_server *s, cbf_katcp_result *r, const char *name, size_t n, const char *const *args)
{
    cbf_katcp_client *cl;
    cbf_error err;
    if (cbf_katcp_client_connect(cbf_katcp_server_address(s), WAIT_S, &cl, &err))
        fail_msg("%s", err.msg);
    if (cbf_katcp_client_call(cl, name, n, args, WAIT_S, r, &err))
        fail_msg("%s", err.msg);
    cbf_katcp_client_close(cl);
}

static void expect_status(cbf_katcp_result *r, const char *status)
{
    if (strcmp(cbf_katcp_result_status(r), status))
        fail_msg("!%s %s, expected %s (%s)", r->reply.name, cbf_katcp_result_status(r), status,
                 r->reply.n_args > 1 ? r->reply.args[1] : "");
}

/* ---- a raw connection: lines as the server writes them ---- */

typedef struct raw {
    int fd;
    char buf[1 << 16];
    size_t len;
} raw;

static void raw_open(raw *w, cbf_katcp_server *s)
{
    char host[64];
    snprintf(host, sizeof host, "%s", cbf_katcp_server_address(s));
    char *colon = strrchr(host, ':');
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    assert_int_equal(getaddrinfo(host, colon + 1, &hints, &ai), 0);
    w->fd = socket(ai->ai_family, ai->ai_socktype, 0);
    assert_int_equal(connect(w->fd, ai->ai_addr, ai->ai_addrlen), 0);
    freeaddrinfo(ai);
    w->len = 0;
}

static void raw_send(raw *w, const char *text)
{
    assert_int_equal(send(w->fd, text, strlen(text), MSG_NOSIGNAL), (ssize_t)strlen(text));
}

/* The next line (without its end) into out; fails after WAIT_S. */
static void raw_line(raw *w, char *out, size_t n)
{
    for (;;) {
        char *nl = memchr(w->buf, '\n', w->len);
        if (nl) {
            size_t l = (size_t)(nl - w->buf);
            snprintf(out, n, "%.*s", (int)l, w->buf);
            memmove(w->buf, nl + 1, w->len - l - 1);
            w->len -= l + 1;
            return;
        }
        struct pollfd pf = {.fd = w->fd, .events = POLLIN};
        if (poll(&pf, 1, WAIT_S * 1000) <= 0)
            fail_msg("no line from the server within %d s", WAIT_S);
        ssize_t got = recv(w->fd, w->buf + w->len, sizeof w->buf - w->len, 0);
        if (got <= 0)
            fail_msg("the server closed the connection");
        w->len += (size_t)got;
    }
}

/* Reads lines until one starts with prefix (into out). */
static void raw_until(raw *w, const char *prefix, char *out, size_t n)
{
    do
        raw_line(w, out, n);
    while (strncmp(out, prefix, strlen(prefix)));
}

/* ---- requests ---- */

static void test_requests(void **state)
{
    (void)state;
    cbf_katcp_result r;
    call(demo.a, &r, "version-list", 0, NULL);
    expect_status(&r, "ok");
    assert_int_equal(r.n_informs, 3);
    assert_string_equal(r.informs[2].args[0], "katcp-device");
    assert_string_equal(r.informs[2].args[1], "demo-device");
    assert_string_equal(r.informs[2].args[2], "test");
    cbf_katcp_result_free(&r);

    call(demo.a, &r, "help", 0, NULL);
    expect_status(&r, "ok");
    bool meet = false, sampling = false;
    for (size_t i = 0; i < r.n_informs; i++) {
        meet |= !strcmp(r.informs[i].args[0], "meet");
        sampling |= !strcmp(r.informs[i].args[0], "sensor-sampling");
    }
    assert_true(meet && sampling);
    cbf_katcp_result_free(&r);

    const char *args[] = {"one", "two words", ""};
    call(demo.a, &r, "echo", 3, args);
    expect_status(&r, "ok");
    assert_string_equal(r.reply.args[1], "3");
    assert_int_equal(r.n_informs, 3);
    assert_string_equal(r.informs[0].name, "echo");
    assert_string_equal(r.informs[1].args[0], "two words");
    assert_string_equal(r.informs[2].args[0], "");
    cbf_katcp_result_free(&r);

    call(demo.a, &r, "quiet", 0, NULL);
    expect_status(&r, "fail");
    assert_non_null(strstr(r.reply.args[1], "no reply"));
    cbf_katcp_result_free(&r);

    call(demo.a, &r, "no-such", 0, NULL);
    expect_status(&r, "invalid");
    cbf_katcp_result_free(&r);
}

static void noop(cbf_katcp_call *c, void *user)
{
    (void)user;
    cbf_katcp_reply(c, "ok", 0, NULL);
}

static void test_registration(void **state)
{
    (void)state;
    cbf_katcp_server *s;
    cbf_error err;
    assert_int_equal(cbf_katcp_server_open("127.0.0.1:0", NULL, &s, &err), 0);
    const cbf_katcp_request bad[] = {
        {"1abc", "", noop, NULL, 0}, {"a b", "", noop, NULL, 0}, {"watchdog", "", noop, NULL, 0},
        {"ok-name", "", NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(cbf_katcp_server_add_request(s, &bad[i], &err), CBF_EINVAL);
    const cbf_katcp_request good = {"ok-name", "?ok-name: ok", noop, NULL, 0};
    assert_int_equal(cbf_katcp_server_add_request(s, &good, &err), 0);
    assert_int_equal(cbf_katcp_server_add_request(s, &good, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "there already"));
    assert_int_equal(cbf_katcp_server_start(s, &err), 0);
    const cbf_katcp_request late = {"later", "", noop, NULL, 0};
    assert_int_equal(cbf_katcp_server_add_request(s, &late, &err), CBF_EINVAL);
    cbf_katcp_server_close(s);
    assert_int_equal(cbf_katcp_server_open("127.0.0.1:x", NULL, &s, &err), CBF_ECONFIG);
}

/* ---- slow requests ---- */

typedef struct caller {
    const char *name, *arg;
    cbf_katcp_result r;
    pthread_t t;
} caller;

static void *caller_main(void *arg)
{
    caller *c = arg;
    const char *a[] = {c->arg};
    call(demo.a, &c->r, c->name, c->arg ? 1 : 0, a);
    return NULL;
}

static void test_slow_at_once(void **state)
{
    (void)state;
    caller c[2] = {{.name = "meet", .arg = "2"}, {.name = "meet", .arg = "2"}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&c[i].t, NULL, caller_main, &c[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(c[i].t, NULL);
        expect_status(&c[i].r, "ok");   /* fail: "only 1 of 2 met", the two ran one after the other */
        cbf_katcp_result_free(&c[i].r);
    }
}

static void test_slow_holds_only_its_client(void **state)
{
    (void)state;
    pthread_mutex_lock(&demo.mu);
    demo.released = false;
    pthread_mutex_unlock(&demo.mu);
    /* One client asks ?hold then ?watchdog: its replies come in that order,
     * while another client is answered meanwhile. */
    raw w;
    raw_open(&w, demo.a);
    raw_send(&w, "?hold[1]\n?watchdog[2]\n");
    cbf_katcp_result r;
    call(demo.a, &r, "watchdog", 0, NULL);
    expect_status(&r, "ok");
    cbf_katcp_result_free(&r);
    call(demo.a, &r, "release", 0, NULL);
    cbf_katcp_result_free(&r);
    char line[512];
    raw_until(&w, "!", line, sizeof line);
    assert_string_equal(line, "!hold[1] ok");
    raw_until(&w, "!", line, sizeof line);
    assert_string_equal(line, "!watchdog[2] ok");
    close(w.fd);
}

static void test_client_timeout(void **state)
{
    (void)state;
    pthread_mutex_lock(&demo.mu);
    demo.released = false;
    pthread_mutex_unlock(&demo.mu);
    cbf_katcp_client *cl;
    cbf_katcp_result r;
    cbf_error err;
    assert_int_equal(cbf_katcp_client_connect(cbf_katcp_server_address(demo.a), WAIT_S, &cl, &err), 0);
    assert_int_equal(cbf_katcp_client_call(cl, "hold", 0, NULL, 0.2, &r, &err), CBF_EIO);
    assert_non_null(strstr(err.msg, "timed out"));
    call(demo.a, &r, "release", 0, NULL);
    cbf_katcp_result_free(&r);
    /* The late !hold arrives first on this connection: passed over. */
    assert_int_equal(cbf_katcp_client_call(cl, "watchdog", 0, NULL, WAIT_S, &r, &err), 0);
    expect_status(&r, "ok");
    assert_string_equal(r.reply.name, "watchdog");
    cbf_katcp_result_free(&r);
    cbf_katcp_client_close(cl);
}

/* ---- sensors ---- */

static void test_table(void **state)
{
    (void)state;
    cbf_error err;
    const struct {
        const char *name, *value;
    } bad[] = {{"demo.counter", "1.5"}, {"demo.level", "x"}, {"demo.flag", "2"}, {"demo.state", "asleep"},
               {"demo.when", "inf"}, {"demo.nothing", "1"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cbf_katcp_sensor_set(demo.a, bad[i].name, CBF_KATCP_NOMINAL, bad[i].value, 0, &err),
                         CBF_EINVAL);
        assert_non_null(strstr(err.msg, bad[i].name));
    }
    assert_int_equal(cbf_katcp_sensor_set(demo.a, "demo.state", CBF_KATCP_WARN, "busy", 1700000000.25, &err), 0);
    assert_int_equal(cbf_katcp_sensor_set(demo.a, "demo.where", CBF_KATCP_NOMINAL, "10.0.0.1:7147", 0, &err), 0);
    const char *name[] = {"demo.state"};
    cbf_katcp_result r;
    call(demo.a, &r, "sensor-value", 1, name);
    expect_status(&r, "ok");
    assert_int_equal(r.n_informs, 1);
    assert_string_equal(r.informs[0].args[0], "1700000000.250000");
    assert_string_equal(r.informs[0].args[3], "warn");
    assert_string_equal(r.informs[0].args[4], "busy");
    cbf_katcp_result_free(&r);
    call(demo.a, &r, "sensor-list", 1, name);
    assert_int_equal(r.n_informs, 1);
    assert_int_equal(r.informs[0].n_args, 6);
    assert_string_equal(r.informs[0].args[3], "discrete");
    assert_string_equal(r.informs[0].args[5], "busy");
    cbf_katcp_result_free(&r);
    const char *re[] = {"/^demo\\.w/"};
    call(demo.a, &r, "sensor-list", 1, re);
    assert_int_equal(r.n_informs, 2);   /* demo.where, demo.when */
    cbf_katcp_result_free(&r);

    const cbf_katcp_sensor_info extra = {"demo.extra.a", "", "", CBF_KATCP_STRING, NULL, 0};
    assert_int_equal(cbf_katcp_sensor_add(demo.a, &extra, &err), 0);
    assert_int_equal(cbf_katcp_sensor_add(demo.a, &extra, &err), CBF_EINVAL);
    assert_int_equal(cbf_katcp_sensor_remove_prefix(demo.a, "demo.extra."), 1);
    assert_int_equal(cbf_katcp_sensor_remove(demo.a, "demo.extra.a"), 0);
    const char *gone[] = {"demo.extra.a"};
    call(demo.a, &r, "sensor-value", 1, gone);
    expect_status(&r, "fail");
    cbf_katcp_result_free(&r);
}

static void test_event_sampling(void **state)
{
    (void)state;
    enum { N = 500 };
    raw w;
    raw_open(&w, demo.a);
    char line[512];
    raw_send(&w, "?sensor-sampling[1] demo.counter event\n");
    raw_until(&w, "!sensor-sampling[1]", line, sizeof line);
    assert_string_equal(line, "!sensor-sampling[1] ok demo.counter event");
    raw_until(&w, "#sensor-status", line, sizeof line);   /* the value now */
    /* Another thread sets it N times (?count); each change arrives, in order. */
    char req[64];
    snprintf(req, sizeof req, "?count[2] %d\n", N);
    raw_send(&w, req);
    for (int want = 1; want <= N;) {
        raw_line(&w, line, sizeof line);
        if (strncmp(line, "#sensor-status", 14))
            continue;
        const char *v = strrchr(line, ' ') + 1;
        if (atoi(v) != want)
            fail_msg("#sensor-status %s, expected %d (%s)", v, want, line);
        want++;
    }
    /* The set of sensors changes: told. */
    raw_send(&w, "?add[3] demo.added\n");
    raw_until(&w, "#interface-changed", line, sizeof line);
    assert_string_equal(line, "#interface-changed sensor-list");
    assert_int_equal(cbf_katcp_sensor_remove(demo.a, "demo.added"), 1);
    close(w.fd);
}

static void test_snapshot_period(void **state)
{
    (void)state;
    raw w;
    raw_open(&w, demo.b);
    char line[512];
    raw_send(&w, "?sensor-sampling b.reads period 0.05\n");
    raw_until(&w, "!sensor-sampling", line, sizeof line);
    assert_string_equal(line, "!sensor-sampling ok b.reads period 0.05");
    long last = 0;
    for (int i = 0; i < 4; i++) {
        raw_until(&w, "#sensor-status", line, sizeof line);
        long v = atol(strrchr(line, ' ') + 1);
        assert_true(v > last);   /* read anew each time */
        last = v;
    }
    close(w.fd);
}

/* ---- one server asking the other ---- */

static void test_fan_out(void **state)
{
    (void)state;
    cbf_katcp_result r;
    const char *args[] = {"echo", "x", "y"};
    call(demo.b, &r, "ask", 3, args);
    expect_status(&r, "ok");
    assert_string_equal(r.reply.args[1], "2");
    assert_int_equal(r.n_informs, 2);
    assert_string_equal(r.informs[0].name, "ask");
    assert_string_equal(r.informs[1].args[0], "y");
    cbf_katcp_result_free(&r);
    const char *no[] = {"no-such"};
    call(demo.b, &r, "ask", 1, no);
    expect_status(&r, "invalid");
    cbf_katcp_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_registration),
        cmocka_unit_test(test_slow_at_once),
        cmocka_unit_test(test_slow_holds_only_its_client),
        cmocka_unit_test(test_client_timeout),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_event_sampling),
        cmocka_unit_test(test_snapshot_period),
        cmocka_unit_test(test_fan_out),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
