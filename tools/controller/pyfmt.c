/* pyfmt.c: Python's float repr (pyfmt.h). */
#include "pyfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cbf_python_float(double v, char *buf, size_t n)
{
    if (isnan(v) || isinf(v)) {
        snprintf(buf, n, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    int digits = 1;
    for (; digits < 17; digits++) {   /* the shortest text that reads back as v */
        snprintf(buf, n, "%.*e", digits - 1, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    snprintf(buf, n, "%.*e", digits - 1, v);
    int exp = atoi(strchr(buf, 'e') + 1);
    if (exp < -4 || exp >= 16) {
        /* Python drops a lone mantissa's ".": 1e-05, as %.0e writes it. */
        return;
    }
    snprintf(buf, n, "%.*f", digits - 1 - exp > 0 ? digits - 1 - exp : 0, v);
    if (!strchr(buf, '.') && strlen(buf) + 3 <= n)
        strcat(buf, ".0");
}
