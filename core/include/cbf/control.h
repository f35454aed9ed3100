/* cbf/control.h: runtime requests a plugin accepts (its sensors, counters
 * and gauges, are in cbf/node.h).
 *
 * A running engine listens for small JSON requests on a ZeroMQ REP socket
 * (engine `control:` in the YAML) and publishes sensors on a PUB socket
 * (engine `sensors:`), see docs/control.md. The core answers its own
 * requests (sensors, log-level, shutdown, requests); gauges and counters
 * (cbf/node.h) are what it publishes. A plugin declares the
 * requests it accepts in its descriptor, as it declares its parameters:
 *
 *   static const cbf_param_decl gain_args[] = {
 *       {"pol", CBF_PARAM_INT, "-1", CBF_RANGE(-1, 1), NULL, "polarisation; -1: both"},
 *       {"values", CBF_PARAM_FLOAT_LIST, NULL, CBF_RANGE(-1e9, 1e9), NULL, "..."},
 *   };
 *   static const cbf_request_decl requests[] = {
 *       {"gain", gain_args, CBF_COUNT_OF(gain_args), "set the complex gains"},
 *   };
 *
 * Arguments use the parameter declarations of cbf/params.h (every type but
 * RECORDS): the core checks a request's arguments against them (unknown,
 * missing, wrong type, out of range) before the plugin sees it, and replies
 * with the error itself. A request that passes is queued in the node's
 * mailbox and handed to the plugin's `request` function ON THE NODE'S OWN
 * THREAD, between buffers: inside cbf_port_recv (also while it waits for
 * input), or, for a source, inside cbf_node_stopping, which every source
 * calls between buffers anyway to see a stop. So a request never
 * tears a buffer in progress, and the plugin needs no locks for it. The
 * plugin checks what only it can check (lengths against its channel count,
 * a timestamp already past), and either returns an error (then it must have
 * changed nothing) or applies or schedules the change and may add fields to
 * the reply. */
#ifndef CBF_CONTROL_H
#define CBF_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"
#include "cbf/node.h"
#include "cbf/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_node cbf_node;

/* The longest request the engine reads, in bytes (8 MiB): a gain table for
 * 65536 channels, complex, written in full precision, is about 3 MB. */
#define CBF_CONTROL_MAX_REQUEST (8 << 20)

/* An engine with `read_only: true` refuses every plugin request that does
 * not carry CBF_REQUEST_READS, before the plugin sees it. A request with
 * it either never changes anything, or changes something only with some
 * arguments (`gain` with values; without, it reports the gains): its
 * handler then refuses the change itself when cbf_request_read_only(). */
#define CBF_REQUEST_READS 1u

typedef struct cbf_request_decl {
    const char *name;              /* lower case, letters, digits, '-' and '_' */
    const cbf_param_decl *args;
    int n_args;
    const char *doc;               /* one line, shown by cbf-inspect and `requests` */
    unsigned flags;                /* CBF_REQUEST_* */
} cbf_request_decl;

/* One request as the plugin sees it: the name and the validated arguments
 * (with defaults filled in), read with the cbf_params_* accessors. */
typedef struct cbf_request cbf_request;
const char *cbf_request_name(const cbf_request *r);
const cbf_params *cbf_request_args(const cbf_request *r);
/* True on an engine with `read_only: true` (then only CBF_REQUEST_READS
 * requests arrive, and they must not change the signal path). */
bool cbf_request_read_only(const cbf_request *r);

/* Fields added to the {"ok": true, ...} reply. Keys "ok", "error" and
 * "request" are the core's. Return 0 or CBF_ENOMEM. */
typedef struct cbf_reply cbf_reply;
int cbf_reply_int(cbf_reply *r, const char *key, int64_t v);
int cbf_reply_float(cbf_reply *r, const char *key, double v);
int cbf_reply_string(cbf_reply *r, const char *key, const char *v);
/* A list of n numbers (JSON array; katcp: one argument per value where the
 * front end writes a request's own form, else key=[...]). Non-finite
 * values are null. */
int cbf_reply_float_list(cbf_reply *r, const char *key, const double *v, size_t n);

/* v as Python's repr writes it, which is how katgpucbf's sensors and
 * replies show numbers: the fewest digits that read back to v, positional
 * for exponents -4 to 15 (a whole number gets ".0"), else d.ddde+XX; nan,
 * inf, -inf. */
void cbf_format_repr(double v, char *out, size_t n);
/* re + im j as katgpucbf's format_complex writes a gain (Python's
 * f"{z:.17g}", in its ?gain replies and STREAM.inputN.eq sensors):
 * "0.5+0.25j", "0.10000000149011612+0j", "1-0j", "1.0000000000000001e-05+3e+20j". */
void cbf_format_complex(double re, double im, char *out, size_t n);

/* An endpoint as the engine YAML and cbf-ctl write it: a port number alone
 * ("5555") is tcp://127.0.0.1:5555; anything else is a ZeroMQ endpoint. */
void cbf_control_endpoint(const char *text, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
