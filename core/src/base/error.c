/* error.c: the cbf_error record. Messages are single lines; prefixes are
 * added as an error travels outwards, so the innermost detail stays last. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cbf/error.h"

int cbf_error_set(cbf_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int cbf_error_prefix(cbf_error *err, const char *fmt, ...)
{
    if (!err)
        return CBF_EINTERNAL;
    char prefix[CBF_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[CBF_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return err->code;
}

void cbf_error_clear(cbf_error *err)
{
    if (err) {
        err->code = CBF_OK;
        err->msg[0] = '\0';
    }
}

const char *cbf_error_name(int code)
{
    switch (code) {
    case CBF_OK: return "ok";
    case CBF_EOS: return "end of stream";
    case CBF_EINVAL: return "invalid argument";
    case CBF_ENOMEM: return "out of memory";
    case CBF_EIO: return "I/O error";
    case CBF_ECONFIG: return "bad pipeline";
    case CBF_ENOTSUP: return "not supported";
    case CBF_ECUDA: return "CUDA error";
    case CBF_EPLUGIN: return "bad plugin";
    case CBF_ESTOPPED: return "stopped";
    case CBF_ELEAK: return "buffer leak";
    case CBF_EINTERNAL: return "internal error";
    case CBF_EAGAIN: return "none free now";
    default: return "unknown error";
    }
}
