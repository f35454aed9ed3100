/* dsim_lang.c: see dsim_lang.h. A recursive-descent parser over the text,
 * with one character of look-ahead after blanks; numbers follow the forms
 * katgpucbf's grammar accepts (a signed integer, digits with a '.', an
 * exponent), entropy and multicw's m unsigned digits, a delay signed ones. */
#include "dsim_lang.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define MAX_NEST 256        /* parentheses and function calls within each other */
#define MAX_ENTROPY_DIGITS 80

typedef struct var {
    const char *name;
    size_t len;
    int term;
} var;

typedef struct parser {
    const char *s;
    size_t n;
    size_t i;
    cbf_dsim_prog *p;
    int cap_terms, cap_depth, cap_outputs, n_vars, cap_vars, nest;
    size_t str_len, str_cap;
    var *vars;
    int *depth;             /* [term]: operands below it, for CBF_DSIM_MAX_DEPTH */
    cbf_dsim_entropy_fn entropy;
    void *ctx;
    cbf_error *err;
} parser;

/* One operand as parsed: its term and where it was written. */
typedef struct operand {
    int term;
    size_t at;
} operand;

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static void skip(parser *ps)
{
    while (ps->i < ps->n && is_blank(ps->s[ps->i]))
        ps->i++;
}

static char peek(parser *ps)
{
    skip(ps);
    return ps->i < ps->n ? ps->s[ps->i] : '\0';
}

static size_t ident_len(const parser *ps, size_t at)
{
    size_t j = at;
    if (j < ps->n && is_alpha(ps->s[j]))
        while (j < ps->n && (is_alpha(ps->s[j]) || is_digit(ps->s[j])))
            j++;
    return j - at;
}

/* Length of the number written at `at` (0: none); *whole when it has
 * neither a '.' nor an exponent. An 'e' not followed by digits is not
 * part of it, as in katgpucbf. */
static size_t number_len(const parser *ps, size_t at, bool sign, bool *whole)
{
    const char *s = ps->s;
    size_t j = at, d1 = 0, d2 = 0;
    bool dot = false;
    if (sign && j < ps->n && (s[j] == '+' || s[j] == '-'))
        j++;
    while (j < ps->n && is_digit(s[j]))
        j++, d1++;
    if (j < ps->n && s[j] == '.') {
        dot = true;
        j++;
        while (j < ps->n && is_digit(s[j]))
            j++, d2++;
    }
    if (d1 + d2 == 0)
        return 0;
    *whole = !dot;
    if (j < ps->n && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < ps->n && (s[k] == '+' || s[k] == '-'))
            k++;
        if (k < ps->n && is_digit(s[k])) {
            while (k < ps->n && is_digit(s[k]))
                k++;
            j = k;
            *whole = false;
        }
    }
    return j - at;
}

/* "column C", or "line L, column C" in a text of several lines. */
static void where(const parser *ps, size_t at, char *out, size_t n)
{
    size_t line = 1, col = 1;
    for (size_t k = 0; k < at && k < ps->n; k++) {
        if (ps->s[k] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (memchr(ps->s, '\n', ps->n))
        snprintf(out, n, "line %zu, column %zu", line, col);
    else
        snprintf(out, n, "column %zu", col);
}

/* What stands at `at`, for "found ...": a word, a number, one character,
 * or the end of the text. */
static void found(const parser *ps, size_t at, char *out, size_t n)
{
    bool whole;
    size_t l = ident_len(ps, at);
    if (!l)
        l = number_len(ps, at, true, &whole);
    if (at >= ps->n)
        snprintf(out, n, "the end of the text");
    else
        snprintf(out, n, "'%.*s'", (int)(l ? (l > 24 ? 24 : l) : 1), ps->s + at);
}

static int fail(parser *ps, size_t at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(parser *ps, size_t at, const char *fmt, ...)
{
    char pos[64], msg[768];
    where(ps, at, pos, sizeof pos);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cbf_error_set(ps->err, CBF_EINVAL, "%s: %s", pos, msg);
    return -1;
}

static int oom(parser *ps)
{
    cbf_error_set(ps->err, CBF_ENOMEM, "out of memory");
    return -1;
}

static bool grow(void **v, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *nv = realloc(*v, (size_t)c * size);
    if (!nv)
        return false;
    *v = nv;
    *cap = c;
    return true;
}

static int add_term(parser *ps, const cbf_dsim_term *t, size_t at)
{
    cbf_dsim_prog *p = ps->p;
    if (p->n_terms >= CBF_DSIM_MAX_TERMS)
        return fail(ps, at, "more than %d terms", CBF_DSIM_MAX_TERMS);
    if (!grow((void **)&p->terms, &ps->cap_terms, p->n_terms + 1, sizeof *p->terms) ||
        !grow((void **)&ps->depth, &ps->cap_depth, p->n_terms + 1, sizeof *ps->depth))
        return oom(ps);
    int d = 0;
    if (t->a >= 0)
        d = ps->depth[t->a];
    if (t->b >= 0 && ps->depth[t->b] > d)
        d = ps->depth[t->b];
    if (d + 1 > CBF_DSIM_MAX_DEPTH)
        return fail(ps, at, "operands nested more than %d deep (through variables too)",
                    CBF_DSIM_MAX_DEPTH);
    ps->depth[p->n_terms] = d + 1;
    p->terms[p->n_terms] = *t;
    p->terms[p->n_terms].col = (int)at + 1;
    return p->n_terms++;
}

static cbf_dsim_term term_of(cbf_dsim_op op)
{
    return (cbf_dsim_term){.op = op, .a = -1, .b = -1, .entropy_at = -1};
}

/* Reads the number at the cursor into *v; its form (signed or not, whole
 * or not) as `kind` asks: 'R' any number, 'I' unsigned digits, 'S' signed
 * digits. Returns its length, or 0 after the error. */
static size_t read_number(parser *ps, char kind, const char *what, const char *fn, double *v,
                          bool *whole)
{
    skip(ps);
    const size_t at = ps->i;
    size_t l = number_len(ps, at, kind != 'I', whole);
    if (!l || (kind != 'R' && !*whole)) {
        char f[48];
        found(ps, at, f, sizeof f);
        fail(ps, at, "%s: %s: expected %s, found %s", fn, what,
             kind == 'R' ? "a number" : kind == 'I' ? "a non-negative integer" : "an integer", f);
        return 0;
    }
    char buf[128];
    if (l >= sizeof buf) {
        fail(ps, at, "%s: %s: number of %zu characters", fn, what, l);
        return 0;
    }
    memcpy(buf, ps->s + at, l);
    buf[l] = '\0';
    *v = strtod(buf, NULL);
    if (!isfinite(*v)) {
        fail(ps, at, "%s: %s: %s is out of range", fn, what, buf);
        return 0;
    }
    ps->i = at + l;
    return l;
}

static bool expect(parser *ps, char c, const char *fn, const char *why)
{
    if (peek(ps) == c) {
        ps->i++;
        return true;
    }
    char f[48];
    found(ps, ps->i, f, sizeof f);
    fail(ps, ps->i, "%s: expected '%c' %s, found %s", fn, c, why, f);
    return false;
}

static int parse_expr(parser *ps, size_t *at);

/* An operand may not be a nodither(...): it only wraps a whole output. */
static int operand_ok(parser *ps, operand o)
{
    if (o.term < 0)
        return -1;
    if (ps->p->terms[o.term].op == CBF_DSIM_NODITHER) {
        char text[256];
        size_t len = 0;
        text[0] = '\0';
        cbf_dsim_prog tmp = *ps->p;
        tmp.n_outputs = 1;
        tmp.outputs = &o.term;
        cbf_dsim_prog_format(&tmp, 0, text, &len, sizeof text);
        return fail(ps, o.at, "'%s' cannot be used in a larger expression (nodither wraps a "
                    "whole output)", text);
    }
    return o.term;
}

/* Keeps decimal digits (leading zeros dropped, as Python's int() reads
 * them) in the program's strings: their offset, or -1 out of memory. */
static int keep_digits(parser *ps, const char *d, size_t l)
{
    while (l > 1 && *d == '0')
        d++, l--;
    if (ps->str_len + l + 1 > ps->str_cap) {
        size_t c = ps->str_cap ? ps->str_cap * 2 : 256;
        while (c < ps->str_len + l + 1)
            c *= 2;
        char *ns = realloc(ps->p->strings, c);
        if (!ns)
            return -1;
        ps->p->strings = ns;
        ps->str_cap = c;
    }
    const int at = (int)ps->str_len;
    memcpy(ps->p->strings + at, d, l);
    ps->p->strings[at + (int)l] = '\0';
    ps->str_len += l + 1;
    return at;
}

uint64_t cbf_dsim_system_entropy(void *ctx)
{
    (void)ctx;
    uint64_t v = 0;
    /* getrandom of 8 bytes does not come back short; a failure (no
     * source at all) falls back to the clock. */
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    return v;
}

/* wgn's entropy: given (digits at `at`, length l) or drawn (l = 0); kept
 * as its digits (for the text) and modulo 2^64 (the noise's key). */
static bool set_entropy(parser *ps, cbf_dsim_term *t, size_t at, size_t l)
{
    char drawn[24];
    const char *d = ps->s + at;
    if (!l) {
        snprintf(drawn, sizeof drawn, "%llu", (unsigned long long)ps->entropy(ps->ctx));
        d = drawn;
        l = strlen(drawn);
    } else if (l > MAX_ENTROPY_DIGITS) {
        fail(ps, at, "wgn: entropy of %zu digits; at most %d", l, MAX_ENTROPY_DIGITS);
        return false;
    }
    if ((t->entropy_at = keep_digits(ps, d, l)) < 0) {
        oom(ps);
        return false;
    }
    uint64_t e = 0;
    for (const char *c = ps->p->strings + t->entropy_at; *c; c++)
        e = e * 10 + (uint64_t)(*c - '0');   /* wraps: the value modulo 2^64 */
    t->entropy = e;
    return true;
}

/* The functions: name, the arguments as written in messages, and each
 * argument's kind: R a number, I an unsigned integer, S a signed one, E a
 * signal; a lower-case letter is optional (and last). */
static const struct fn_decl {
    const char *name, *usage, *kinds;
    cbf_dsim_op op;
    const char *names[CBF_DSIM_MAX_ARGS];
} fns[] = {
    {"cw", "cw(amplitude, frequency)", "RR", CBF_DSIM_CW, {"amplitude", "frequency"}},
    {"multicw", "multicw(m, amplitude0, amplitude_step, frequency0, frequency_step)", "IRRRR",
     CBF_DSIM_MULTICW, {"m", "amplitude0", "amplitude_step", "frequency0", "frequency_step"}},
    {"comb", "comb(amplitude, frequency)", "RR", CBF_DSIM_COMB, {"amplitude", "frequency"}},
    {"wgn", "wgn(std[, entropy])", "Ri", CBF_DSIM_WGN, {"std", "entropy"}},
    {"delay", "delay(signal, delay)", "ES", CBF_DSIM_DELAY, {"signal", "delay"}},
    {"nodither", "nodither(signal)", "E", CBF_DSIM_NODITHER, {"signal"}},
};

static int parse_call(parser *ps, const struct fn_decl *f, size_t at)
{
    cbf_dsim_term t = term_of(f->op);
    if (!expect(ps, '(', f->usage, "after the name"))
        return -1;
    if (++ps->nest > MAX_NEST)
        return fail(ps, at, "calls and parentheses nested more than %d deep", MAX_NEST);
    size_t entropy_at = 0, entropy_len = 0;
    const int n = (int)strlen(f->kinds);
    for (int k = 0; k < n; k++) {
        char kind = f->kinds[k];
        if (k > 0) {
            if (kind >= 'a' && kind <= 'z' && peek(ps) == ')')
                break;
            char why[64];
            snprintf(why, sizeof why, "before %s", f->names[k]);
            if (!expect(ps, ',', f->usage, why))
                return -1;
        }
        kind = (char)(kind & ~0x20);   /* optional or not, read the same way */
        if (kind == 'E') {
            size_t oat;
            operand o;
            o.term = parse_expr(ps, &oat);
            o.at = oat;
            /* delay and nodither take a signal that is not a nodither. */
            if (operand_ok(ps, o) < 0)
                return -1;
            t.a = o.term;
            continue;
        }
        bool whole = false;
        double v;
        skip(ps);
        const size_t vat = ps->i;
        const size_t l = read_number(ps, kind, f->names[k], f->usage, &v, &whole);
        if (!l)
            return -1;
        if (f->op == CBF_DSIM_WGN && k == 1) {
            entropy_at = vat;
            entropy_len = l;
            continue;
        }
        if (f->op == CBF_DSIM_DELAY) {
            errno = 0;
            long long d = strtoll(ps->s + vat, NULL, 10);
            if (errno || d > (INT64_C(1) << 62) || d < -(INT64_C(1) << 62))
                return fail(ps, vat, "%s: delay: %.*s samples is out of range", f->usage, (int)l,
                            ps->s + vat);
            t.delay = d;
            continue;
        }
        if (f->op == CBF_DSIM_MULTICW && k == 0 && v > CBF_DSIM_MAX_MULTICW)
            return fail(ps, vat, "%s: m: %.*s tones; at most %d", f->usage, (int)l, ps->s + vat,
                        CBF_DSIM_MAX_MULTICW);
        t.arg[t.n_args] = v;
        t.whole |= (uint8_t)(whole << t.n_args);
        t.n_args++;
    }
    if (!expect(ps, ')', f->usage, "after the last argument"))
        return -1;
    ps->nest--;
    if (f->op == CBF_DSIM_WGN && !set_entropy(ps, &t, entropy_at, entropy_len))
        return -1;
    return add_term(ps, &t, at);
}

static int parse_atom(parser *ps, size_t *at_out)
{
    skip(ps);
    const size_t at = ps->i;
    *at_out = at;
    bool whole;
    const char c = at < ps->n ? ps->s[at] : '\0';
    if (c == '(') {
        ps->i++;
        if (++ps->nest > MAX_NEST)
            return fail(ps, at, "calls and parentheses nested more than %d deep", MAX_NEST);
        size_t inner;
        int t = parse_expr(ps, &inner);
        if (t < 0 || !expect(ps, ')', "(...)", "to close the parenthesis"))
            return -1;
        ps->nest--;
        return t;
    }
    if (number_len(ps, at, true, &whole)) {
        cbf_dsim_term t = term_of(CBF_DSIM_CONST);
        size_t l = read_number(ps, 'R', "constant", "signal", &t.arg[0], &whole);
        if (!l)
            return -1;
        t.n_args = 1;   /* katgpucbf keeps a constant as a float: never "whole" */
        return add_term(ps, &t, at);
    }
    const size_t l = ident_len(ps, at);
    if (!l) {
        char f[48];
        found(ps, at, f, sizeof f);
        return fail(ps, at, "expected a signal (a number, cw(...), multicw(...), comb(...), "
                    "wgn(...), delay(...), nodither(...), a variable or '('), found %s", f);
    }
    ps->i = at + l;
    if (peek(ps) == '(') {
        for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++)
            if (strlen(fns[k].name) == l && !memcmp(fns[k].name, ps->s + at, l))
                return parse_call(ps, &fns[k], at);
        return fail(ps, at, "unknown function '%.*s' (cw, multicw, comb, wgn, delay, nodither)",
                    (int)l, ps->s + at);
    }
    for (int k = ps->n_vars - 1; k >= 0; k--)
        if (ps->vars[k].len == l && !memcmp(ps->vars[k].name, ps->s + at, l))
            return ps->vars[k].term;
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++)
        if (strlen(fns[k].name) == l && !memcmp(fns[k].name, ps->s + at, l))
            return fail(ps, at, "unknown variable '%.*s' (the function is written %s)", (int)l,
                        ps->s + at, fns[k].usage);
    return fail(ps, at, "unknown variable '%.*s' (define it first: %.*s = ...;)", (int)l,
                ps->s + at, (int)l, ps->s + at);
}

static int combine(parser *ps, cbf_dsim_op op, operand a, operand b)
{
    if (operand_ok(ps, a) < 0 || operand_ok(ps, b) < 0)
        return -1;
    cbf_dsim_term t = term_of(op);
    t.a = a.term;
    t.b = b.term;
    return add_term(ps, &t, a.at);
}

static int parse_product(parser *ps, size_t *at)
{
    operand a;
    a.term = parse_atom(ps, at);
    a.at = *at;
    while (a.term >= 0 && peek(ps) == '*') {
        ps->i++;
        operand b;
        b.term = parse_atom(ps, &b.at);
        if (b.term < 0)
            return -1;
        a.term = combine(ps, CBF_DSIM_MUL, a, b);
    }
    return a.term;
}

static int parse_expr(parser *ps, size_t *at)
{
    operand a;
    a.term = parse_product(ps, at);
    a.at = *at;
    char c;
    while (a.term >= 0 && ((c = peek(ps)) == '+' || c == '-')) {
        ps->i++;
        operand b;
        b.term = parse_product(ps, &b.at);
        if (b.term < 0)
            return -1;
        a.term = combine(ps, c == '+' ? CBF_DSIM_ADD : CBF_DSIM_SUB, a, b);
    }
    return a.term;
}

/* NAME = EXPR, or EXPR (the next output). */
static int parse_statement(parser *ps)
{
    skip(ps);
    const size_t at = ps->i, l = ident_len(ps, at);
    if (l) {
        ps->i = at + l;
        if (peek(ps) == '=') {
            ps->i++;
            size_t eat;
            int t = parse_expr(ps, &eat);
            if (t < 0)
                return -1;
            /* A later definition of the name is the one later uses see. */
            if (!grow((void **)&ps->vars, &ps->cap_vars, ps->n_vars + 1, sizeof *ps->vars))
                return oom(ps);
            ps->vars[ps->n_vars++] = (var){ps->s + at, l, t};
            return 0;
        }
        ps->i = at;
    }
    size_t eat;
    int t = parse_expr(ps, &eat);
    if (t < 0)
        return -1;
    cbf_dsim_prog *p = ps->p;
    if (!grow((void **)&p->outputs, &ps->cap_outputs, p->n_outputs + 1, sizeof *p->outputs))
        return oom(ps);
    p->outputs[p->n_outputs++] = t;
    return 0;
}

int cbf_dsim_prog_parse(const char *text, cbf_dsim_entropy_fn entropy, void *ctx,
                        cbf_dsim_prog **out, cbf_error *err)
{
    parser ps = {.s = text, .n = strlen(text), .entropy = entropy ? entropy : cbf_dsim_system_entropy,
                 .ctx = ctx, .err = err};
    ps.p = calloc(1, sizeof *ps.p);
    if (!ps.p)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    ps.p->refs = 1;
    int rc = 0;
    while (peek(&ps) != '\0') {
        if (parse_statement(&ps) < 0 || !expect(&ps, ';', "statement", "to end the statement")) {
            rc = err && err->code ? err->code : CBF_EINVAL;
            break;
        }
    }
    free(ps.vars);
    free(ps.depth);
    if (rc) {
        cbf_dsim_prog_unref(ps.p);
        return rc;
    }
    *out = ps.p;
    return 0;
}

void cbf_dsim_prog_ref(cbf_dsim_prog *p)
{
    if (p)
        p->refs++;
}

void cbf_dsim_prog_unref(cbf_dsim_prog *p)
{
    if (!p || --p->refs > 0)
        return;
    free(p->terms);
    free(p->outputs);
    free(p->strings);
    free(p);
}

bool cbf_dsim_prog_nodither(const cbf_dsim_prog *p, int o)
{
    return p->terms[p->outputs[o]].op == CBF_DSIM_NODITHER;
}
