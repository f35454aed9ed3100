/* cbf/error.h: error codes and the error record every fallible call fills.
 *
 * Functions return 0 on success or a negative CBF_E* code, and fill a
 * cbf_error whose message says where the problem is (YAML file:line:column,
 * node, parameter, packet field) in one line, without a trailing newline.
 * Nothing below tools/ prints an error or exits: it returns one. */
#ifndef CBF_ERROR_H
#define CBF_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    CBF_OK = 0,
    CBF_EOS = 1,          /* not an error: end of stream on a port */
    CBF_EINVAL = -1,      /* bad argument or bad input data */
    CBF_ENOMEM = -2,      /* allocation failed */
    CBF_EIO = -3,         /* file or socket failure */
    CBF_ECONFIG = -4,     /* bad pipeline (YAML, parameters, edges): cbf-run exits 2 */
    CBF_ENOTSUP = -5,     /* not supported here (no GPU with gpu: required, ...) */
    CBF_ECUDA = -6,       /* a CUDA or cuFFT call failed */
    CBF_EPLUGIN = -7,     /* plugin file broken: wrong ABI, missing symbol, duplicate name */
    CBF_ESTOPPED = -8,    /* the engine is aborting; unwind quietly */
    CBF_ELEAK = -9,       /* a pool found buffers that never came back */
    CBF_EINTERNAL = -10,  /* a bug in cbf itself */
    CBF_EAGAIN = -11,     /* none free now (cbf_pool_try_get): try again later */
};

#define CBF_ERROR_MSG_MAX 1024

typedef struct cbf_error {
    int code;
    char msg[CBF_ERROR_MSG_MAX];
} cbf_error;

/* Records code and a printf-style message in err (which may be NULL) and
 * returns code, so callers can write `return cbf_error_set(err, ...)`. */
int cbf_error_set(cbf_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prepends "prefix: " to an existing message, keeping its code; returns it.
 * Used as an error travels outwards and gains context (node name, file). */
int cbf_error_prefix(cbf_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void cbf_error_clear(cbf_error *err);

/* A short name for a code ("invalid argument", "bad pipeline", ...). */
const char *cbf_error_name(int code);

#ifdef __cplusplus
}
#endif
#endif
