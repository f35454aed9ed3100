/* inproc.h: one engine run in the test's own process, its control socket on
 * ipc://, and requests to it, for the tests that change a running F-engine
 * (test_feng_control, test_narrow_control). Failures fail the running cmocka
 * test. */
#ifndef CBF_TEST_INPROC_H
#define CBF_TEST_INPROC_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "cbf/graph.h"

typedef struct inproc {
    cbf_registry *reg;
    cbf_graph *g;
    cbf_engine *e;
    pthread_t thread;
    int rc;
    int joined;   /* inproc_wait has run */
    cbf_error err;
} inproc;

/* Writes `text` to `yaml_path`, loads it (plugins from the default path and
 * the build's tests/feng, where feng_capture lives) and starts the engine
 * on a thread. */
void inproc_start(inproc *r, const char *yaml_path, const char *text);
/* Closes the request socket, waits for the (finite) run to end; fails
 * when it failed. The engine is kept for inproc_counter. */
void inproc_wait(inproc *r);
/* After inproc_wait: counter `name` of node `node` at the end of the run;
 * fails the test when there is none. */
uint64_t inproc_counter(const inproc *r, const char *node, const char *name);
/* inproc_wait (unless done), then frees the engine. */
void inproc_finish(inproc *r);
/* For main: 1 when argv asks for --gpu, 0 when not; -1 (main then returns
 * 77, meson's skip), saying so, when it does and no GPU is usable. */
int inproc_gpu_arg(int argc, char **argv);
/* For main: inproc_gpu_arg, then a fresh directory /tmp/cbf-<name>-XXXXXX
 * in dir (n bytes); -2 when it cannot be made. */
int inproc_begin(int argc, char **argv, const char *name, char *dir, size_t n);

/* One request to `endpoint`, its reply parsed; the socket is opened on the
 * first call and closed by inproc_finish. */
json_t *inproc_request(const char *endpoint, const char *fmt, ...);
/* The reply says ok, or fails with the refusal's reason. */
void inproc_expect_ok(const char *what, json_t *reply);
/* The reply is a refusal whose error contains `want`. */
void inproc_expect_refused(const char *what, json_t *reply, const char *want);

#endif
