/* timeref.c: UNIX seconds <-> ADC timestamps without losing the sample
 * (see timeref.h for why the seconds and their fraction are kept apart). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "timeref.h"

int cbf_time_parse(const char *text, cbf_unix_time *out)
{
    char s[128];
    size_t n = strlen(text);
    if ((n >= 2 && text[0] == '"' && text[n - 1] == '"') || (n >= 2 && text[0] == '\'' && text[n - 1] == '\'')) {
        text++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof s)
        return -1;
    memcpy(s, text, n);
    s[n] = '\0';
    const char *p = s + (s[0] == '+' || s[0] == '-');
    bool neg = s[0] == '-';
    size_t ni = strspn(p, "0123456789");
    const char *dot = p + ni;
    size_t nf = *dot == '.' ? strspn(dot + 1, "0123456789") : 0;
    if (ni + nf > 0 && ni <= 15 && (*dot == '\0' || (*dot == '.' && dot[1 + nf] == '\0'))) {
        /* Plain decimal: the integer part exactly, the fraction on its own. */
        int64_t whole = 0;
        for (size_t i = 0; i < ni; i++)
            whole = 10 * whole + (p[i] - '0');
        long double frac = 0;
        if (nf) {
            char f[128] = "0.";
            memcpy(f + 2, dot + 1, nf);
            f[2 + nf] = '\0';
            frac = strtold(f, NULL);
        }
        if (neg && frac > 0) {
            out->sec = -whole - 1;
            out->frac = 1 - frac;
        } else {
            out->sec = neg ? -whole : whole;
            out->frac = frac;
        }
        return 0;
    }
    if (strspn(s, "0123456789.eE+-") != n)   /* strtold's hex, inf and nan are not seconds */
        return -1;
    char *end;
    errno = 0;
    long double v = strtold(s, &end);
    if (end == s || *end || errno || !isfinite(v) || fabsl(v) > 1e15L)
        return -1;
    long double w = floorl(v);
    out->sec = (int64_t)w;
    out->frac = v - w;
    return 0;
}

double cbf_time_to_double(const cbf_unix_time *t) { return (double)((long double)t->sec + t->frac); }

int cbf_time_to_ts(const cbf_unix_time *t, const cbf_unix_time *sync, long double rate, int64_t *ts)
{
    /* Whole seconds times an integer rate is exact in a long double up to
     * 2^64 samples; its own fraction (a non-integer rate) and the seconds'
     * fraction times the rate are small, so they are added and rounded
     * apart from the large whole part, whose last bits are coarser than a
     * sample beyond 2^53. */
    long double whole = (long double)(t->sec - sync->sec) * rate;
    if (!isfinite(whole) || fabsl(whole) >= 9.2e18L)
        return -1;
    long double wi = truncl(whole);
    long double part = (whole - wi) + (t->frac - sync->frac) * rate;
    *ts = (int64_t)wi + (int64_t)roundl(part);
    return 0;
}
