/* opts.c: cbf-bench's one option parser (opts.h). */
#include "opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One number of a value: the whole text, or up to a comma in a list (base
 * 0 takes 0x.. too). 0 and *end past it, or -1 when it is not a number of
 * the kind. */
static int number(const char *s, int integer, int base, double *x, const char **end)
{
    char *e;
    errno = 0;
    if (integer) {
        unsigned long long u = strtoull(s, &e, base);
        *x = (double)u;
        if (*s == '-')
            return -1;
    } else {
        *x = strtod(s, &e);
    }
    if (e == s || errno == ERANGE || !isfinite(*x))
        return -1;
    *end = e;
    return 0;
}

static int in_range(const cbf_bench_opt *o, double x)
{
    return x >= o->lo && x <= o->hi;
}

/* Stores v into o's value. NULL, or why it is refused. */
static const char *store(const cbf_bench_opt *o, const char *v)
{
    if (o->check)
        return o->check(v, o->value) ? "not a value it takes" : NULL;
    int integer = o->kind != CBF_BOPT_REAL && o->kind != CBF_BOPT_REALS;
    double x;
    const char *end;
    switch (o->kind) {
    case CBF_BOPT_INT:
    case CBF_BOPT_SIZE:
    case CBF_BOPT_REAL:
        if (number(v, integer, o->kind == CBF_BOPT_SIZE ? 0 : 10, &x, &end) || *end)
            return integer ? "not a whole number" : "not a number";
        if (!in_range(o, x))
            return "out of range";
        if (o->kind == CBF_BOPT_INT)
            *(int *)o->value = (int)x;
        else if (o->kind == CBF_BOPT_SIZE)
            *(size_t *)o->value = (size_t)x;
        else
            *(double *)o->value = x;
        return NULL;
    case CBF_BOPT_INTS:
    case CBF_BOPT_REALS: {
        int n = 0;
        for (const char *s = v; *s; s = *end ? end + 1 : end) {
            if (n == o->max)
                return "too many entries";
            if (number(s, integer, 10, &x, &end) || (*end && *end != ','))
                return integer ? "not a comma list of whole numbers" : "not a comma list of numbers";
            if (!in_range(o, x))
                return "an entry out of range";
            if (integer)
                ((int *)o->value)[n++] = (int)x;
            else
                ((double *)o->value)[n++] = x;
        }
        if (!n)
            return "an empty list";
        *o->count = n;
        return NULL;
    }
    case CBF_BOPT_TEXT:
        *(const char **)o->value = v;
        return NULL;
    default:
        return "not an option with a value";
    }
}

static void range_text(const cbf_bench_opt *o, char *out, size_t n)
{
    out[0] = '\0';
    if (o->check || o->kind == CBF_BOPT_TEXT || o->kind == CBF_BOPT_FLAG)
        return;
    snprintf(out, n, " (accepted: %g .. %g)", o->lo, o->hi);
}

int cbf_bench_parse(const char *area, const char *usage, int argc, char **argv, const cbf_bench_opt *opts)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 1;
        }
        const cbf_bench_opt *o = opts;
        while (o->kind != CBF_BOPT_END && strcmp(a, o->name) && !(o->alias && !strcmp(a, o->alias)))
            o++;
        const char *why = NULL, *v = NULL;
        if (o->kind == CBF_BOPT_END)
            why = "unknown option";
        else if (o->kind == CBF_BOPT_FLAG)
            *(int *)o->value = o->set;
        else if (i + 1 >= argc)
            why = "needs a value";
        else
            why = store(o, v = argv[++i]);
        if (why) {
            char range[96] = "";
            if (v) {
                range_text(o, range, sizeof range);
                fprintf(stderr, "cbf-bench %s: %s '%s': %s%s\n", area, a, v, why, range);
            } else {
                fprintf(stderr, "cbf-bench %s: %s: %s\n", area, a, why);
            }
            fputs(usage, stderr);
            return 2;
        }
    }
    return 0;
}
