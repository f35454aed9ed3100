/* cbf/katcp.h: a katcp v5 server and a blocking katcp client, for programs
 * that are not an engine (the array's controller daemon) as well as for the
 * engine's own `katcp:` front end, which is one user of this server.
 *
 * Server. One thread serves every client with poll(): lines are parsed,
 * each request is answered by a built-in or by a handler the program
 * registered. Built-ins: help, watchdog, log-level, version-list,
 * sensor-list, sensor-value, sensor-sampling (strategies none, auto, event,
 * period). A handler marked CBF_KATCP_SLOW (it launches processes, asks
 * other servers, takes seconds) runs on one of a pool of request threads,
 * so other clients are answered meanwhile and several slow requests run at
 * once; a client's own later lines wait for its slow reply, so each client
 * sees its replies in the order it asked. Clients that send nothing for
 * the idle timeout (and sample no sensor) are told so and closed; a line
 * longer than CBF_KATCP_MAX_LINE closes its client; when all
 * CBF_KATCP_MAX_CLIENTS slots are taken, the client idle longest makes
 * room for a newcomer. See docs/control.md, "libcbf's katcp server for
 * other programs".
 *
 * Sensors come from a table the server owns (add, set from any thread,
 * remove by name or prefix: #interface-changed sensor-list tells the
 * clients) and from a snapshot callback the program gives (read whenever
 * a client asks or samples), or both. An event or auto strategy on a
 * table sensor sees every change, in order; on a snapshot sensor, the
 * changes between two readings (every CBF_KATCP_POLL_MS) are one.
 *
 * Client. cbf_katcp_client_call sends one request and waits for its reply,
 * collecting the informs that carry its message id. One call at a time per
 * client (thread-compatible: a client used by several threads needs the
 * caller's lock); several clients may be used at once. */
#ifndef CBF_KATCP_H
#define CBF_KATCP_H

#include <stdbool.h>
#include <stddef.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_KATCP_NAME_MAX 64            /* a message name, NUL included */
#define CBF_KATCP_MAX_LINE (8 << 20)     /* the longest line read, in bytes */
#define CBF_KATCP_MAX_CLIENTS 64         /* connections served at once */
#define CBF_KATCP_POLL_MS 100            /* snapshot sensors are compared this often */
#define CBF_KATCP_SLOW 1u                /* cbf_katcp_request.flags: off the server thread */

/* One katcp message: ?request, !reply or #inform. */
typedef struct cbf_katcp_msg {
    char type;                       /* '?', '!' or '#' */
    char name[CBF_KATCP_NAME_MAX];
    long long id;                    /* the message id, or -1 when none */
    size_t n_args;
    char **args;                     /* unescaped, each NUL-terminated (an arg may hold \0) */
    size_t *lens;
    char *store;                     /* what args point into */
} cbf_katcp_msg;

void cbf_katcp_msg_free(cbf_katcp_msg *m);

/* ---- server ---- */
typedef struct cbf_katcp_server cbf_katcp_server;
typedef struct cbf_katcp_call cbf_katcp_call;
typedef struct cbf_katcp_sensors cbf_katcp_sensors;

typedef void (*cbf_katcp_handler)(cbf_katcp_call *call, void *user);

typedef struct cbf_katcp_server_options {
    /* For errors and the log ("engine.katcp", "controller --katcp"). */
    const char *label;
    const char *where;               /* the place the address came from, or NULL */
    /* Said in a warning when the address is beyond loopback: what anyone
     * who can reach it can do ("start and stop products"); NULL: no warning. */
    const char *exposes;
    double idle_timeout;             /* seconds; 0: clients may stay silent forever */
    const char *idle_setting;        /* where it is set, told to a client it closes (NULL: none) */
    /* #version-connect and ?version-list: katcp-protocol (NULL: "5.0-MI"),
     * katcp-library is libcbf's, katcp-device its version and build (NULL:
     * "cbf", and no build). */
    const char *protocol, *device, *device_build;
    /* Slow requests: how many run at once (0: 4), and how many more may
     * wait for a thread (-1: as many as there are clients; 0: refused
     * "busy" at once, which bounds the memory held by long requests). */
    int slow_threads, slow_waiting;
    /* A request no handler is registered for (NULL: `invalid`, unknown
     * request); slow when its line is longer than 64 KiB. */
    cbf_katcp_handler fallback;
    /* ?help [name] for what the fallback answers: cbf_katcp_help informs
     * (only for `want` when it is not NULL); the count of them. */
    size_t (*fallback_help)(cbf_katcp_call *call, const char *want, void *user);
    void *fallback_user;
    /* Sensors read at every look (NULL: the table alone), on the server
     * thread: fills `out` with cbf_katcp_sensors_put; 0, or an error (the
     * request fails). */
    int (*snapshot)(cbf_katcp_sensors *out, void *user);
    void *snapshot_user;
} cbf_katcp_server_options;

/* Binds addr ("PORT" on 127.0.0.1, "HOST:PORT", "[IPv6]:PORT"; port 0: a
 * free one). opt may be NULL (all defaults). Nothing is served before
 * start. CBF_ECONFIG for a malformed address, CBF_EIO. */
int cbf_katcp_server_open(const char *addr, const cbf_katcp_server_options *opt, cbf_katcp_server **out,
                          cbf_error *err);
int cbf_katcp_server_start(cbf_katcp_server *s, cbf_error *err);
/* Tells each client why (#disconnect), closes them, joins the threads (a
 * slow handler running is waited for) and frees. s may be NULL. */
void cbf_katcp_server_close(cbf_katcp_server *s);
/* The bound address, "h:p" or "[h]:p". */
const char *cbf_katcp_server_address(const cbf_katcp_server *s);

/* A handler without CBF_KATCP_SLOW runs on the server thread, which serves
 * every client: it must be quick. No handler may close its own server. */
typedef struct cbf_katcp_request {
    const char *name;                /* a letter, then letters, digits and '-' */
    const char *help;                /* ?help's line: "?name ARGS: what it does" */
    cbf_katcp_handler fn;
    void *user;
    unsigned flags;                  /* CBF_KATCP_SLOW */
} cbf_katcp_request;

/* Before start: adds request r (its strings copied). CBF_EINVAL for a bad
 * or taken name (a built-in's included), or after start. */
int cbf_katcp_server_add_request(cbf_katcp_server *s, const cbf_katcp_request *r, cbf_error *err);

/* ---- one request being answered (in its handler) ---- */
const char *cbf_katcp_call_name(const cbf_katcp_call *c);
long long cbf_katcp_call_id(const cbf_katcp_call *c);   /* -1: none */
size_t cbf_katcp_call_nargs(const cbf_katcp_call *c);
/* Argument i (NULL past the last), its length in *len when len is not NULL. */
const char *cbf_katcp_call_arg(const cbf_katcp_call *c, size_t i, size_t *len);
/* The whole request as parsed (valid until the handler returns). */
const cbf_katcp_msg *cbf_katcp_call_msg(const cbf_katcp_call *c);
/* The server it came to (to set sensors from a handler, say). */
cbf_katcp_server *cbf_katcp_call_server(const cbf_katcp_call *c);
/* #NAME[id] args: an inform of this request, before its reply. A slow
 * handler's informs and reply reach the client together, when it returns. */
void cbf_katcp_inform(cbf_katcp_call *c, size_t n, const char *const *args);
/* A #help inform (a fallback_help's). */
void cbf_katcp_help(cbf_katcp_call *c, const char *name, const char *text);
/* !NAME[id] status args: the reply, status "ok", "fail" or "invalid". One
 * per call: a later one is dropped; a handler that returns without one is
 * answered "fail" for it. */
void cbf_katcp_reply(cbf_katcp_call *c, const char *status, size_t n, const char *const *args);
/* The reply with one argument made by printf (none when fmt is NULL). */
void cbf_katcp_reply_fmt(cbf_katcp_call *c, const char *status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- sensors ---- */
typedef enum cbf_katcp_type {
    CBF_KATCP_INTEGER,
    CBF_KATCP_FLOAT,
    CBF_KATCP_BOOLEAN,               /* "0" or "1" */
    CBF_KATCP_DISCRETE,              /* one of its values */
    CBF_KATCP_STRING,
    CBF_KATCP_ADDRESS,               /* "host:port", "[v6]:port" */
    CBF_KATCP_TIMESTAMP,             /* UNIX seconds */
} cbf_katcp_type;

typedef enum cbf_katcp_status {
    CBF_KATCP_UNKNOWN,
    CBF_KATCP_NOMINAL,
    CBF_KATCP_WARN,
    CBF_KATCP_ERROR,
    CBF_KATCP_FAILURE,
    CBF_KATCP_UNREACHABLE,
    CBF_KATCP_INACTIVE,
} cbf_katcp_status;

/* katcp's word for a status ("nominal"), and back (-1: none). */
const char *cbf_katcp_status_name(cbf_katcp_status st);
int cbf_katcp_status_parse(const char *word);

typedef struct cbf_katcp_sensor_info {
    const char *name;                /* letters, digits, '.', '-' and '_' */
    const char *description;
    const char *units;               /* "" or NULL: none */
    cbf_katcp_type type;
    const char *const *values;       /* discrete: the values it takes */
    size_t n_values;
} cbf_katcp_sensor_info;

/* The table. Add: status unknown and the type's zero ("0", "", the first
 * discrete value) until set; CBF_EINVAL for a bad or taken name or a
 * discrete sensor without values. Set: value as katcp writes it, checked
 * against the type (CBF_EINVAL names the sensor); timestamp in UNIX
 * seconds, 0: now; a change of value or status reaches every client
 * sampling it on event or auto. Any thread, at any time. */
int cbf_katcp_sensor_add(cbf_katcp_server *s, const cbf_katcp_sensor_info *info, cbf_error *err);
int cbf_katcp_sensor_set(cbf_katcp_server *s, const char *name, cbf_katcp_status st, const char *value,
                         double timestamp, cbf_error *err);
/* Removes the sensor so named, or every one whose name starts with prefix;
 * how many went. */
size_t cbf_katcp_sensor_remove(cbf_katcp_server *s, const char *name);
size_t cbf_katcp_sensor_remove_prefix(cbf_katcp_server *s, const char *prefix);

/* In a snapshot callback: one sensor with its reading (updated: UNIX
 * seconds its value last changed). 0, CBF_ENOMEM, or CBF_EINVAL for no
 * name or a bad type or status. */
int cbf_katcp_sensors_put(cbf_katcp_sensors *out, const cbf_katcp_sensor_info *info, cbf_katcp_status st,
                          const char *value, double updated);

/* ---- client ---- */
typedef struct cbf_katcp_client cbf_katcp_client;

/* What a request got back: its reply (args[0] is the status) and its
 * informs, in order. */
typedef struct cbf_katcp_result {
    cbf_katcp_msg reply;
    cbf_katcp_msg *informs;
    size_t n_informs;
} cbf_katcp_result;

void cbf_katcp_result_free(cbf_katcp_result *r);
/* The reply's status ("ok", "fail", "invalid"), "" when it had none. */
const char *cbf_katcp_result_status(const cbf_katcp_result *r);

/* Connects to addr ("HOST:PORT", "[IPv6]:PORT", or "PORT" on 127.0.0.1)
 * within timeout_s seconds. CBF_ECONFIG for a malformed address, CBF_EIO. */
int cbf_katcp_client_connect(const char *addr, double timeout_s, cbf_katcp_client **out, cbf_error *err);
/* Sends ?name[id] args and waits up to timeout_s for !name[id]: 0 with *out
 * (free with cbf_katcp_result_free) whatever its status; informs without
 * this id (#version-connect, #sensor-status...) are passed over. CBF_EIO
 * when the connection fails or the time runs out (a late reply is then
 * passed over by the next call). */
int cbf_katcp_client_call(cbf_katcp_client *cl, const char *name, size_t n, const char *const *args,
                          double timeout_s, cbf_katcp_result *out, cbf_error *err);
void cbf_katcp_client_close(cbf_katcp_client *cl);

#ifdef __cplusplus
}
#endif
#endif
