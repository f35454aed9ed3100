/* cbf-ctl: command-line client of a running engine's control plane
 * (docs/control.md). One request per call, over ZeroMQ REQ, as JSON.
 *
 *   cbf-ctl [-e ENDPOINT] [-t SECONDS] [--json] COMMAND [ARGS]
 *
 *   requests                          what the engine accepts, with arguments
 *   sensors [--watch] [--count N] [-s ENDPOINT]
 *                                     sensors now, or each published message
 *   log-level [LEVEL]                 read or set the log level
 *   shutdown                          drain the pipeline; cbf-run exits 0
 *   gain [--node N] [--pol P] [--at TS | --at-unix T] [VALUE...|default]
 *                                     one gain (re [im]) for all channels, or
 *                                     one per channel (re... or re im pairs);
 *                                     default: the YAML's; none: read them
 *                                     (in force, or at TS)
 *   delays [--node N] [--at TS | --at-unix T] [--pol P] DELAY RATE PHASE PHASE_RATE
 *                                     delay model: s, s/s, rad, rad/s
 *   gain|delays --cancel [--node N] [--at TS]
 *                                     drop the pending changes (from TS on)
 * --at TS is an ADC timestamp; --at-unix T UNIX seconds, which the engine
 * converts through its sync_time (sent as a string: every digit counts).
 *   capture start|stop [--node N]     start or stop writing/sending
 *   REQUEST [--node N] [KEY=VALUE...] any other request a plugin declares;
 *                                     VALUE is read as JSON, else as a string
 *   raw TEXT                          send TEXT as it is (trying the checks)
 *
 * ENDPOINT: $CBF_CTL_ENDPOINT, else tcp://127.0.0.1:5555; a bare port number
 * means that port on 127.0.0.1 (as in the engine YAML).
 * Exit status: 0 done, 1 the engine refused the request (its reason is
 * printed), 2 usage error, 3 no answer (nothing listening, or timeout). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "cbf/control.h"

#define DEFAULT_ENDPOINT "tcp://127.0.0.1:5555"

typedef struct ctl {
    char endpoint[256];
    double timeout;
    int raw_json;
    void *zctx;
} ctl;

static volatile sig_atomic_t interrupted;
static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage_to(FILE *f)
{
    fprintf(f,
            "usage: cbf-ctl [-e ENDPOINT] [-t SECONDS] [--json] COMMAND [ARGS]\n"
            "  requests                           list what the engine accepts\n"
            "  sensors [--watch] [--count N] [-s ENDPOINT]\n"
            "  log-level [error|warn|info|debug|trace]\n"
            "  shutdown                           drain and exit 0\n"
            "  gain [--node N] [--pol P] [--at TS|--at-unix T] [VALUE...|default]\n"
            "       (no value: read the gains)\n"
            "  gain|delays --cancel [--node N] [--at TS]  drop pending changes (from TS on)\n"
            "  delays [--node N] [--pol P] [--at TS|--at-unix T]\n"
            "         DELAY_S RATE PHASE_RAD PHASE_RATE_RAD_S\n"
            "  --at TS: ADC timestamp; --at-unix T: UNIX seconds (through the engine's\n"
            "  sync_time)\n"
            "  capture start|stop [--node N]\n"
            "  REQUEST [--node N] [KEY=VALUE...]  any request a plugin declares\n"
            "  raw TEXT|-                         send TEXT as the request, unchanged\n"
            "                                     (-: read it from standard input)\n"
            "ENDPOINT: $CBF_CTL_ENDPOINT or %s;\n"
            "          a bare port means 127.0.0.1:PORT\n"
            "--version: print cbf-ctl's version and exit\n"
            "exit: 0 ok, 1 refused by the engine, 2 usage, 3 no answer\n",
            DEFAULT_ENDPOINT);
}

/* A usage error: the text on standard error, exit status 2. */
static int usage(void)
{
    usage_to(stderr);
    return 2;
}

/* All of f as a string, or NULL (with a message) when it cannot be read. */
static char *ctl_read_all(FILE *f)
{
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) {
            char *more = realloc(buf, cap * 2);
            if (!more) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    if (!buf || ferror(f)) {
        fprintf(stderr, "cbf-ctl: cannot read the request from standard input\n");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

/* ZeroMQ connects in the background and retries for ever, so a refused
 * connection would look like a slow engine until the timeout: the
 * socket's monitor tells which it is. 0 once connected; 3 (with a
 * message) when the endpoint refuses or nothing comes within the timeout. */
static int ctl_connect(ctl *c, void *s)
{
    static const char mon_ep[] = "inproc://cbf-ctl-monitor";
    int rc = zmq_socket_monitor(s, mon_ep, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_CLOSED);
    void *mon = rc ? NULL : zmq_socket(c->zctx, ZMQ_PAIR);
    int ms = (int)(c->timeout * 1000), zero = 0;
    if (mon) {
        zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(mon, ZMQ_RCVTIMEO, &ms, sizeof ms);
    }
    if (mon && zmq_connect(mon, mon_ep)) {
        zmq_close(mon);
        mon = NULL;
    }
    if (zmq_connect(s, c->endpoint) != 0) {
        fprintf(stderr, "cbf-ctl: cannot connect to '%s': %s\n", c->endpoint, zmq_strerror(zmq_errno()));
        rc = 3;
    } else if (!mon) {
        rc = 0;   /* no monitor: the reply's timeout tells */
    } else {
        /* An event is two frames: 16-bit id and 32-bit value, then the endpoint. */
        zmq_msg_t ev, ep;
        zmq_msg_init(&ev);
        zmq_msg_init(&ep);
        int got = zmq_msg_recv(&ev, mon, 0);
        uint16_t id = 0;
        if (got >= 2) {
            memcpy(&id, zmq_msg_data(&ev), sizeof id);
            if (zmq_msg_more(&ev))
                zmq_msg_recv(&ep, mon, 0);
        }
        if (got < 0) {
            fprintf(stderr, "cbf-ctl: nothing answers at %s: no connection within %g s (is an engine running "
                    "with engine.control set to it? -t SECONDS waits longer)\n", c->endpoint, c->timeout);
            rc = 3;
        } else if (id != ZMQ_EVENT_CONNECTED) {
            fprintf(stderr, "cbf-ctl: nothing answers at %s: connection refused (is an engine running with "
                    "engine.control set to it?)\n", c->endpoint);
            rc = 3;
        } else {
            rc = 0;
        }
        zmq_msg_close(&ev);
        zmq_msg_close(&ep);
    }
    zmq_socket_monitor(s, NULL, 0);
    if (mon)
        zmq_close(mon);
    return rc;
}

/* Sends one request; *reply is the parsed answer. 0, or 3 with a message. */
static int call_text(ctl *c, const char *text, json_t **reply)
{
    *reply = NULL;
    void *s = zmq_socket(c->zctx, ZMQ_REQ);
    int ms = (int)(c->timeout * 1000), zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &ms, sizeof ms);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &ms, sizeof ms);
    int rc = 3;
    if (ctl_connect(c, s)) {
        /* said why */
    } else if (zmq_send(s, text, strlen(text), 0) < 0) {
        fprintf(stderr, "cbf-ctl: sending to %s: %s\n", c->endpoint, zmq_strerror(zmq_errno()));
    } else {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) {
            fprintf(stderr, "cbf-ctl: no answer from %s within %g s (is an engine running with "
                    "engine.control set to it?)\n", c->endpoint, c->timeout);
        } else {
            json_error_t je;
            *reply = json_loadb(zmq_msg_data(&m), zmq_msg_size(&m), 0, &je);
            if (!*reply || !json_is_object(*reply))
                fprintf(stderr, "cbf-ctl: the answer is not a JSON object: %s\n", je.text);
            else
                rc = 0;
        }
        zmq_msg_close(&m);
    }
    zmq_close(s);
    return rc;
}

static int call(ctl *c, json_t *req, json_t **reply)
{
    char *text = json_dumps(req, JSON_COMPACT);
    int rc = call_text(c, text, reply);
    free(text);
    return rc;
}

/* Prints a refusal (exit 1) or nothing; returns the exit code. */
static int refused(json_t *reply)
{
    if (json_is_true(json_object_get(reply, "ok")))
        return 0;
    const char *e = json_string_value(json_object_get(reply, "error"));
    fprintf(stderr, "cbf-ctl: refused: %s\n", e ? e : "(no reason given)");
    return 1;
}

static void print_json(json_t *reply)
{
    char *t = json_dumps(reply, JSON_COMPACT);
    printf("%s\n", t);
    fflush(stdout);
    free(t);
}

static void print_fields(json_t *reply)
{
    const char *key;
    json_t *v;
    json_object_foreach(reply, key, v)
    {
        if (!strcmp(key, "ok"))
            continue;
        if (json_is_real(v)) {
            printf("%s: %.9g\n", key, json_real_value(v));
            continue;
        }
        char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        printf("%s: %s\n", key, t ? t : json_string_value(v));
        free(t);
    }
}

/* A gain reply: each pol's [re, im] pairs as re+imj, in the fewest
 * digits that give back the float32 the engine holds. */
static void print_gains(json_t *reply)
{
    const char *key;
    json_t *v;
    json_object_foreach(reply, key, v)
    {
        if (strncmp(key, "pol", 3) || !json_is_array(v))
            continue;
        printf("%s:", key);
        for (size_t i = 0; i + 1 < json_array_size(v); i += 2) {
            for (int part = 0; part < 2; part++) {
                float f = (float)json_number_value(json_array_get(v, i + (size_t)part));
                char t[32];
                for (int p = 1; p <= 9; p++) {
                    snprintf(t, sizeof t, part ? "%+.*g" : "%.*g", p, (double)f);
                    if ((float)strtod(t, NULL) == f)
                        break;
                }
                printf(part ? "%sj" : " %s", t);
            }
        }
        printf("\n");
    }
    json_t *rest = json_deep_copy(reply);
    json_object_del(rest, "pol0");
    json_object_del(rest, "pol1");
    print_fields(rest);
    json_decref(rest);
}

static void print_number(json_t *v)
{
    if (json_is_integer(v))
        printf("%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        printf("%.4g", json_real_value(v));
    else if (json_is_null(v))
        printf("-");
    else
        printf("?");
}

/* A sensor message as a small table: one block per node. */
static void print_sensors(json_t *m)
{
    printf("engine %s  message %lld  elapsed %.1f s\n", json_string_value(json_object_get(m, "engine")),
           (long long)json_integer_value(json_object_get(m, "seq")),
           json_real_value(json_object_get(m, "elapsed_s")));
    const char *name;
    json_t *n;
    json_object_foreach(json_object_get(m, "nodes"), name, n)
    {
        printf("  %-12s %-10s in %lld  out %lld", name, json_string_value(json_object_get(n, "plugin")),
               (long long)json_integer_value(json_object_get(n, "buffers_in")),
               (long long)json_integer_value(json_object_get(n, "buffers_out")));
        json_t *r = json_object_get(n, "buffers_out_per_s");
        if (r) {
            printf("  (%.1f buf/s, %.1f MB/s)", json_real_value(r),
                   1e-6 * json_real_value(json_object_get(n, "bytes_out_per_s")));
        }
        printf("\n");
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(n, "queues"), k, v)
            printf("      queue %s: %lld/%lld\n", k, (long long)json_integer_value(json_object_get(v, "fill")),
                   (long long)json_integer_value(json_object_get(v, "depth")));
        json_t *status = json_object_get(n, "status");
        static const char *const kinds[] = {"counters", "gauges", "texts"};
        for (int kind = 0; kind < 3; kind++)
            json_object_foreach(json_object_get(n, kinds[kind]), k, v)
            {
                /* status only where it is not the usual nominal */
                const char *st = json_string_value(json_object_get(status, k));
                printf("      %s = ", k);
                if (json_is_string(v))
                    printf("%s", json_string_value(v));
                else
                    print_number(v);
                printf("%s%s%s\n", st && strcmp(st, "nominal") ? "  [" : "",
                       st && strcmp(st, "nominal") ? st : "", st && strcmp(st, "nominal") ? "]" : "");
            }
    }
    json_t *dev = json_object_get(m, "device-status");
    if (dev)
        printf("device-status %s (%s)\n", json_string_value(json_object_get(dev, "value")),
               json_string_value(json_object_get(dev, "status")));
    fflush(stdout);
}

static void print_requests(json_t *reply)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(reply, "requests"), i, r)
    {
        const char *node = json_string_value(json_object_get(r, "node"));
        printf("%s%s%s%s: %s\n", json_string_value(json_object_get(r, "name")), node ? " (node " : "",
               node ? node : "", node ? ")" : "", json_string_value(json_object_get(r, "doc")));
        size_t j;
        json_t *a;
        json_array_foreach(json_object_get(r, "args"), j, a)
        {
            const char *def = json_string_value(json_object_get(a, "default"));
            printf("    %-12s %-10s %-12s %s\n", json_string_value(json_object_get(a, "name")),
                   json_string_value(json_object_get(a, "type")), def ? def : "required",
                   json_string_value(json_object_get(a, "doc")));
        }
    }
}

static json_t *scalar_arg(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    return v ? v : json_string(text);
}

static int parse_number(const char *s, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *s && !*end && !errno && isfinite(*out) ? 0 : -1;
}

static int watch(ctl *c, const char *sub_ep, long count)
{
    char ep[256];
    if (sub_ep) {
        cbf_control_endpoint(sub_ep, ep, sizeof ep);
    } else {
        json_t *req = json_pack("{s:s}", "request", "sensors"), *reply;
        int rc = call(c, req, &reply);
        json_decref(req);
        if (rc)
            return rc;
        const char *pub = json_string_value(json_object_get(reply, "publish"));
        if (!pub || refused(reply)) {
            if (!pub)
                fprintf(stderr, "cbf-ctl: this engine publishes no sensors (set engine.sensors in "
                        "its YAML)\n");
            json_decref(reply);
            return 1;
        }
        snprintf(ep, sizeof ep, "%s", pub);
        json_decref(reply);
    }
    void *s = zmq_socket(c->zctx, ZMQ_SUB);
    int zero = 0, ms = 250;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &ms, sizeof ms);
    zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(s, ep) != 0) {
        fprintf(stderr, "cbf-ctl: cannot connect to '%s': %s\n", ep, zmq_strerror(zmq_errno()));
        zmq_close(s);
        return 3;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    long got = 0;
    double waited = 0;
    int rc = 0;
    while (!interrupted && (count <= 0 || got < count)) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) {
            zmq_msg_close(&m);
            waited += 0.25;
            if (waited > c->timeout && !got) {
                fprintf(stderr, "cbf-ctl: no sensor message from %s within %g s\n", ep, c->timeout);
                rc = 3;
                break;
            }
            continue;
        }
        json_error_t je;
        json_t *msg = json_loadb(zmq_msg_data(&m), zmq_msg_size(&m), 0, &je);
        zmq_msg_close(&m);
        if (!msg)
            continue;
        got++;
        if (c->raw_json)
            print_json(msg);
        else
            print_sensors(msg);
        bool final = json_is_true(json_object_get(msg, "final"));
        json_decref(msg);
        if (final)
            break;   /* the engine has stopped */
    }
    zmq_close(s);
    return rc;
}

int main(int argc, char **argv)
{
    ctl c = {.timeout = 5.0};
    const char *env = getenv("CBF_CTL_ENDPOINT");
    cbf_control_endpoint(env && *env ? env : DEFAULT_ENDPOINT, c.endpoint, sizeof c.endpoint);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if ((!strcmp(argv[i], "-e") || !strcmp(argv[i], "--endpoint")) && i + 1 < argc)
            cbf_control_endpoint(argv[++i], c.endpoint, sizeof c.endpoint);
        else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--timeout")) && i + 1 < argc) {
            if (parse_number(argv[++i], &c.timeout) || c.timeout <= 0)
                return usage();
        } else if (!strcmp(argv[i], "--json"))
            c.raw_json = 1;
        else if (!strcmp(argv[i], "--version")) {
            printf("cbf-ctl %s\n", CBF_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage_to(stdout);   /* asked for: pipes into less or head */
            return 0;
        } else
            return usage();
    }
    if (i >= argc)
        return usage();
    const char *cmd = argv[i++];
    c.zctx = zmq_ctx_new();

    /* Options every request command takes, then positionals. */
    const char *node = NULL, *pol = NULL, *at = NULL, *at_unix = NULL, *sub_ep = NULL;
    int watching = 0, cancel = 0;
    long count = 0;
    const char *pos[4096];
    int npos = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--node") && i + 1 < argc)
            node = argv[++i];
        else if (!strcmp(argv[i], "--pol") && i + 1 < argc)
            pol = argv[++i];
        else if (!strcmp(argv[i], "--at") && i + 1 < argc)
            at = argv[++i];
        else if (!strcmp(argv[i], "--at-unix") && i + 1 < argc)
            at_unix = argv[++i];
        else if (!strcmp(argv[i], "--watch"))
            watching = 1;
        else if (!strcmp(argv[i], "--cancel"))
            cancel = 1;
        else if (!strcmp(argv[i], "--count") && i + 1 < argc)
            count = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            sub_ep = argv[++i];
        else if (npos < 4096 && (argv[i][0] != '-' || (argv[i][1] >= '0' && argv[i][1] <= '9') ||
                                 argv[i][1] == '.' || !argv[i][1]))   /* "-": standard input */
            pos[npos++] = argv[i];
        else {
            fprintf(stderr, "cbf-ctl: unknown option '%s'\n", argv[i]);
            return usage();
        }
    }

    if (!strcmp(cmd, "sensors") && watching) {
        int rc = watch(&c, sub_ep, count);
        zmq_ctx_term(c.zctx);
        return rc;
    }
    if (!strcmp(cmd, "raw")) {
        /* The text as it is: for trying the engine's checks by hand, or a
         * request too long for a command line from standard input ("-"). */
        json_t *reply = NULL;
        bool from_stdin = npos == 1 && !strcmp(pos[0], "-");
        char *text = from_stdin ? ctl_read_all(stdin) : NULL;
        int rc = npos != 1             ? usage()
                 : from_stdin && !text ? 2
                                       : call_text(&c, from_stdin ? text : pos[0], &reply);
        free(text);
        if (!rc && !(rc = refused(reply))) {
            if (c.raw_json)
                print_json(reply);
            else
                print_fields(reply);
        }
        json_decref(reply);
        zmq_ctx_term(c.zctx);
        return rc;
    }
    json_t *req = json_pack("{s:s}", "request", cmd);
    if (node)
        json_object_set_new(req, "node", json_string(node));
    if (pol)
        json_object_set_new(req, "pol", scalar_arg(pol));
    if (at)
        json_object_set_new(req, "at", scalar_arg(at));
    if (at_unix)   /* a string: a JSON number would pass through a double */
        json_object_set_new(req, "at_unix", json_string(at_unix));
    if (cancel)
        json_object_set_new(req, "cancel", json_true());
    if (cancel && (npos || (strcmp(cmd, "gain") && strcmp(cmd, "delays")))) {
        fprintf(stderr, "cbf-ctl: --cancel takes gain or delays and no values\n");
        return 2;
    }
    if (!strcmp(cmd, "gain") && npos == 1 && !strcmp(pos[0], "default")) {
        json_object_set_new(req, "default", json_true());
    } else if (!strcmp(cmd, "gain")) {
        json_t *vals = json_array();
        for (int k = 0; k < npos; k++) {
            double v;
            if (parse_number(pos[k], &v)) {
                fprintf(stderr, "cbf-ctl gain: '%s' is not a number\n", pos[k]);
                return 2;
            }
            json_array_append_new(vals, json_real(v));
        }
        if (npos)
            json_object_set_new(req, "values", vals);
        else
            json_decref(vals);
    } else if (!strcmp(cmd, "delays")) {
        static const char *const names[] = {"delay", "delay_rate", "phase", "phase_rate"};
        if (npos != 4 && !cancel) {
            fprintf(stderr, "cbf-ctl delays: give DELAY_S RATE PHASE_RAD PHASE_RATE_RAD_S\n");
            return 2;
        }
        for (int k = 0; k < npos; k++) {
            double v;
            if (parse_number(pos[k], &v)) {
                fprintf(stderr, "cbf-ctl delays: %s '%s' is not a number\n", names[k], pos[k]);
                return 2;
            }
            json_object_set_new(req, names[k], json_real(v));
        }
    } else if (!strcmp(cmd, "capture")) {
        if (npos != 1 || (strcmp(pos[0], "start") && strcmp(pos[0], "stop"))) {
            fprintf(stderr, "cbf-ctl capture: start or stop\n");
            return 2;
        }
        json_object_set_new(req, "action", json_string(pos[0]));
    } else if (!strcmp(cmd, "log-level")) {
        if (npos > 1)
            return usage();
        if (npos)
            json_object_set_new(req, "level", json_string(pos[0]));
    } else {
        for (int k = 0; k < npos; k++) {
            const char *eq = strchr(pos[k], '=');
            if (!eq || eq == pos[k]) {
                fprintf(stderr, "cbf-ctl %s: expected KEY=VALUE, got '%s'\n", cmd, pos[k]);
                return 2;
            }
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(eq - pos[k]), pos[k]);
            json_object_set_new(req, key, scalar_arg(eq + 1));
        }
    }
    json_t *reply;
    int rc = call(&c, req, &reply);
    json_decref(req);
    if (!rc) {
        rc = refused(reply);
        if (!rc) {
            if (c.raw_json)
                print_json(reply);
            else if (!strcmp(cmd, "sensors")) {
                print_sensors(json_object_get(reply, "sensors"));
            } else if (!strcmp(cmd, "requests")) {
                print_requests(reply);
            } else if (!strcmp(cmd, "gain")) {
                print_gains(reply);
            } else {
                print_fields(reply);
            }
        }
    }
    json_decref(reply);
    zmq_ctx_term(c.zctx);
    return rc;
}
