/* repr.c: numbers written as katgpucbf's Python writes them (cbf/control.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/control.h"

void cbf_format_repr(double v, char *out, size_t n)
{
    char e[40];
    if (!isfinite(v)) {
        snprintf(out, n, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    int p = 1;   /* significant digits: the fewest that read back to v */
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    const int x = atoi(strchr(e, 'e') + 1);
    if (x < -4 || x >= 16) {
        snprintf(out, n, "%s", e);
        return;
    }
    snprintf(out, n, "%.*f", p - 1 - x > 0 ? p - 1 - x : 0, v);
    if (!strchr(out, '.'))
        strncat(out, ".0", n - strlen(out) - 1);
}

void cbf_format_complex(double re, double im, char *out, size_t n)
{
    /* C's %.17g is Python's .17g but for NaN, whose sign Python drops */
    char r[32], i[32];
    snprintf(r, sizeof r, isnan(re) ? "nan" : "%.17g", re);
    snprintf(i, sizeof i, isnan(im) ? "+nan" : "%+.17g", im);
    snprintf(out, n, "%s%sj", r, i);
}
