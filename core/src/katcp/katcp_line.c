/* katcp_line.c: katcp v5 lines in and out (katcp_line.h).
 *
 * A message is TYPE NAME[ID] ARG...: TYPE one of ? ! #, NAME a letter then
 * letters, digits and hyphens, ID an optional positive decimal right after
 * the name, arguments separated by runs of spaces or tabs. Inside an
 * argument a space, tab, backslash, NUL, newline, carriage return or escape
 * is written as \_ \t \\ \0 \n \r \e, and an empty argument as \@; any other
 * escape, or one of those characters raw, makes the line malformed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "katcp_line.h"

void cbf_katcp_msg_free(cbf_katcp_msg *m)
{
    free(m->args);
    free(m->lens);
    free(m->store);
    m->args = NULL;
    m->lens = NULL;
    m->store = NULL;
    m->n_args = 0;
}

static int kl_is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int kl_is_digit(char c) { return c >= '0' && c <= '9'; }

static int kl_unescape(char c, char *out)
{
    static const char from[] = "\\_0nret@", to[] = "\\ \0\n\r\x1b\t";
    const char *at = c ? memchr(from, c, sizeof from - 1) : NULL;
    if (!at)
        return -1;
    *out = to[at - from];   /* '@' maps to the terminating NUL: it adds nothing */
    return at - from == 7 ? 0 : 1;
}

int cbf_katcp_parse(const char *line, size_t len, cbf_katcp_msg *m, cbf_error *err)
{
    memset(m, 0, sizeof *m);
    m->id = -1;
    size_t i = 0;
    if (len == 0 || (line[0] != '?' && line[0] != '!' && line[0] != '#'))
        return cbf_error_set(err, CBF_EINVAL, "a message starts with ?, ! or #");
    m->type = line[i++];
    size_t n0 = i;
    if (i >= len || !kl_is_alpha(line[i]))
        return cbf_error_set(err, CBF_EINVAL, "a message name starts with a letter");
    while (i < len && (kl_is_alpha(line[i]) || kl_is_digit(line[i]) || line[i] == '-'))
        i++;
    if (i - n0 >= CBF_KATCP_NAME_MAX)
        return cbf_error_set(err, CBF_EINVAL, "message name longer than %d characters",
                             CBF_KATCP_NAME_MAX - 1);
    memcpy(m->name, line + n0, i - n0);
    if (i < len && line[i] == '[') {
        long long id = 0;
        size_t d0 = ++i;
        while (i < len && kl_is_digit(line[i]) && i - d0 < 15)
            id = id * 10 + (line[i++] - '0');
        if (i == d0 || i >= len || line[i] != ']' || id == 0)
            return cbf_error_set(err, CBF_EINVAL, "a message id is [N], N a positive integer under 10^15");
        m->id = id;
        i++;
    }
    if (i < len && line[i] != ' ' && line[i] != '\t')
        return cbf_error_set(err, CBF_EINVAL, "unexpected character 0x%02x after the message name",
                             (unsigned char)line[i]);
    /* Each argument's text is no longer than its escaped form, plus a NUL. */
    size_t max_args = len / 2 + 1;
    if (max_args > CBF_KATCP_MAX_ARGS + 1)
        max_args = CBF_KATCP_MAX_ARGS + 1;
    m->store = malloc(len - i + max_args + 1);
    m->args = malloc(max_args * sizeof *m->args);
    m->lens = malloc(max_args * sizeof *m->lens);
    if (!m->store || !m->args || !m->lens)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    char *o = m->store;
    for (;;) {
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i >= len)
            break;
        if (m->n_args == CBF_KATCP_MAX_ARGS)
            return cbf_error_set(err, CBF_EINVAL, "more than %d arguments", CBF_KATCP_MAX_ARGS);
        char *a = o;
        for (; i < len && line[i] != ' ' && line[i] != '\t'; i++) {
            char c = line[i];
            if (c == '\\') {
                char u;
                int k = i + 1 < len ? kl_unescape(line[i + 1], &u) : -1;
                if (k < 0)
                    return cbf_error_set(err, CBF_EINVAL, "argument %zu: bad escape '\\%s' (katcp's escapes are "
                                         "\\\\ \\_ \\t \\0 \\n \\r \\e \\@; a backslash itself, as in a "
                                         "regular expression's \\., is sent as \\\\)", m->n_args + 1,
                                         i + 1 < len ? (char[]){line[i + 1], 0} : "");
                if (k)
                    *o++ = u;
                i++;
            } else if (c == '\0' || c == '\n' || c == '\r' || c == '\x1b') {
                return cbf_error_set(err, CBF_EINVAL, "argument %zu: raw character 0x%02x (escape it)",
                                     m->n_args + 1, (unsigned char)c);
            } else {
                *o++ = c;
            }
        }
        m->lens[m->n_args] = (size_t)(o - a);
        *o++ = '\0';
        m->args[m->n_args++] = a;
    }
    return CBF_OK;
}

static int kl_grow(cbf_katcp_buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void cbf_katcp_buf_put(cbf_katcp_buf *b, const char *s, size_t n)
{
    if (kl_grow(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void cbf_katcp_buf_arg(cbf_katcp_buf *b, const char *s, size_t n)
{
    if (kl_grow(b, 2 * n + 3))
        return;
    char *o = b->p + b->len;
    *o++ = ' ';
    if (n == 0) {
        *o++ = '\\';
        *o++ = '@';
    }
    for (size_t i = 0; i < n; i++) {
        static const char raw[] = "\\ \0\n\r\x1b\t", esc[] = "\\_0nret";
        const char *at = memchr(raw, s[i], sizeof raw - 1);
        if (at) {
            *o++ = '\\';
            *o++ = esc[at - raw];
        } else {
            *o++ = s[i];
        }
    }
    b->len = (size_t)(o - b->p);
    b->p[b->len] = '\0';
}

void cbf_katcp_buf_argf(cbf_katcp_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        cbf_katcp_buf_arg(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    cbf_katcp_buf_arg(b, big, (size_t)n);
    free(big);
}

void cbf_katcp_buf_start(cbf_katcp_buf *b, char type, const char *name, long long id)
{
    char head[CBF_KATCP_NAME_MAX + 32];
    int n = id >= 0 ? snprintf(head, sizeof head, "%c%s[%lld]", type, name, id)
                    : snprintf(head, sizeof head, "%c%s", type, name);
    cbf_katcp_buf_put(b, head, (size_t)n < sizeof head ? (size_t)n : sizeof head - 1);
}

void cbf_katcp_buf_msg(cbf_katcp_buf *b, char type, const char *name, long long id, size_t n,
                       const char *const *args)
{
    cbf_katcp_buf_start(b, type, name, id);
    for (size_t i = 0; i < n; i++)
        cbf_katcp_buf_arg(b, args[i], strlen(args[i]));
    cbf_katcp_buf_put(b, "\n", 1);
}

void cbf_katcp_buf_free(cbf_katcp_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
