/* dsim_lang_format.c: a program's outputs as katgpucbf's str() of a
 * signal writes them (see dsim_lang.h): numbers as Python prints them,
 * operations in parentheses, variables written out. */
#include "dsim_lang.h"

#include <cbf/control.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct outbuf {
    char *s;
    size_t *len, cap;
    bool full;
} outbuf;

static void put(outbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(outbuf *b, const char *fmt, ...)
{
    if (b->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int l = vsnprintf(b->s + *b->len, b->cap - *b->len, fmt, ap);
    va_end(ap);
    if (l < 0 || (size_t)l >= b->cap - *b->len) {
        *b->len = b->cap ? b->cap - 1 : 0;
        b->full = true;
        return;
    }
    *b->len += (size_t)l;
}

/* A number as Python prints it: an integer literal as an int, else a float. */
static void put_number(outbuf *b, const cbf_dsim_term *t, int k)
{
    char num[40];
    if ((t->whole >> k) & 1 && fabs(t->arg[k]) < 1e18)
        snprintf(num, sizeof num, "%.0f", t->arg[k] + 0.0);
    else
        cbf_format_repr(t->arg[k], num, sizeof num);
    put(b, "%s", num);
}

static void format_term(const cbf_dsim_prog *p, int i, outbuf *b)
{
    static const char *const names[] = {
        [CBF_DSIM_CW] = "cw", [CBF_DSIM_MULTICW] = "multicw", [CBF_DSIM_COMB] = "comb"};
    static const char ops[] = {[CBF_DSIM_ADD] = '+', [CBF_DSIM_SUB] = '-', [CBF_DSIM_MUL] = '*'};
    const cbf_dsim_term *t = &p->terms[i];
    if (b->full)
        return;
    switch (t->op) {
    case CBF_DSIM_CONST: {
        char num[40];
        cbf_format_repr(t->arg[0], num, sizeof num);
        put(b, "%s", num);
        break;
    }
    case CBF_DSIM_CW:
    case CBF_DSIM_MULTICW:
    case CBF_DSIM_COMB:
        put(b, "%s(", names[t->op]);
        for (int k = 0; k < t->n_args; k++) {
            if (k)
                put(b, ", ");
            put_number(b, t, k);
        }
        put(b, ")");
        break;
    case CBF_DSIM_WGN:
        put(b, "wgn(");
        put_number(b, t, 0);
        put(b, ", %s)", p->strings + t->entropy_at);
        break;
    case CBF_DSIM_DELAY:
        put(b, "delay(");
        format_term(p, t->a, b);
        put(b, ", %lld)", (long long)t->delay);
        break;
    case CBF_DSIM_NODITHER:
        put(b, "nodither(");
        format_term(p, t->a, b);
        put(b, ")");
        break;
    case CBF_DSIM_ADD:
    case CBF_DSIM_SUB:
    case CBF_DSIM_MUL:
        put(b, "(");
        format_term(p, t->a, b);
        put(b, " %c ", ops[t->op]);
        format_term(p, t->b, b);
        put(b, ")");
        break;
    }
}

bool cbf_dsim_prog_format(const cbf_dsim_prog *p, int o, char *out, size_t *len, size_t cap)
{
    outbuf b = {out, len, cap, cap == 0 || *len >= cap};
    format_term(p, p->outputs[o], &b);
    return !b.full;
}
