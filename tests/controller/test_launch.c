/* test_launch.c: a product's engines launched and supervised for real
 * (tools/controller/supervise.c, launch.c, exec.c) with the build's
 * cbf-run, on this machine's CPU and loopback: the suite-style 4-antenna
 * wideband product (data/suite-4ant-wide-beams.json, clock_ratio 0.001)
 * comes up engine by engine; one F-engine killed with SIGKILL is restarted
 * and the callback reports exactly its antenna's inputs down, then up;
 * deconfigure leaves no process. Products whose engines cannot start (no
 * such cbf-run; an engine's katcp port taken) are refused naming the
 * engine, its host and the reason, leaving no process. Then the exact
 * commands of the slurm and systemd launchers, through a stand-in exec
 * (neither runs here). Every wait is on a condition with a deadline.
 *
 *   test_launch DATA_DIR CBF_RUN      (plugins from $CBF_PLUGIN_PATH) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl_test.h"
#include "plan.h"
#include "run.h"
#include "supervise.h"

#define WIDE "suite-4ant-wide-beams.json"
#define DEADLINE_S 120.0    /* for anything a loaded 2-core machine does */

static const char *data_dir, *cbf_run;

/* ---- the callback's record ---- */

#define MAX_EVENTS 256
typedef struct event {
    char engine[32];
    int index;
    cbf_engine_state state;
    char reason[512];
    int inputs[4], n_inputs;
} event;

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    event ev[MAX_EVENTS];
    int n;
} recorder;

static void record(void *ctx, const cbf_engine_event *e)
{
    recorder *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_EVENTS) {
        event *v = &r->ev[r->n++];
        snprintf(v->engine, sizeof v->engine, "%s", e->engine->name);
        v->index = e->index;
        v->state = e->state;
        snprintf(v->reason, sizeof v->reason, "%s", e->reason);
        v->n_inputs = e->engine->n_inputs < 4 ? e->engine->n_inputs : 4;
        memcpy(v->inputs, e->engine->inputs, sizeof v->inputs[0] * (size_t)v->n_inputs);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits until engine `index` has reported `state` at or after event
 * `from`; the event's number, or fails at the deadline. */
static int wait_for(recorder *r, int from, int index, cbf_engine_state state)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)DEADLINE_S;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        for (int i = from; i < r->n; i++)
            if (r->ev[i].index == index && r->ev[i].state == state) {
                pthread_mutex_unlock(&r->mu);
                return i;
            }
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&r->mu);
    fail_msg("engine %d never reported %s within %g s", index, cbf_engine_state_name(state), DEADLINE_S);
    return -1;
}

/* ---- fixtures ---- */

typedef struct product {
    char *dir;
    cbf_controller_config *c;
    cbf_resources *res;
    cbf_product *p;
    cbf_product_plan *plan;
} product;

/* The configuration the tests share, with more controller keys and more
 * sections (NULL: none). */
static void configure(product *x, const char *controller, const char *sections)
{
    x->dir = ct_tmpdir("launch");
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "controller:\n  cbf_run: %s\n  state_dir: state\n  start_timeout: %g\n  stop_timeout: 30\n%s"
             "ranges:\n  multicast: 239.51.0.0/24\n  udp_ports: 9100-9199\n  engine_katcp: 9700-9799\n"
             "  product_katcp: 9800-9809\n"
             "restart:\n  initial: 0.05\n  max: 1\n  reset_after: 60\n%s",
             cbf_run, DEADLINE_S, controller ? controller : "", sections ? sections : "");
    cbf_error err = {0};
    if (!(x->c = ct_config(x->dir, yaml, &err)))
        fail_msg("configuration refused: %s", err.msg);
    assert_int_equal(cbf_resources_create(x->c, &x->res, &err), 0);
}

static void plan(product *x, const char *controller, const char *sections)
{
    configure(x, controller, sections);
    cbf_error err = {0};
    if (!(x->p = ct_product(data_dir, WIDE, NULL, &err)))
        fail_msg("%s", err.msg);
    if (cbf_product_plan_make(x->p, "p", x->c, x->res, &x->plan, &err) || cbf_product_plan_write(x->plan, &err))
        fail_msg("%s", err.msg);
}

static void unplan(product *x)
{
    cbf_product_plan_free(x->plan);
    cbf_product_free(x->p);
    for (int k = 0; k < CBF_RES_KINDS; k++)   /* everything given back */
        assert_int_equal(cbf_resources_used(x->res, (cbf_res_kind)k), 0);
    cbf_resources_free(x->res);
    cbf_controller_config_free(x->c);
    ct_rm_rf(x->dir);
    free(x->dir);
}

static int alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* No child of this process is left, running or unreaped. */
static void no_children(void)
{
    errno = 0;
    pid_t r = waitpid(-1, NULL, WNOHANG);
    if (r != -1 || errno != ECHILD)
        fail_msg("a child process remains (waitpid: %d, %s)", (int)r, strerror(errno));
}

static int find_engine(const cbf_product_plan *pl, const char *name)
{
    for (int i = 0; i < pl->n_engines; i++)
        if (!strcmp(pl->engines[i].name, name))
            return i;
    fail_msg("no engine %s", name);
    return -1;
}

/* ---- a product run for real ---- */

static void test_launch_kill_restart(void **state)
{
    (void)state;
    product x = {0};
    configure(&x, NULL, NULL);
    recorder r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cbf_error err = {0};
    size_t len;
    char *json = ct_slurp(data_dir, WIDE, &len);
    cbf_running_product *rp = NULL;   /* what ?product-configure makes */
    if (cbf_product_configure("p", json, len, CT_NOW, x.c, x.res, NULL, record, &r, &rp, &err))
        fail_msg("product refused: %s", err.msg);
    x.plan = rp->plan;
    char *saved = ct_slurp(x.plan->dir, "product.json", NULL);   /* beside its pipelines and logs */
    assert_string_equal(saved, json);
    free(saved);
    free(json);
    cbf_supervisor *s = rp->supervisor;
    assert_int_equal(cbf_resources_used(x.res, CBF_RES_PRODUCT_KATCP), 1);
    assert_int_equal(rp->katcp_port, 9800);
    int n = x.plan->n_engines;
    pid_t pids[64];
    for (int i = 0; i < n; i++) {   /* every engine up, its katcp port open */
        assert_int_equal(cbf_supervisor_state(s, i, NULL), CBF_ENGINE_UP);
        assert_true(cbf_launch_port_open("127.0.0.1", x.plan->engines[i].katcp_port, 1000));
        pids[i] = cbf_supervisor_pid(s, i);
        assert_true(alive(pids[i]));
    }
    /* stages in order: no engine of stage k up before every engine of stage k - 1 */
    pthread_mutex_lock(&r.mu);
    int launch_events = r.n, highest_up = 0;
    for (int i = 0; i < launch_events; i++) {
        const cbf_plan_engine *e = &x.plan->engines[r.ev[i].index];
        if (r.ev[i].state == CBF_ENGINE_STARTING && e->stage > 0)
            for (int k = 0; k < n; k++)
                if (x.plan->engines[k].stage == e->stage - 1) {
                    int up = 0;
                    for (int j = 0; j < i; j++)
                        up |= r.ev[j].index == k && r.ev[j].state == CBF_ENGINE_UP;
                    assert_true(up);
                }
        highest_up += r.ev[i].state == CBF_ENGINE_UP;
    }
    pthread_mutex_unlock(&r.mu);
    assert_int_equal(highest_up, n);
    /* an F-engine killed outright: it sends nothing more, not even a stream stop */
    int f1 = find_engine(x.plan, "feng1");
    assert_int_equal(kill(pids[f1], SIGKILL), 0);
    int down = wait_for(&r, launch_events, f1, CBF_ENGINE_DOWN);
    int up = wait_for(&r, down, f1, CBF_ENGINE_UP);
    pthread_mutex_lock(&r.mu);
    int seen = r.n;
    event ev[8];
    int n_ev = up - launch_events + 1;
    assert_true(n_ev <= 8);
    memcpy(ev, &r.ev[launch_events], sizeof ev[0] * (size_t)n_ev);
    pthread_mutex_unlock(&r.mu);
    /* exactly that engine, down, restarting, up, carrying exactly its antenna's inputs */
    assert_int_equal(n_ev, 3);
    static const cbf_engine_state want[] = {CBF_ENGINE_DOWN, CBF_ENGINE_RESTARTING, CBF_ENGINE_UP};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(ev[i].engine, "feng1");
        assert_int_equal(ev[i].state, want[i]);
        assert_int_equal(ev[i].n_inputs, 2);
        assert_int_equal(ev[i].inputs[0], 2);
        assert_int_equal(ev[i].inputs[1], 3);
    }
    if (!strstr(ev[0].reason, "killed by signal 9"))
        fail_msg("down, but the reason is: %s", ev[0].reason);
    if (!strstr(ev[1].reason, "restart 1, after 0.05 s"))
        fail_msg("restarting, but: %s", ev[1].reason);
    pid_t again = cbf_supervisor_pid(s, f1);
    assert_true(alive(again));
    assert_true(again != pids[f1]);
    int restarts;
    assert_int_equal(cbf_supervisor_state(s, f1, &restarts), CBF_ENGINE_UP);
    assert_int_equal(restarts, 1);
    for (int i = 0; i < n; i++)   /* the others untouched */
        if (i != f1) {
            assert_int_equal(cbf_supervisor_state(s, i, &restarts), CBF_ENGINE_UP);
            assert_int_equal(restarts, 0);
            assert_int_equal(cbf_supervisor_pid(s, i), pids[i]);
        }
    /* deconfigure: nothing left */
    pids[f1] = again;
    assert_int_equal(cbf_product_deconfigure(rp, &err), 0);
    for (int i = 0; i < n; i++)
        assert_false(alive(pids[i]));
    no_children();
    pthread_mutex_lock(&r.mu);
    int stopped = 0;
    for (int i = seen; i < r.n; i++)
        stopped += r.ev[i].state == CBF_ENGINE_STOPPED;
    pthread_mutex_unlock(&r.mu);
    assert_int_equal(stopped, n);
    x.plan = NULL;   /* freed by the deconfigure, which gave back every group and port */
    unplan(&x);
}

/* ---- products refused ---- */

static void test_refused_no_cbf_run(void **state)
{
    (void)state;
    product x = {0};
    const char *real = cbf_run;
    cbf_run = "/nonexistent/cbf-run";
    plan(&x, NULL, NULL);
    cbf_run = real;
    cbf_supervisor *s = NULL;
    cbf_error err = {0};
    assert_int_equal(cbf_supervisor_start(x.plan, x.c, NULL, NULL, NULL, &s, &err), CBF_EIO);
    assert_null(s);
    const char *want = "engine xeng0 (xb.baseline-correlation-products.0) on host localhost: cannot start: "
                       "cannot run '/nonexistent/cbf-run'";
    if (strncmp(err.msg, want, strlen(want)) || !strstr(err.msg, "No such file or directory"))
        fail_msg("refused as: %s", err.msg);
    no_children();
    unplan(&x);
}

/* A socket bound to the port but not listening: the engine's bind fails
 * (neither has SO_REUSEADDR set for a listening one), and nothing answers
 * in its place. */
static int squat(int port, int listening)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_true(fd >= 0);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || (listening && listen(fd, 4)))
        fail_msg("cannot take port %d: %s", port, strerror(errno));
    return fd;
}

static void test_refused_port_taken(void **state)
{
    (void)state;
    product x = {0};
    plan(&x, NULL, NULL);
    int f2 = find_engine(x.plan, "feng2");
    int fd = squat(x.plan->engines[f2].katcp_port, 0);
    recorder r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cbf_supervisor *s = NULL;
    cbf_error err = {0};
    assert_int_equal(cbf_supervisor_start(x.plan, x.c, NULL, record, &r, &s, &err), CBF_EIO);
    close(fd);
    char want[256];
    snprintf(want, sizeof want, "engine feng2 (f.antenna-channelised-voltage.2) on host localhost: exited with "
             "status 1 before its katcp port 127.0.0.1:%d opened; its log ends: ", x.plan->engines[f2].katcp_port);
    if (strncmp(err.msg, want, strlen(want)) || !strstr(err.msg, "Address already in use"))
        fail_msg("refused as: %s", err.msg);
    no_children();   /* the X-engines and the other F-engines started before it are stopped */
    /* the X-engines and the F-engines reported stopped; no dsim ever started */
    pthread_mutex_lock(&r.mu);
    int stopped = 0, later = 0;
    for (int i = 0; i < r.n; i++) {
        stopped += r.ev[i].state == CBF_ENGINE_STOPPED && x.plan->engines[r.ev[i].index].stage <= 1;
        later += x.plan->engines[r.ev[i].index].stage == 2;
    }
    pthread_mutex_unlock(&r.mu);
    assert_int_equal(stopped, 8);
    assert_int_equal(later, 0);
    /* something already answering there is found before anything starts */
    fd = squat(x.plan->engines[f2].katcp_port, 1);
    assert_int_equal(cbf_supervisor_start(x.plan, x.c, NULL, NULL, NULL, &s, &err), CBF_EIO);
    close(fd);
    if (!strstr(err.msg, "engine feng2 (f.antenna-channelised-voltage.2) on host localhost: its katcp port") ||
        !strstr(err.msg, "is taken"))
        fail_msg("refused as: %s", err.msg);
    no_children();
    unplan(&x);
}

/* ---- the slurm and systemd commands, through a stand-in exec ---- */

typedef struct fake {
    char calls[64][2048];
    int n;
    const char *show;    /* what `systemctl show` prints */
} fake;

static void note(fake *f, char *const argv[])
{
    cbf_argv a;
    cbf_argv_init(&a);
    for (int i = 0; argv[i]; i++)
        cbf_argv_add(&a, "%s", argv[i]);
    if (f->n < 64)
        cbf_argv_text(&a, f->calls[f->n++], sizeof f->calls[0]);
}

static int fake_run(void *ctx, char *const argv[], char *out, size_t n, cbf_error *err)
{
    (void)err;
    fake *f = ctx;
    note(f, argv);
    snprintf(out, n, "%s", argv[1] && strstr(f->calls[f->n - 1], " show ") ? f->show : "");
    return 0;
}

/* Notes the command and runs a stand-in for it that lives until signalled. */
static pid_t fake_spawn(void *ctx, char *const argv[], const char *dir, const char *log, int truncate,
                        cbf_error *err)
{
    note(ctx, argv);
    char *const sleeper[] = {"sleep", "600", NULL};
    return cbf_launch_exec_real.spawn(NULL, sleeper, dir, log, truncate, err);
}

static cbf_plan_engine engine_at(const char *dir, const char *name, const char *host, const char *address, int gpu)
{
    cbf_plan_engine e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.host, sizeof e.host, "%s", host);
    snprintf(e.address, sizeof e.address, "%s", address);
    snprintf(e.pipeline, sizeof e.pipeline, "%s/%s.yaml", dir, name);
    snprintf(e.log, sizeof e.log, "%s/%s.log", dir, name);
    e.gpu = gpu;
    ct_write(dir, strrchr(e.pipeline, '/') + 1, "engine: {name: test}\n");
    return e;
}

static void test_slurm_commands(void **state)
{
    (void)state;
    char *dir = ct_tmpdir("slurm");
    cbf_error err = {0};
    cbf_controller_config *c = ct_config(dir, "controller:\n  launcher: slurm\n  cbf_run: /opt/cbf/bin/cbf-run\n"
                                              "  cbf_run_args: --log-level info\n  stop_timeout: 30\n"
                                              "slurm:\n  args: --partition=cbf --account=radio\n", &err);
    if (!c)
        fail_msg("%s", err.msg);
    fake f = {.n = 0};
    cbf_launch_exec ex = {fake_run, fake_spawn, &f};
    cbf_launcher L;
    cbf_launcher_init(&L, c, "p", &ex);
    cbf_plan_engine e[2] = {engine_at(dir, "feng0", "gpu3", "10.1.0.3", 0),
                            engine_at(dir, "digitiser0", "cpu1", "10.1.0.9", -1)};
    cbf_launch_handle h[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(cbf_launch_start(&L, &e[i], 1, &h[i], &err), 0);
    char want[2][2048];
    snprintf(want[0], sizeof want[0], "srun --job-name=p-feng0 --nodes=1 --ntasks=1 --nodelist=gpu3 --chdir=%s "
             "--gpus-per-task=1 --partition=cbf --account=radio /opt/cbf/bin/cbf-run %s/feng0.yaml --log-level info",
             dir, dir);
    snprintf(want[1], sizeof want[1], "srun --job-name=p-digitiser0 --nodes=1 --ntasks=1 --nodelist=cpu1 "
             "--chdir=%s --gres=none --partition=cbf --account=radio /opt/cbf/bin/cbf-run %s/digitiser0.yaml "
             "--log-level info", dir, dir);
    assert_int_equal(f.n, 2);
    assert_string_equal(f.calls[0], want[0]);
    assert_string_equal(f.calls[1], want[1]);
    /* srun is this process's child: SIGTERM to its group stops it (and srun passes it on) */
    pid_t pids[2] = {h[0].pid, h[1].pid};
    char why[256];
    assert_int_equal(cbf_launch_ended(&L, &e[0], &h[0], why, sizeof why), 0);
    assert_int_equal(cbf_launch_stop(&L, e, h, 2, &err), 0);
    assert_false(alive(pids[0]) || alive(pids[1]));
    no_children();
    cbf_controller_config_free(c);
    ct_rm_rf(dir);
    free(dir);
}

/* A host that is a network namespace (hosts.NAME.netns): the local
 * launcher runs its engines there through ip netns exec, and its
 * addresses, the namespace's, are not checked against this machine's. */
static void test_netns_commands(void **state)
{
    (void)state;
    char *dir = ct_tmpdir("netns");
    cbf_error err = {0};
    cbf_controller_config *c = ct_config(dir, "controller:\n  cbf_run: /opt/cbf/bin/cbf-run\nhosts:\n"
                                              "  f0: {roles: feng, interfaces: 10.201.0.3, nic_gbps: 10, "
                                              "control: 10.201.0.3, netns: cbfnet1-f0}\n", &err);
    if (!c)
        fail_msg("%s", err.msg);
    assert_string_equal(c->hosts[0].netns, "cbfnet1-f0");
    fake f = {.n = 0};
    cbf_launch_exec ex = {fake_run, fake_spawn, &f};
    cbf_launcher L;
    cbf_launcher_init(&L, c, "p", &ex);
    cbf_plan_engine e = engine_at(dir, "feng0", "f0", "10.201.0.3", -1);
    snprintf(e.netns, sizeof e.netns, "cbfnet1-f0");
    cbf_launch_handle h;
    assert_int_equal(cbf_launch_start(&L, &e, 1, &h, &err), 0);
    char want[2048];
    snprintf(want, sizeof want, "ip netns exec cbfnet1-f0 /opt/cbf/bin/cbf-run %s/feng0.yaml", dir);
    assert_int_equal(f.n, 1);
    assert_string_equal(f.calls[0], want);
    assert_int_equal(cbf_launch_stop(&L, &e, &h, 1, &err), 0);
    no_children();
    cbf_controller_config_free(c);
    /* without the namespace the same host is refused: not this machine's address */
    assert_null(ct_config(dir, "hosts:\n  f0: {roles: feng, interfaces: 10.201.0.3, nic_gbps: 10, "
                               "control: 10.201.0.3}\n", &err));
    if (!strstr(err.msg, "10.201.0.3 is not an address of this machine"))
        fail_msg("%s", err.msg);
    assert_null(ct_config(dir, "hosts:\n  f0: {roles: feng, interfaces: 10.201.0.3, nic_gbps: 10, "
                               "netns: \"a b\"}\n", &err));
    if (!strstr(err.msg, "netns: 'a b' is not a namespace's name"))
        fail_msg("%s", err.msg);
    ct_rm_rf(dir);
    free(dir);
}

static void test_systemd_commands(void **state)
{
    (void)state;
    char *dir = ct_tmpdir("systemd");
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "controller:\n  launcher: systemd\nsystemd:\n  confdir: %s/etc\n", dir);
    char etc[1100];
    snprintf(etc, sizeof etc, "%s/etc", dir);
    assert_int_equal(mkdir(etc, 0777), 0);
    cbf_error err = {0};
    cbf_controller_config *c = ct_config(dir, yaml, &err);
    if (!c)
        fail_msg("%s", err.msg);
    fake f = {.show = "ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=1\n"};
    cbf_launch_exec ex = {fake_run, fake_spawn, &f};
    cbf_launcher L;
    cbf_launcher_init(&L, c, "p", &ex);
    /* one engine on this machine, one on another (TEST-NET-1: never this one) */
    cbf_plan_engine e[2] = {engine_at(dir, "feng0", "localhost", "127.0.0.1", 0),
                            engine_at(dir, "xeng0", "x1", "192.0.2.7", 0)};
    cbf_launch_handle h[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(cbf_launch_start(&L, &e[i], 1, &h[i], &err), 0);
    char *copied = ct_slurp(etc, "p-feng0.yaml", NULL);   /* the unit's CONFDIR/INSTANCE.yaml */
    assert_string_equal(copied, "engine: {name: test}\n");
    free(copied);
    char want[8][2048];
    snprintf(want[0], sizeof want[0], "systemctl start cbf@p-feng0");
    snprintf(want[1], sizeof want[1], "scp %s/xeng0.yaml x1:%s/p-xeng0.yaml", dir, etc);
    snprintf(want[2], sizeof want[2], "systemctl -H x1 start cbf@p-xeng0");
    snprintf(want[3], sizeof want[3], "systemctl show --property=ActiveState,SubState,Result,ExecMainStatus "
             "cbf@p-feng0");
    snprintf(want[4], sizeof want[4], "systemctl stop cbf@p-feng0");
    snprintf(want[5], sizeof want[5], "systemctl -H x1 stop cbf@p-xeng0");
    char why[512];
    assert_int_equal(cbf_launch_ended(&L, &e[0], &h[0], why, sizeof why), 1);
    assert_string_equal(why, "unit cbf@p-feng0 is failed (failed): result exit-code, exit status 1 "
                             "(journalctl -u cbf@p-feng0)");
    assert_int_equal(h[0].status, 1);
    assert_int_equal(cbf_launch_stop(&L, e, h, 2, &err), 0);
    assert_int_equal(f.n, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(f.calls[i], want[i]);
    struct stat st;
    assert_int_equal(stat(strcat(etc, "/p-feng0.yaml"), &st), -1);   /* removed from the confdir */
    cbf_controller_config_free(c);
    ct_rm_rf(dir);
    free(dir);
}

/* ---- a product supervised through systemd, with stand-in units ---- */

/* A unit the stand-in systemctl starts listens on its engine's katcp port,
 * as the engine would; a failed one stops listening and shows failed. */
typedef struct units {
    pthread_mutex_t mu;
    fake f;
    const cbf_product_plan *plan;
    int fd[64], failed[64];
} units;

static int unit_engine(const units *u, const char *arg)
{
    for (int i = 0; i < u->plan->n_engines; i++) {
        char unit[96];
        snprintf(unit, sizeof unit, "cbf@p-%s", u->plan->engines[i].name);
        if (!strcmp(arg, unit))
            return i;
    }
    return -1;
}

static int units_run(void *ctx, char *const argv[], char *out, size_t n, cbf_error *err)
{
    (void)err;
    units *u = ctx;
    pthread_mutex_lock(&u->mu);
    const char *verb = argv[1];
    if (strcmp(verb, "show"))   /* the state reads are many: the rest are noted */
        note(&u->f, argv);
    out[0] = '\0';
    for (int a = 2; argv[a]; a++) {
        int i = unit_engine(u, argv[a]);
        if (i < 0)
            continue;
        if (!strcmp(verb, "start") && u->fd[i] < 0) {
            u->fd[i] = squat(u->plan->engines[i].katcp_port, 1);
            u->failed[i] = 0;
        } else if (!strcmp(verb, "stop") && u->fd[i] >= 0) {
            close(u->fd[i]);
            u->fd[i] = -1;
        } else if (!strcmp(verb, "show")) {
            snprintf(out, n, "%s", u->failed[i] ? "ActiveState=failed\nSubState=failed\nResult=exit-code\n"
                                                  "ExecMainStatus=1\n"
                                                : u->fd[i] >= 0 ? "ActiveState=active\nSubState=running\n"
                                                                : "ActiveState=inactive\nSubState=dead\n");
        }
    }
    pthread_mutex_unlock(&u->mu);
    return 0;
}

static void test_systemd_supervised(void **state)
{
    (void)state;
    product x = {0};
    char *dir = ct_tmpdir("units"), sections[2048];   /* the units' confdir */
    snprintf(sections, sizeof sections, "systemd:\n  confdir: %s\n  poll: 0.05\n", dir);
    plan(&x, "  launcher: systemd\n", sections);
    cbf_error err = {0};
    units u = {.mu = PTHREAD_MUTEX_INITIALIZER, .plan = x.plan};
    for (int i = 0; i < 64; i++)
        u.fd[i] = -1;
    cbf_launch_exec ex = {units_run, fake_spawn, &u};
    recorder r = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    cbf_supervisor *s = NULL;
    if (cbf_supervisor_start(x.plan, x.c, &ex, record, &r, &s, &err))
        fail_msg("refused: %s", err.msg);
    pthread_mutex_lock(&r.mu);
    int launched = r.n;
    pthread_mutex_unlock(&r.mu);
    int f1 = find_engine(x.plan, "feng1");
    char copied[1200];
    snprintf(copied, sizeof copied, "%s/p-feng1.yaml", dir);
    struct stat st;
    assert_int_equal(stat(copied, &st), 0);
    /* the unit fails: its port closes, systemctl show says so */
    pthread_mutex_lock(&u.mu);
    close(u.fd[f1]);
    u.fd[f1] = -1;
    u.failed[f1] = 1;
    pthread_mutex_unlock(&u.mu);
    int down = wait_for(&r, launched, f1, CBF_ENGINE_DOWN);
    int up = wait_for(&r, down, f1, CBF_ENGINE_UP);
    pthread_mutex_lock(&r.mu);
    assert_int_equal(up - launched, 2);   /* down, restarting, up: that engine alone */
    for (int i = launched; i <= up; i++)
        assert_int_equal(r.ev[i].index, f1);
    if (!strstr(r.ev[down].reason, "unit cbf@p-feng1 is failed (failed): result exit-code, exit status 1"))
        fail_msg("down, but: %s", r.ev[down].reason);
    pthread_mutex_unlock(&r.mu);
    assert_int_equal(cbf_supervisor_stop(s, &err), 0);
    pthread_mutex_lock(&u.mu);
    int starts = 0, stops = 0;
    for (int i = 0; i < u.f.n; i++) {
        starts += !strncmp(u.f.calls[i], "systemctl start ", 16);
        if (!strncmp(u.f.calls[i], "systemctl stop ", 15)) {
            stops++;   /* one stop for the host, every unit in it */
            assert_string_equal(u.f.calls[i], "systemctl stop cbf@p-xeng0 cbf@p-xeng1 cbf@p-xeng2 cbf@p-xeng3 "
                                "cbf@p-feng0 cbf@p-feng1 cbf@p-feng2 cbf@p-feng3 cbf@p-digitiser0 "
                                "cbf@p-digitiser1 cbf@p-digitiser2 cbf@p-digitiser3");
        }
    }
    for (int i = 0; i < x.plan->n_engines; i++)
        assert_int_equal(u.fd[i], -1);
    pthread_mutex_unlock(&u.mu);
    assert_int_equal(starts, x.plan->n_engines + 1);   /* each once, and the failed one again */
    assert_int_equal(stops, 1);
    assert_int_equal(stat(copied, &st), -1);   /* the copies gone from the confdir */
    unplan(&x);
    ct_rm_rf(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_launch DATA_DIR CBF_RUN\n");
        return 2;
    }
    data_dir = argv[1];
    static char run_path[4096];   /* the controller takes a relative one from its configuration's folder */
    cbf_run = realpath(argv[2], run_path) ? run_path : argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_commands),
        cmocka_unit_test(test_netns_commands),
        cmocka_unit_test(test_systemd_commands),
        cmocka_unit_test(test_systemd_supervised),
        cmocka_unit_test(test_refused_no_cbf_run),
        cmocka_unit_test(test_refused_port_taken),
        cmocka_unit_test(test_launch_kill_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
