/* params.c: validated parameter values and their accessors.
 *
 * Values are checked once, at load time, against the plugin's declaration,
 * so that a plugin's init reads plain C values and every mistake in a YAML
 * file is reported with its place before anything starts.
 *
 * Numbers: YAML gives scalars as text; we read them ourselves so that an
 * INT parameter can be written the way engineers write sample counts and
 * rates: 1048576, 1_048_576, 0x100000, 2**20, 1712e6 or 1.5e3. A float-style
 * integer is accepted only when it is exactly a whole number (read in exact
 * decimal, not through a double), so 1e-3 or 2.5 for an INT are errors,
 * never silently rounded. Quoted scalars ("16") are strings, as YAML says. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "params_priv.h"

typedef struct pval {
    char *name;
    cbf_param_type type;
    bool given;
    char *where;
    char *text;
    int64_t i;
    double f;
    bool b;
    char *s;
    size_t n;              /* list length, or number of records */
    int64_t *ilist;
    double *flist;         /* FLOAT_LIST; RECORDS: n * n_fields, record-major */
    size_t n_fields;
    char **fields;
} pval;

struct cbf_params {
    size_t n;
    pval *v;
    char *node_where;
};

/* A RECORDS field list, "name" or "name=default", comma separated. */
typedef struct fieldspec {
    size_t n;
    char **name;
    double *def;
    int *has_def;
} fieldspec;

/* Where reading a value failed: the offending node (for its place) and why. */
typedef struct fail {
    const yaml_node_t *at;
    char why[512];
} fail;

/* ---- small helpers ---- */

static int failf(fail *f, const yaml_node_t *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int failf(fail *f, const yaml_node_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
    f->at = at;
    return -1;
}

/* "item [2]" + ": " + the existing reason, for values inside lists. */
static void why_prefix(fail *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void why_prefix(fail *f, const char *fmt, ...)
{
    char head[128], old[sizeof f->why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, f->why, sizeof old);
    snprintf(f->why, sizeof f->why, "%s: %s", head, old);
}

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 64) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static void fmt_double(double v, char *buf, size_t n)
{
    if (isnan(v)) {
        snprintf(buf, n, ".nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-.inf" : ".inf");
        return;
    }
    /* Shortest form that reads back to the same double. */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static const char *scalar_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int is_plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

int cbf_yaml_is_null(const yaml_node_t *n)
{
    if (!is_plain(n))
        return 0;
    const char *t = scalar_text(n);
    return !t[0] || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") ||
           !strcmp(t, "NULL");
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return cbf_yaml_is_null(n) ? "nothing" : "a scalar";
    }
}

/* Whether text nests lists and mappings no deeper than CBF_YAML_MAX_DEPTH.
 * libyaml's scanner checks every open flow level at each token, so 100,000
 * '[' take it a minute (issue 31): a request value is first read as events,
 * which stop at the first level too deep, before the document is built.
 * Text with no more '[' and '{' than the bound cannot nest deeper in flow
 * style and skips the pass (block nesting costs libyaml nothing). */
static int yaml_depth_ok(const char *text, size_t len, char *why, size_t wl)
{
    size_t opens = 0;
    for (size_t i = 0; i < len && opens <= CBF_YAML_MAX_DEPTH; i++)
        opens += text[i] == '[' || text[i] == '{';
    if (opens <= CBF_YAML_MAX_DEPTH)
        return 0;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, rc = 0;
    for (bool end = false; !end && !rc;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev))
            break;   /* the load that follows says what is wrong, and where */
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > CBF_YAML_MAX_DEPTH) {
                snprintf(why, wl, "lists and mappings nested deeper than %d levels (line %zu, column %zu)",
                         CBF_YAML_MAX_DEPTH, ev.start_mark.line + 1, ev.start_mark.column + 1);
                rc = -1;
            }
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        end = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

int cbf_yaml_load_text(const char *text, yaml_document_t *doc, char *why, size_t wl)
{
    if (yaml_depth_ok(text, strlen(text), why, wl))
        return -1;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        snprintf(why, wl, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
    int ok = yaml_parser_load(&p, doc);
    if (!ok)
        snprintf(why, wl, "%s", p.problem ? p.problem : "not valid YAML");
    yaml_parser_delete(&p);
    if (!ok)
        return -1;
    if (!yaml_document_get_root_node(doc)) {
        yaml_document_delete(doc);
        snprintf(why, wl, "no value");
        return -1;
    }
    return 0;
}

/* ---- numbers ---- */

/* Copies text to buf without '_' digit group separators (1_048_576). */
static int strip_separators(const char *t, char *buf, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; t[i]; i++) {
        if (t[i] == '_' && i > 0 && isalnum((unsigned char)t[i - 1]) &&
            isalnum((unsigned char)t[i + 1]))
            continue;
        if (k + 1 >= n)
            return -1;
        buf[k++] = t[i];
    }
    buf[k] = '\0';
    return k ? 0 : -1;
}

/* Exact decimal reading of [+-]digits[.digits][e[+-]digits] as an int64. */
static int parse_decimal(const char *s, int64_t *out)
{
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = (*p++ == '-');
    char dig[128];
    size_t nd = 0;
    long exp10 = 0;
    int any = 0, point = 0;
    for (; *p && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.' && !point) {
            point = 1;
            continue;
        }
        if (!isdigit((unsigned char)*p))
            return -1;
        any = 1;
        if (point)
            exp10--;
        if (nd == 0 && *p == '0')
            continue;
        if (nd == sizeof dig)
            return -3;
        dig[nd++] = *p;
    }
    if (!any)
        return -1;
    if (*p) {
        p++;
        const char *q = (*p == '+' || *p == '-') ? p + 1 : p;
        if (!isdigit((unsigned char)*q))
            return -1;
        char *end;
        errno = 0;
        long e = strtol(p, &end, 10);
        if (*end)
            return -1;
        if (errno || e > 4000 || e < -4000) {
            if (nd == 0) {
                *out = 0;
                return 0;
            }
            return e > 0 ? -3 : -2;
        }
        exp10 += e;
    }
    while (exp10 < 0 && nd > 0 && dig[nd - 1] == '0') {
        nd--;
        exp10++;
    }
    if (nd == 0) {
        *out = 0;
        return 0;
    }
    if (exp10 < 0)
        return -2;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d = (uint64_t)(dig[i] - '0');
        if (v > (limit - d) / 10)
            return -3;
        v = v * 10 + d;
    }
    for (; exp10 > 0; exp10--) {
        if (v > limit / 10)
            return -3;
        v *= 10;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return 0;
}

static int parse_power(const char *s, const char *op, int64_t *out)
{
    char base_txt[128];
    size_t bl = (size_t)(op - s);
    if (bl == 0 || bl >= sizeof base_txt)
        return -1;
    memcpy(base_txt, s, bl);
    base_txt[bl] = '\0';
    int64_t base, ex;
    int rc = parse_decimal(base_txt, &base);
    if (rc)
        return rc;
    if (!isdigit((unsigned char)op[2]))
        return -1;
    rc = parse_decimal(op + 2, &ex);
    if (rc)
        return rc;
    if (ex > 64) {
        if (base > 1 || base < -1)
            return -3;
        ex = 64 + (ex % 2);   /* 0, 1 and -1 only need the parity */
    }
    int64_t v = 1;
    for (int64_t k = 0; k < ex; k++)
        if (__builtin_mul_overflow(v, base, &v))
            return -3;
    *out = v;
    return 0;
}

int cbf_parse_int(const char *text, int64_t *out)
{
    char s[256];
    if (strip_separators(text, s, sizeof s))
        return -1;
    const char *op = strstr(s, "**");
    if (op)
        return parse_power(s, op, out);
    const char *p = s + ((s[0] == '+' || s[0] == '-') ? 1 : 0);
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        if (!isxdigit((unsigned char)p[2]))
            return -1;
        char *end;
        errno = 0;
        unsigned long long u = strtoull(p + 2, &end, 16);
        if (*end)
            return -1;
        int neg = s[0] == '-';
        if (errno || u > (unsigned long long)INT64_MAX + (neg ? 1u : 0u))
            return -3;
        *out = neg ? (int64_t)(0 - (uint64_t)u) : (int64_t)u;
        return 0;
    }
    return parse_decimal(s, out);
}

static int is_float_syntax(const char *s)
{
    const char *p = s + ((s[0] == '+' || s[0] == '-') ? 1 : 0);
    int digits = 0;
    while (isdigit((unsigned char)*p))
        p++, digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            digits++;
    if (!digits)
        return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return *p == '\0';
}

int cbf_parse_float(const char *text, double *out)
{
    char s[256];
    if (strip_separators(text, s, sizeof s))
        return -1;
    const char *p = s + ((s[0] == '+' || s[0] == '-') ? 1 : 0);
    if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF")) {
        *out = s[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN")) {
        *out = NAN;
        return 0;
    }
    if (strstr(s, "**")) {
        int64_t v;
        int rc = cbf_parse_int(s, &v);
        if (rc)
            return rc;
        *out = (double)v;
        return 0;
    }
    if (!is_float_syntax(s))
        return -1;
    errno = 0;
    double v = strtod(s, NULL);
    if (errno == ERANGE && isinf(v))
        return -3;
    *out = v;
    return 0;
}

/* ---- suggestions ---- */

/* Optimal string alignment distance, case-insensitive: a transposed pair
 * ("nodse") costs one edit, as typing mistakes usually do. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return SIZE_MAX;
    unsigned char d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            unsigned best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1u < best)
                best = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < best)
                best = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1u < best)
                best = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned char)best;
        }
    }
    return d[la][lb];
}

static int is_prefix(const char *p, const char *s)
{
    return strlen(p) >= 2 && !strncasecmp(p, s, strlen(p));
}

const char *cbf_closest_name(const char *name, const char *const *cands, size_t n)
{
    size_t limit = strlen(name) / 3;
    if (limit < 1)
        limit = 1;
    if (limit > 3)
        limit = 3;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i])
            continue;
        size_t d = edit_distance(name, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    /* "input" for "in", "tone" for "tones": one name shortened or lengthened */
    for (size_t i = 0; i < n && !best; i++)
        if (cands[i] && (is_prefix(cands[i], name) || is_prefix(name, cands[i])))
            best = cands[i];
    return best;
}

/* ---- record field lists ---- */

static void fieldspec_free(fieldspec *fs)
{
    for (size_t i = 0; fs->name && i < fs->n; i++)
        free(fs->name[i]);
    free(fs->name);
    free(fs->def);
    free(fs->has_def);
    memset(fs, 0, sizeof *fs);
}

static int fieldspec_parse(const char *spec, fieldspec *fs, char *why, size_t wl)
{
    memset(fs, 0, sizeof *fs);
    if (!spec || !spec[0]) {
        snprintf(why, wl, "RECORDS without a field list");
        return -1;
    }
    size_t cap = 1;
    for (const char *c = spec; *c; c++)
        cap += *c == ',';
    if (cap > 64) {
        snprintf(why, wl, "more than 64 fields in '%s'", spec);
        return -1;
    }
    fs->name = calloc(cap, sizeof *fs->name);
    fs->def = calloc(cap, sizeof *fs->def);
    fs->has_def = calloc(cap, sizeof *fs->has_def);
    if (!fs->name || !fs->def || !fs->has_def) {
        fieldspec_free(fs);
        snprintf(why, wl, "out of memory");
        return -1;
    }
    const char *p = spec;
    for (size_t k = 0; k < cap; k++) {
        size_t len = strcspn(p, ",");
        char item[128];
        if (len >= sizeof item)
            len = sizeof item - 1;
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (p[len] == ',');
        char *eq = strchr(item, '=');
        if (eq)
            *eq = '\0';
        char *nm = item;
        while (isspace((unsigned char)*nm))
            nm++;
        for (char *e = nm + strlen(nm); e > nm && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        if (!nm[0]) {
            fieldspec_free(fs);
            snprintf(why, wl, "empty field name in '%s'", spec);
            return -1;
        }
        for (size_t j = 0; j < fs->n; j++)
            if (!strcmp(fs->name[j], nm)) {
                snprintf(why, wl, "field '%s' listed twice in '%s'", nm, spec);
                fieldspec_free(fs);
                return -1;
            }
        if (eq) {
            char *d = eq + 1;
            while (isspace((unsigned char)*d))
                d++;
            for (char *e = d + strlen(d); e > d && isspace((unsigned char)e[-1]);)
                *--e = '\0';
            if (cbf_parse_float(d, &fs->def[fs->n])) {
                snprintf(why, wl, "field '%s' has default '%s', which is not a number", nm, d);
                fieldspec_free(fs);
                return -1;
            }
            fs->has_def[fs->n] = 1;
        }
        fs->name[fs->n] = strdup(nm);
        if (!fs->name[fs->n]) {
            fieldspec_free(fs);
            snprintf(why, wl, "out of memory");
            return -1;
        }
        fs->n++;
    }
    return 0;
}

/* ---- reading one value against its declaration ---- */

static const char *type_word(cbf_param_type t)
{
    switch (t) {
    case CBF_PARAM_INT: return "integer";
    case CBF_PARAM_FLOAT: return "number";
    case CBF_PARAM_BOOL: return "true or false";
    case CBF_PARAM_STRING: return "string";
    case CBF_PARAM_CHOICE: return "choice";
    case CBF_PARAM_INT_LIST: return "list of integers";
    case CBF_PARAM_FLOAT_LIST: return "list of numbers";
    case CBF_PARAM_RECORDS: return "list of records";
    }
    return "?";
}

static void fmt_range(const cbf_param_decl *d, char *buf, size_t n)
{
    char lo[40], hi[40];
    fmt_double(d->min, lo, sizeof lo);
    fmt_double(d->max, hi, sizeof hi);
    snprintf(buf, n, "[%s, %s]", lo, hi);
}

static int scalar_number(const yaml_node_t *n, int want_int, int64_t *iv, double *fv, fail *f)
{
    const char *word = want_int ? "an integer" : "a number";
    if (n->type != YAML_SCALAR_NODE || cbf_yaml_is_null(n))
        return failf(f, n, "expected %s, got %s", word, kind_name(n));
    if (!is_plain(n))
        return failf(f, n, "expected %s, got the quoted string \"%s\" (numbers are written without quotes)",
                     word, scalar_text(n));
    const char *t = scalar_text(n);
    int rc = want_int ? cbf_parse_int(t, iv) : cbf_parse_float(t, fv);
    if (rc == -2)
        return failf(f, n, "expected an integer, got '%s', which is not a whole number", t);
    if (rc == -3)
        return failf(f, n, "'%s' is too large for %s", t, want_int ? "a 64-bit integer" : "a double");
    if (rc)
        return failf(f, n, "expected %s, got '%s'", word, t);
    return 0;
}

static bool float_in_range(const cbf_param_decl *d, double v)
{
    return !d->has_range || (v >= d->min && v <= d->max);
}

/* An integer against the range's bounds as integers: near 2^63 a double
 * cannot tell 9200000000000000001 from the bound 9.2e18. */
static bool int_in_range(const cbf_param_decl *d, int64_t v)
{
    if (!d->has_range)
        return true;
    /* 2^63 as a double; bounds beyond int64 clamp to its ends. */
    const double top = 9223372036854775808.0;
    int64_t lo = d->min <= -top ? INT64_MIN : (int64_t)ceil(d->min);
    int64_t hi = d->max >= top ? INT64_MAX : (int64_t)floor(d->max);
    return v >= lo && v <= hi;
}

static int in_range(const cbf_param_decl *d, double v, const yaml_node_t *n, fail *f)
{
    if (!float_in_range(d, v)) {
        char r[96];
        fmt_range(d, r, sizeof r);
        return failf(f, n, "%s is out of range %s", scalar_text(n), r);
    }
    return 0;
}

static int in_range_int(const cbf_param_decl *d, int64_t v, const yaml_node_t *n, fail *f)
{
    if (!int_in_range(d, v)) {
        char r[96];
        fmt_range(d, r, sizeof r);
        return failf(f, n, "%s is out of range %s", scalar_text(n), r);
    }
    return 0;
}

static int read_choice(const cbf_param_decl *d, const yaml_node_t *n, pval *pv, fail *f)
{
    if (n->type != YAML_SCALAR_NODE || cbf_yaml_is_null(n))
        return failf(f, n, "expected one of %s, got %s", d->choices, kind_name(n));
    const char *t = scalar_text(n);
    const char *cands[64];
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", d->choices);
    size_t nc = 0;
    for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok && nc < 64;
         tok = strtok_r(NULL, "|", &save)) {
        if (!strcmp(tok, t)) {
            pv->s = strdup(t);
            return pv->s ? 0 : failf(f, n, "out of memory");
        }
        cands[nc++] = tok;
    }
    const char *near = cbf_closest_name(t, cands, nc);
    return failf(f, n, "'%s' is not one of %s%s%s%s", t, d->choices, near ? " (did you mean '" : "",
                 near ? near : "", near ? "'?)" : "");
}

static int read_records(const cbf_param_decl *d, yaml_document_t *doc, const yaml_node_t *n,
                        pval *pv, fail *f)
{
    fieldspec fs;
    if (fieldspec_parse(d->choices, &fs, f->why, sizeof f->why)) {
        f->at = n;
        return -1;
    }
    size_t nrec = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    pv->n_fields = fs.n;
    pv->fields = fs.name;   /* taken over by the value */
    fs.name = NULL;
    pv->flist = calloc(nrec * fs.n + 1, sizeof *pv->flist);
    int rc = pv->flist ? 0 : failf(f, n, "out of memory");
    for (size_t r = 0; r < nrec && !rc; r++) {
        yaml_node_t *rec = yaml_document_get_node(doc, n->data.sequence.items.start[r]);
        if (rec->type != YAML_MAPPING_NODE) {
            rc = failf(f, rec, "item [%zu]: expected a record {%s}, got %s", r, d->choices,
                       kind_name(rec));
            break;
        }
        unsigned char seen[64] = {0};
        for (yaml_node_pair_t *pr = rec->data.mapping.pairs.start;
             pr < rec->data.mapping.pairs.top && !rc; pr++) {
            yaml_node_t *k = yaml_document_get_node(doc, pr->key);
            yaml_node_t *v = yaml_document_get_node(doc, pr->value);
            const char *kn = k->type == YAML_SCALAR_NODE ? scalar_text(k) : "";
            size_t fi = 0;
            while (fi < pv->n_fields && strcmp(pv->fields[fi], kn))
                fi++;
            if (fi == pv->n_fields) {
                const char *near = cbf_closest_name(kn, (const char *const *)pv->fields, pv->n_fields);
                rc = failf(f, k, "item [%zu]: unknown field '%s' (fields: %s)%s%s%s", r, kn,
                           d->choices, near ? "; did you mean '" : "", near ? near : "",
                           near ? "'?" : "");
            } else if (seen[fi]) {
                rc = failf(f, k, "item [%zu]: field '%s' is given twice", r, kn);
            } else {
                seen[fi] = 1;
                rc = scalar_number(v, 0, NULL, &pv->flist[r * fs.n + fi], f);
                if (rc)
                    why_prefix(f, "item [%zu] field '%s'", r, kn);
            }
        }
        for (size_t fi = 0; fi < pv->n_fields && !rc; fi++) {
            if (seen[fi])
                continue;
            if (!fs.has_def[fi])
                rc = failf(f, rec, "item [%zu]: field '%s' is required", r, pv->fields[fi]);
            else
                pv->flist[r * fs.n + fi] = fs.def[fi];
        }
    }
    pv->n = nrec;
    fieldspec_free(&fs);
    return rc;
}

static int read_bool(const yaml_node_t *n, bool *out, fail *f)
{
    if (n->type == YAML_SCALAR_NODE && is_plain(n)) {
        const char *t = scalar_text(n);
        if (!strcmp(t, "true") || !strcmp(t, "True") || !strcmp(t, "TRUE")) {
            *out = true;
            return 0;
        }
        if (!strcmp(t, "false") || !strcmp(t, "False") || !strcmp(t, "FALSE")) {
            *out = false;
            return 0;
        }
        return failf(f, n, "expected true or false, got '%s'", t);
    }
    if (n->type == YAML_SCALAR_NODE)
        return failf(f, n, "expected true or false, got the quoted string \"%s\"", scalar_text(n));
    return failf(f, n, "expected true or false, got %s", kind_name(n));
}

static int read_list(const cbf_param_decl *d, yaml_document_t *doc, const yaml_node_t *n,
                     pval *pv, fail *f)
{
    int want_int = d->type == CBF_PARAM_INT_LIST;
    size_t len = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (want_int)
        pv->ilist = calloc(len + 1, sizeof *pv->ilist);
    else
        pv->flist = calloc(len + 1, sizeof *pv->flist);
    if (!pv->ilist && !pv->flist)
        return failf(f, n, "out of memory");
    pv->n = len;
    for (size_t i = 0; i < len; i++) {
        yaml_node_t *it = yaml_document_get_node(doc, n->data.sequence.items.start[i]);
        int rc = want_int ? scalar_number(it, 1, &pv->ilist[i], NULL, f)
                          : scalar_number(it, 0, NULL, &pv->flist[i], f);
        if (!rc)
            rc = want_int ? in_range_int(d, pv->ilist[i], it, f) : in_range(d, pv->flist[i], it, f);
        if (rc) {
            why_prefix(f, "item [%zu]", i);
            return rc;
        }
    }
    return 0;
}

static int read_value(const cbf_param_decl *d, yaml_document_t *doc, const yaml_node_t *n,
                      pval *pv, fail *f)
{
    switch (d->type) {
    case CBF_PARAM_INT:
        if (scalar_number(n, 1, &pv->i, NULL, f))
            return -1;
        return in_range_int(d, pv->i, n, f);
    case CBF_PARAM_FLOAT:
        if (scalar_number(n, 0, NULL, &pv->f, f))
            return -1;
        return in_range(d, pv->f, n, f);
    case CBF_PARAM_BOOL:
        return read_bool(n, &pv->b, f);
    case CBF_PARAM_STRING:
        if (n->type != YAML_SCALAR_NODE || cbf_yaml_is_null(n))
            return failf(f, n, "expected a string, got %s", kind_name(n));
        pv->s = strdup(scalar_text(n));
        return pv->s ? 0 : failf(f, n, "out of memory");
    case CBF_PARAM_CHOICE:
        return read_choice(d, n, pv, f);
    case CBF_PARAM_INT_LIST:
    case CBF_PARAM_FLOAT_LIST:
    case CBF_PARAM_RECORDS:
        if (n->type != YAML_SEQUENCE_NODE)
            return failf(f, n, "expected a %s such as %s, got %s", type_word(d->type),
                         d->type == CBF_PARAM_RECORDS ? "[{...}, {...}]" : "[1, 2]", kind_name(n));
        return d->type == CBF_PARAM_RECORDS ? read_records(d, doc, n, pv, f)
                                            : read_list(d, doc, n, pv, f);
    }
    return failf(f, n, "parameter type %d is unknown", (int)d->type);
}

static int read_default(const cbf_param_decl *d, pval *pv, fail *f)
{
    if (d->type == CBF_PARAM_STRING && !d->def[0]) {
        pv->s = strdup("");
        return pv->s ? 0 : failf(f, NULL, "out of memory");
    }
    yaml_document_t doc;
    if (cbf_yaml_load_text(d->def, &doc, f->why, sizeof f->why))
        return -1;
    int rc = read_value(d, &doc, yaml_document_get_root_node(&doc), pv, f);
    yaml_document_delete(&doc);
    return rc;
}

/* ---- text form ---- */

static void text_string(sbuf *b, const char *s)
{
    int plain = s[0] != '\0';
    for (const char *c = s; *c && plain; c++)
        plain = isalnum((unsigned char)*c) || strchr("_./+-", *c);
    double dummy;
    if (plain && (!cbf_parse_float(s, &dummy) || !strcmp(s, "true") || !strcmp(s, "false") ||
                  !strcmp(s, "null")))
        plain = 0;
    if (plain) {
        sb_printf(b, "%s", s);
        return;
    }
    sb_printf(b, "\"");
    for (const char *c = s; *c; c++)
        sb_printf(b, (*c == '"' || *c == '\\') ? "\\%c" : "%c", *c);
    sb_printf(b, "\"");
}

static int make_text(pval *pv)
{
    sbuf b = {0};
    char num[48];
    switch (pv->type) {
    case CBF_PARAM_INT: sb_printf(&b, "%" PRId64, pv->i); break;
    case CBF_PARAM_FLOAT:
        fmt_double(pv->f, num, sizeof num);
        sb_printf(&b, "%s", num);
        break;
    case CBF_PARAM_BOOL: sb_printf(&b, "%s", pv->b ? "true" : "false"); break;
    case CBF_PARAM_STRING:
    case CBF_PARAM_CHOICE: text_string(&b, pv->s); break;
    case CBF_PARAM_INT_LIST:
    case CBF_PARAM_FLOAT_LIST:
        sb_printf(&b, "[");
        for (size_t i = 0; i < pv->n; i++) {
            if (pv->type == CBF_PARAM_INT_LIST)
                snprintf(num, sizeof num, "%" PRId64, pv->ilist[i]);
            else
                fmt_double(pv->flist[i], num, sizeof num);
            sb_printf(&b, "%s%s", i ? ", " : "", num);
        }
        sb_printf(&b, "]");
        break;
    case CBF_PARAM_RECORDS:
        sb_printf(&b, "[");
        for (size_t r = 0; r < pv->n; r++) {
            sb_printf(&b, "%s{", r ? ", " : "");
            for (size_t k = 0; k < pv->n_fields; k++) {
                fmt_double(pv->flist[r * pv->n_fields + k], num, sizeof num);
                sb_printf(&b, "%s%s: %s", k ? ", " : "", pv->fields[k], num);
            }
            sb_printf(&b, "}");
        }
        sb_printf(&b, "]");
        break;
    }
    if (b.oom) {
        free(b.s);
        return -1;
    }
    pv->text = b.s;
    return 0;
}

/* ---- building and freeing ---- */

static void pval_free(pval *pv)
{
    free(pv->name);
    free(pv->where);
    free(pv->text);
    free(pv->s);
    free(pv->ilist);
    free(pv->flist);
    for (size_t k = 0; k < pv->n_fields; k++)
        free(pv->fields[k]);
    free(pv->fields);
}

void cbf_params_free(cbf_params *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        pval_free(&p->v[i]);
    free(p->v);
    free(p->node_where);
    free(p);
}

static int check_keys(const cbf_param_decl *decls, int n_decls, const cbf_kv *kv, size_t n_kv,
                      const cbf_params_ctx *ctx, cbf_error *err)
{
    for (size_t i = 0; i < n_kv; i++) {
        int found = 0;
        for (int j = 0; j < n_decls && !found; j++)
            found = !strcmp(decls[j].name, kv[i].key);
        if (!found) {
            const char *cands[256];
            size_t nc = 0;
            for (int j = 0; j < n_decls && nc < 256; j++)
                cands[nc++] = decls[j].name;
            const char *near = cbf_closest_name(kv[i].key, cands, nc);
            if (ctx->request)
                return cbf_error_set(err, CBF_EINVAL, "request '%s' of node '%s' has no argument '%s'%s%s%s",
                                     ctx->request, ctx->node, kv[i].key, near ? "; did you mean '" : "",
                                     near ? near : "", near ? "'?" : "");
            return cbf_error_set(err, CBF_ECONFIG,
                                 "%s: node '%s': plugin '%s' has no parameter '%s'%s%s%s%s%s%s",
                                 kv[i].key_where, ctx->node, ctx->plugin, kv[i].key,
                                 kv[i].override ? " (override '" : "",
                                 kv[i].override ? kv[i].override : "", kv[i].override ? "')" : "",
                                 near ? "; did you mean '" : "", near ? near : "",
                                 near ? "'?" : "");
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(kv[i].key, kv[j].key))
                return cbf_error_set(err, CBF_ECONFIG,
                                     "%s: node '%s': parameter '%s' is given twice (first at %s)",
                                     kv[i].key_where, ctx->node, kv[i].key, kv[j].key_where);
    }
    return 0;
}

static int build_one(const cbf_param_decl *d, const cbf_kv *kv, size_t n_kv,
                     const cbf_params_ctx *ctx, pval *pv, cbf_error *err)
{
    const cbf_kv *src = NULL;
    for (size_t i = 0; i < n_kv && !src; i++)
        if (!strcmp(kv[i].key, d->name))
            src = &kv[i];
    pv->name = strdup(d->name);
    pv->type = d->type;
    pv->where = strdup(src ? src->where : ctx->node_where);
    if (!pv->name || !pv->where)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    fail f = {0};
    if (src && src->parsed) {
        /* A request's list: no text form (nothing records it). */
        pv->given = true;
        pv->n = src->n;
        size_t bytes = (src->n ? src->n : 1) * (src->ilist ? sizeof *pv->ilist : sizeof *pv->flist);
        void *copy = malloc(bytes);
        if (!copy)
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        memcpy(copy, src->ilist ? (void *)src->ilist : (void *)src->flist, bytes);
        if (src->ilist)
            pv->ilist = copy;
        else
            pv->flist = copy;
        return 0;
    } else if (src) {
        pv->given = true;
        if (read_value(d, src->doc, src->value, pv, &f)) {
            if (ctx->request)
                return cbf_error_set(err, CBF_EINVAL, "request '%s' of node '%s': argument '%s': %s",
                                     ctx->request, ctx->node, d->name, f.why);
            char place[CBF_WHERE_MAX];
            if (src->override || !f.at)
                snprintf(place, sizeof place, "%s", src->where);
            else
                snprintf(place, sizeof place, "%s:%zu:%zu", ctx->file, f.at->start_mark.line + 1,
                         f.at->start_mark.column + 1);
            return cbf_error_set(err, CBF_ECONFIG, "%s: node '%s': parameter '%s'%s%s%s: %s",
                                 place, ctx->node, d->name, src->override ? " (override '" : "",
                                 src->override ? src->override : "", src->override ? "')" : "",
                                 f.why);
        }
    } else if (d->def) {
        if (read_default(d, pv, &f))
            return cbf_error_set(err, CBF_EPLUGIN,
                                 "%s: node '%s': plugin '%s': default '%s' of parameter '%s' is not valid: %s",
                                 ctx->node_where, ctx->node, ctx->plugin, d->def, d->name, f.why);
    } else if (ctx->request) {
        return cbf_error_set(err, CBF_EINVAL, "request '%s' of node '%s': argument '%s' is required (%s%s%s)",
                             ctx->request, ctx->node, d->name, type_word(d->type), d->doc ? ": " : "",
                             d->doc ? d->doc : "");
    } else {
        return cbf_error_set(err, CBF_ECONFIG, "%s: node '%s': parameter '%s' is required (%s%s%s)",
                             ctx->node_where, ctx->node, d->name, type_word(d->type),
                             d->doc ? ": " : "", d->doc ? d->doc : "");
    }
    if (make_text(pv))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    return 0;
}

int cbf_params_build(const cbf_param_decl *decls, int n_decls, const cbf_kv *kv, size_t n_kv,
                     const cbf_params_ctx *ctx, cbf_params **out, cbf_error *err)
{
    *out = NULL;
    int rc = check_keys(decls, n_decls, kv, n_kv, ctx, err);
    if (rc)
        return rc;
    cbf_params *p = calloc(1, sizeof *p);
    if (!p || !(p->v = calloc(n_decls > 0 ? (size_t)n_decls : 1, sizeof *p->v)) ||
        !(p->node_where = strdup(ctx->node_where))) {
        cbf_params_free(p);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    p->n = n_decls > 0 ? (size_t)n_decls : 0;
    for (size_t j = 0; j < p->n; j++) {
        rc = build_one(&decls[j], kv, n_kv, ctx, &p->v[j], err);
        if (rc) {
            cbf_params_free(p);
            return rc;
        }
    }
    *out = p;
    return 0;
}

/* The fast path of cbf_params_build_text: "[a, b, ...]" of plain number
 * tokens (only the characters a JSON number has, single spaces around
 * commas) into kv, each through cbf_parse_int/float and the range as
 * read_list checks them. 0 when it read the whole list; nonzero (kv
 * untouched) for anything else, which libyaml then reads. */
static int list_fast(const cbf_param_decl *d, const char *t, cbf_kv *kv)
{
    const bool want_int = d->type == CBF_PARAM_INT_LIST;
    if (d->type != CBF_PARAM_INT_LIST && d->type != CBF_PARAM_FLOAT_LIST)
        return 1;
    while (*t == ' ')
        t++;
    if (*t++ != '[')
        return 1;
    size_t cap = 1;
    for (const char *c = t; *c; c++)
        cap += *c == ',';
    int64_t *il = want_int ? malloc(cap * sizeof *il) : NULL;
    double *fl = want_int ? NULL : malloc(cap * sizeof *fl);
    if (!il && !fl)
        return 1;
    size_t n = 0;
    const char *c = t;
    while (*c == ' ')
        c++;
    bool ok = true;
    if (*c == ']')
        c++;
    else
        for (;;) {
            size_t len = strspn(c, "0123456789.eE+-");
            char tok[64];
            if (!len || len >= sizeof tok || n == cap) {
                ok = false;
                break;
            }
            memcpy(tok, c, len);
            tok[len] = '\0';
            c += len;
            if (want_int ? cbf_parse_int(tok, &il[n]) || !int_in_range(d, il[n])
                         : cbf_parse_float(tok, &fl[n]) || !float_in_range(d, fl[n])) {
                ok = false;
                break;
            }
            n++;
            while (*c == ' ')
                c++;
            if (*c == ']') {
                c++;
                break;
            }
            if (*c++ != ',') {
                ok = false;
                break;
            }
            while (*c == ' ')
                c++;
        }
    while (ok && *c == ' ')
        c++;
    if (!ok || *c) {
        free(il);
        free(fl);
        return 1;
    }
    kv->parsed = true;
    kv->n = n;
    kv->ilist = il;
    kv->flist = fl;
    return 0;
}

/* The keys of cbf_params_build_text, before any value is read: the first
 * one no declaration has, or the first given twice, is refused with
 * check_keys's message, so a request of a million unknown (or repeated)
 * keys costs no allocation per key (issue 31: 8 MB of keys took 2 GB). */
static int keys_first(const cbf_param_decl *decls, int n_decls, const cbf_text_kv *tv, size_t n,
                      const char *where, const cbf_params_ctx *ctx, cbf_error *err)
{
    size_t *first = calloc((size_t)n_decls + 1, sizeof *first);   /* 1 + index of its first key */
    if (!first)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = CBF_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        int j = 0;
        while (j < n_decls && strcmp(decls[j].name, tv[i].key))
            j++;
        if (j < n_decls && !first[j]) {
            first[j] = i + 1;
            continue;
        }
        /* check_keys says what is wrong with it (and the one before, if any) */
        cbf_kv two[2] = {{.key = tv[j < n_decls ? first[j] - 1 : i].key}, {.key = tv[i].key}};
        two[0].override = tv[j < n_decls ? first[j] - 1 : i].origin;
        two[1].override = tv[i].origin;
        for (int k = 0; k < 2; k++)
            snprintf(two[k].key_where, sizeof two[k].key_where, "%s", where);
        size_t skip = j < n_decls ? 0 : 1;   /* unknown: itself alone */
        rc = check_keys(decls, n_decls, two + skip, 2 - skip, ctx, err);
    }
    free(first);
    return rc;
}

int cbf_params_build_text(const cbf_param_decl *decls, int n_decls, const cbf_text_kv *tv, size_t n,
                          const char *where, const cbf_params_ctx *ctx, cbf_params **out,
                          cbf_error *err)
{
    *out = NULL;
    int rc = keys_first(decls, n_decls, tv, n, where, ctx, err);
    if (rc)
        return rc;
    cbf_kv *kv = calloc(n + 1, sizeof *kv);
    yaml_document_t *docs = calloc(n + 1, sizeof *docs);
    size_t nk = 0;
    rc = kv && docs ? CBF_OK : cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (; nk < n && !rc; nk++) {
        char why[256];
        const cbf_param_decl *d = NULL;
        for (int j = 0; j < n_decls && !d; j++)
            if (!strcmp(decls[j].name, tv[nk].key))
                d = &decls[j];
        kv[nk].key = tv[nk].key;
        kv[nk].override = tv[nk].origin;
        snprintf(kv[nk].where, sizeof kv[nk].where, "%s", where);
        snprintf(kv[nk].key_where, sizeof kv[nk].key_where, "%s", where);
        if (ctx->request && d && !list_fast(d, tv[nk].text, &kv[nk]))
            continue;
        if (cbf_yaml_load_text(tv[nk].text, &docs[nk], why, sizeof why)) {
            rc = ctx->request ? cbf_error_set(err, CBF_EINVAL, "request '%s': argument '%s': %s",
                                              ctx->request, tv[nk].key, why)
                              : cbf_error_set(err, CBF_ECONFIG, "%s: parameter '%s' ('%s'): %s", where,
                                              tv[nk].key, tv[nk].origin ? tv[nk].origin : tv[nk].text, why);
            break;
        }
        kv[nk].doc = &docs[nk];
        kv[nk].value = yaml_document_get_root_node(&docs[nk]);
    }
    if (!rc)
        rc = cbf_params_build(decls, n_decls, kv, nk, ctx, out, err);
    for (size_t i = 0; i < nk && docs; i++) {
        free(kv[i].ilist);
        free(kv[i].flist);
        if (!kv[i].parsed)
            yaml_document_delete(&docs[i]);
    }
    free(docs);
    free(kv);
    return rc;
}

/* ---- checking a plugin's declaration table ---- */

static int valid_name(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return 0;
    return 1;
}

static int check_decl(const cbf_param_decl *d, char *why, size_t wl)
{
    if ((unsigned)d->type > (unsigned)CBF_PARAM_RECORDS) {
        snprintf(why, wl, "unknown type %d", (int)d->type);
        return -1;
    }
    if (d->has_range && !(d->min <= d->max)) {
        snprintf(why, wl, "range minimum %g is above its maximum %g", d->min, d->max);
        return -1;
    }
    if (d->type == CBF_PARAM_CHOICE) {
        const char *c = d->choices;
        if (!c || !c[0] || c[0] == '|' || c[strlen(c) - 1] == '|' || strstr(c, "||")) {
            snprintf(why, wl, "CHOICE needs choices written \"a|b|c\", got '%s'", c ? c : "(null)");
            return -1;
        }
    }
    if (d->type == CBF_PARAM_RECORDS) {
        fieldspec fs;
        if (fieldspec_parse(d->choices, &fs, why, wl))
            return -1;
        fieldspec_free(&fs);
    }
    if (d->def) {
        pval pv = {0};
        fail f = {0};
        int rc = read_default(d, &pv, &f);
        pval_free(&pv);
        if (rc) {
            snprintf(why, wl, "default '%s' is not valid: %s", d->def, f.why);
            return -1;
        }
    }
    return 0;
}

int cbf_params_check_decls(const cbf_param_decl *decls, int n_decls, cbf_error *err)
{
    if (n_decls < 0 || (n_decls > 0 && !decls))
        return cbf_error_set(err, CBF_EPLUGIN, "parameter table: %d entries at %p", n_decls,
                             (const void *)decls);
    for (int i = 0; i < n_decls; i++) {
        const cbf_param_decl *d = &decls[i];
        if (!valid_name(d->name))
            return cbf_error_set(err, CBF_EPLUGIN, "parameter %d has an invalid name '%s'", i,
                                 d->name ? d->name : "(null)");
        for (int j = 0; j < i; j++)
            if (!strcmp(decls[j].name, d->name))
                return cbf_error_set(err, CBF_EPLUGIN, "parameter '%s' is declared twice", d->name);
        char why[600];
        if (check_decl(d, why, sizeof why))
            return cbf_error_set(err, CBF_EPLUGIN, "parameter '%s': %s", d->name, why);
    }
    return 0;
}

/* ---- accessors ---- */

static const pval *find(const cbf_params *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->v[i].name, name))
            return &p->v[i];
    return NULL;
}

int64_t cbf_params_int(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    return v && v->type == CBF_PARAM_INT ? v->i : 0;
}

double cbf_params_float(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    if (!v)
        return 0.0;
    return v->type == CBF_PARAM_FLOAT ? v->f : v->type == CBF_PARAM_INT ? (double)v->i : 0.0;
}

bool cbf_params_bool(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    return v && v->type == CBF_PARAM_BOOL && v->b;
}

const char *cbf_params_string(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    return v && (v->type == CBF_PARAM_STRING || v->type == CBF_PARAM_CHOICE) ? v->s : NULL;
}

size_t cbf_params_len(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    return v && v->type >= CBF_PARAM_INT_LIST ? v->n : 0;
}

int64_t cbf_params_int_at(const cbf_params *p, const char *name, size_t i)
{
    const pval *v = find(p, name);
    return v && v->type == CBF_PARAM_INT_LIST && i < v->n ? v->ilist[i] : 0;
}

double cbf_params_float_at(const cbf_params *p, const char *name, size_t i)
{
    const pval *v = find(p, name);
    if (!v || i >= v->n)
        return 0.0;
    if (v->type == CBF_PARAM_FLOAT_LIST)
        return v->flist[i];
    return v->type == CBF_PARAM_INT_LIST ? (double)v->ilist[i] : 0.0;
}

double cbf_params_field(const cbf_params *p, const char *name, size_t i, const char *field)
{
    const pval *v = find(p, name);
    if (!v || v->type != CBF_PARAM_RECORDS || i >= v->n || !field)
        return 0.0;
    for (size_t k = 0; k < v->n_fields; k++)
        if (!strcmp(v->fields[k], field))
            return v->flist[i * v->n_fields + k];
    return 0.0;
}

bool cbf_params_given(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    return v && v->given;
}

const char *cbf_params_where(const cbf_params *p, const char *name)
{
    const pval *v = find(p, name);
    if (v)
        return v->where;
    return p && p->node_where ? p->node_where : "?";
}

size_t cbf_params_count(const cbf_params *p) { return p ? p->n : 0; }

const char *cbf_params_name_at(const cbf_params *p, size_t i)
{
    return p && i < p->n ? p->v[i].name : NULL;
}

const char *cbf_params_text_at(const cbf_params *p, size_t i)
{
    return p && i < p->n ? (p->v[i].text ? p->v[i].text : "") : NULL;
}
