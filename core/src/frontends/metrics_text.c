/* metrics_text.c: the Prometheus text exposition format, version 0.0.4.
 *
 * A page is families, each a "# HELP" and a "# TYPE" line and then its
 * samples, one per label set. A family must appear once, so samples are
 * collected first and grouped by family when the page is written (nodes
 * add theirs one node at a time, families cut across nodes). Label values
 * and help text come from YAML and plugins, so they are escaped here:
 * in a label value backslash, double quote and line feed; in help text
 * backslash and line feed. Standalone (libc only) so a test compiles it
 * without the engine. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define MT_ENOMEM (-2)   /* CBF_ENOMEM, without pulling cbf/error.h into the test */

typedef struct mt_family {
    char *name, *help;
    cbf_metric_type type;
    size_t first, last;   /* samples of this family, linked by mt_sample.next */
} mt_family;

typedef struct mt_sample {
    char *text;           /* "{labels} value", written at add time */
    size_t next;          /* next sample of the family; SIZE_MAX: none */
} mt_sample;

struct cbf_metrics_text {
    mt_family *fam;
    size_t n_fam, cap_fam;
    mt_sample *smp;
    size_t n_smp, cap_smp;
};

/* A growing string; `bad` once an allocation failed (then every append is
 * a no-op and the caller reports out of memory once). */
typedef struct mt_str {
    char *s;
    size_t len, cap;
    bool bad;
} mt_str;

static void mt_reserve(mt_str *b, size_t more)
{
    if (b->bad || b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->bad = true;
        return;
    }
    b->s = s;
    b->s[b->len] = '\0';   /* a string even before the first append */
    b->cap = cap;
}

static void mt_putc(mt_str *b, char c)
{
    mt_reserve(b, 1);
    if (b->bad)
        return;
    b->s[b->len++] = c;
    b->s[b->len] = '\0';
}

static void mt_puts(mt_str *b, const char *s)
{
    size_t n = strlen(s);
    mt_reserve(b, n);
    if (b->bad)
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

static void mt_printf(mt_str *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void mt_printf(mt_str *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    mt_reserve(b, n > 0 ? (size_t)n : 0);
    if (b->bad || n <= 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* in_label: a label value (quote escaped too); else help text. */
static void mt_escaped(mt_str *b, const char *s, bool in_label)
{
    for (; *s; s++) {
        if (*s == '\\')
            mt_puts(b, "\\\\");
        else if (*s == '\n')
            mt_puts(b, "\\n");
        else if (*s == '"' && in_label)
            mt_puts(b, "\\\"");
        else
            mt_putc(b, *s);
    }
}

/* [a-zA-Z_:][a-zA-Z0-9_:]*: anything else becomes '_'. */
static void mt_name(mt_str *b, const char *name)
{
    if (!*name || (*name >= '0' && *name <= '9'))
        mt_putc(b, '_');
    for (; *name; name++) {
        char c = *name;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == ':';
        mt_putc(b, ok ? c : '_');
    }
}

static void mt_labels(mt_str *b, const cbf_metric_label *labels, size_t n)
{
    if (!n)
        return;
    mt_putc(b, '{');
    for (size_t i = 0; i < n; i++) {
        mt_printf(b, "%s%s=\"", i ? "," : "", labels[i].name);
        mt_escaped(b, labels[i].value ? labels[i].value : "", true);
        mt_putc(b, '"');
    }
    mt_putc(b, '}');
}

/* Go's ParseFloat spellings for the special values; otherwise the fewest
 * digits (15 to 17) that read back as the same double. */
static void mt_float(mt_str *b, double v)
{
    if (isnan(v)) {
        mt_puts(b, "NaN");
        return;
    }
    if (isinf(v)) {
        mt_puts(b, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char s[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, v);
        if (strtod(s, NULL) == v)
            break;
    }
    mt_puts(b, s);
}

cbf_metrics_text *cbf_metrics_text_new(void)
{
    return calloc(1, sizeof(cbf_metrics_text));
}

void cbf_metrics_text_free(cbf_metrics_text *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_fam; i++) {
        free(t->fam[i].name);
        free(t->fam[i].help);
    }
    for (size_t i = 0; i < t->n_smp; i++)
        free(t->smp[i].text);
    free(t->fam);
    free(t->smp);
    free(t);
}

static const char *mt_type_word(cbf_metric_type type)
{
    return type == CBF_METRIC_COUNTER ? "counter" : "gauge";
}

/* The family for (name, type): found, or added at the end. SIZE_MAX: no memory. */
static size_t mt_family_of(cbf_metrics_text *t, const char *name, cbf_metric_type type, const char *help)
{
    mt_str nm = {0};
    mt_name(&nm, name);
    for (int pass = 0; pass < 2 && !nm.bad; pass++) {
        size_t i = 0;
        while (i < t->n_fam && strcmp(t->fam[i].name, nm.s))
            i++;
        if (i < t->n_fam && t->fam[i].type == type) {
            free(nm.s);
            return i;
        }
        if (i < t->n_fam) {   /* taken by the other type: the suffixed name */
            mt_printf(&nm, "_%s", mt_type_word(type));
            continue;
        }
        if (t->n_fam == t->cap_fam) {
            size_t cap = t->cap_fam ? 2 * t->cap_fam : 16;
            mt_family *f = realloc(t->fam, cap * sizeof *f);
            if (!f)
                break;
            t->fam = f;
            t->cap_fam = cap;
        }
        char *h = strdup(help ? help : "");
        if (!h)
            break;
        t->fam[t->n_fam] = (mt_family){.name = nm.s, .help = h, .type = type, .first = SIZE_MAX,
                                       .last = SIZE_MAX};
        return t->n_fam++;
    }
    free(nm.s);
    return SIZE_MAX;
}

static int mt_add(cbf_metrics_text *t, const char *name, cbf_metric_type type, const char *help,
                  const cbf_metric_label *labels, size_t n_labels, const char *value_text, double value,
                  bool is_int)
{
    size_t fi = mt_family_of(t, name, type, help);
    if (fi == SIZE_MAX)
        return MT_ENOMEM;
    if (t->n_smp == t->cap_smp) {
        size_t cap = t->cap_smp ? 2 * t->cap_smp : 64;
        mt_sample *s = realloc(t->smp, cap * sizeof *s);
        if (!s)
            return MT_ENOMEM;
        t->smp = s;
        t->cap_smp = cap;
    }
    mt_str b = {0};
    mt_labels(&b, labels, n_labels);
    mt_putc(&b, ' ');
    if (is_int)
        mt_puts(&b, value_text);
    else
        mt_float(&b, value);
    if (b.bad) {
        free(b.s);
        return MT_ENOMEM;
    }
    size_t si = t->n_smp++;
    t->smp[si] = (mt_sample){.text = b.s, .next = SIZE_MAX};
    mt_family *f = &t->fam[fi];
    if (f->last == SIZE_MAX)
        f->first = si;
    else
        t->smp[f->last].next = si;
    f->last = si;
    return 0;
}

int cbf_metrics_text_add_int(cbf_metrics_text *t, const char *name, cbf_metric_type type,
                             const char *help, const cbf_metric_label *labels, size_t n_labels,
                             uint64_t value)
{
    char v[24];
    snprintf(v, sizeof v, "%llu", (unsigned long long)value);
    return mt_add(t, name, type, help, labels, n_labels, v, 0.0, true);
}

int cbf_metrics_text_add_float(cbf_metrics_text *t, const char *name, cbf_metric_type type,
                               const char *help, const cbf_metric_label *labels, size_t n_labels,
                               double value)
{
    return mt_add(t, name, type, help, labels, n_labels, NULL, value, false);
}

char *cbf_metrics_text_render(const cbf_metrics_text *t, size_t *len)
{
    mt_str b = {0};
    mt_reserve(&b, 4096);
    for (size_t i = 0; i < t->n_fam; i++) {
        const mt_family *f = &t->fam[i];
        const char *suffix = f->type == CBF_METRIC_COUNTER ? "_total" : "";
        mt_printf(&b, "# HELP %s%s ", f->name, suffix);
        mt_escaped(&b, f->help, false);
        mt_printf(&b, "\n# TYPE %s%s %s\n", f->name, suffix, mt_type_word(f->type));
        for (size_t s = f->first; s != SIZE_MAX; s = t->smp[s].next)
            mt_printf(&b, "%s%s%s\n", f->name, suffix, t->smp[s].text);
    }
    if (b.bad || !b.s) {
        free(b.s);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.s;
}
