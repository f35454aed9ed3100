/* status.c: see status.h. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

int cbf_kern_fail(char *msg, size_t msglen, int rc, const char *fmt, ...)
{
    if (msg && msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return rc;
}
