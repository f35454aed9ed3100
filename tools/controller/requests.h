/* requests.h: katsdpcontroller's product requests (`?gain`, `?gain-all`,
 * `?delays`, `?beam-weights`, `?beam-delays`, `?beam-quant-gains`,
 * `?capture-start`, `?capture-stop`, `?dsim-signals`, `?dsim-time`),
 * checked against the product configuration and split into the requests
 * its engines take, as katsdpcontroller's product controller does
 * (docs/controller.md, "Product requests").
 *
 * Everything is checked before any engine is asked, so a bad request
 * changes nothing; the refusal says what katsdpcontroller's says (the
 * wrong stream type, the count expected, the value that does not parse),
 * naming the argument. The engine calls name their engine by task type and
 * index within the stream; the controller maps that onto the plan. */
#ifndef CBF_REQUESTS_H
#define CBF_REQUESTS_H

#include "cbf/error.h"
#include "product.h"

typedef enum {
    CBF_TASK_F,     /* the F-engine of input pair `index` of a channeliser */
    CBF_TASK_XB,    /* every X/B-engine of a channeliser (index -1) */
    CBF_TASK_SIM,   /* the dsim named by `dsim` */
} cbf_task_type;

typedef struct cbf_engine_call {
    cbf_task_type task;
    const cbf_product_stream *acv;   /* F and XB: the channeliser whose engines take it */
    int index;                       /* F: the input pair; -1: every engine of the kind */
    const char *dsim;                /* SIM: the task name */
    int n_args;
    char **args;                     /* the engine request's name, then its arguments */
} cbf_engine_call;

typedef struct cbf_fanout {
    cbf_engine_call *calls;
    int n;
    /* The product request's reply is the reply of calls[0] (a gain query, a
     * dsim's timestamp); otherwise a bare ok once every call succeeds. */
    int reply_from_first;
} cbf_fanout;

/* A parsed request: its name and its arguments (after the name). */
typedef struct cbf_product_request {
    const char *name;
    int n_args;
    const char *const *args;
} cbf_product_request;

/* Checks req against p and fills *out. start_timestamp: what
 * `?capture-start` passes the engines (the largest valid
 * steady-state-timestamp the controller sees). CBF_ENOTSUP for a request
 * that is not one of these (the caller's other requests); CBF_EINVAL with
 * the reason; CBF_ENOMEM. */
int cbf_product_request_plan(const cbf_product *p, const cbf_product_request *req, long long start_timestamp,
                             cbf_fanout *out, cbf_error *err);
void cbf_fanout_free(cbf_fanout *f);

/* Python's complex(text): "1", "-0.5", "2j", "1+2j", "(1-2.5e-3j)", "j",
 * "inf"; spaces around (and inside the parentheses) allowed. 0, or -1 for
 * text Python refuses. */
int cbf_parse_py_complex(const char *text, double *re, double *im);

#endif
