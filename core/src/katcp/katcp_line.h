/* katcp_line.h (private to libcbf): katcp v5 lines in and out.
 *
 * katcp_line.c parses and writes katcp lines and knows nothing of servers
 * or sockets, so a unit test and a libFuzzer harness compile it alone
 * (tests/control/test_katcp_line.c, tests/spead/fuzz_katcp.c). The
 * message it parses into is cbf/katcp.h's cbf_katcp_msg. */
#ifndef CBF_KATCP_LINE_H
#define CBF_KATCP_LINE_H

#include <stddef.h>

#include "cbf/error.h"
#include "cbf/katcp.h"

#define CBF_KATCP_HIDDEN __attribute__((visibility("hidden")))
/* Arguments in one message. A full gain table given positionally is two
 * values per channel: 2 x 65536, with room for the leading ones. */
#define CBF_KATCP_MAX_ARGS (2 * 65536 + 64)

/* Parses one line (without its line end). CBF_EINVAL with a message for a
 * malformed one (bad type, name or id, a bad escape, a raw control
 * character, too many arguments); CBF_ENOMEM. Name and id are filled as far
 * as they were read, so an error reply can echo them. Free with
 * cbf_katcp_msg_free, after an error too. */
CBF_KATCP_HIDDEN int cbf_katcp_parse(const char *line, size_t len, cbf_katcp_msg *m, cbf_error *err);

/* A growing byte string (the writer's output). */
typedef struct cbf_katcp_buf {
    char *p;
    size_t len, cap;
    int oom;                         /* an append failed: the text is incomplete */
} cbf_katcp_buf;

CBF_KATCP_HIDDEN void cbf_katcp_buf_put(cbf_katcp_buf *b, const char *s, size_t n);
/* One argument: a space, then s escaped (\@ when empty). */
CBF_KATCP_HIDDEN void cbf_katcp_buf_arg(cbf_katcp_buf *b, const char *s, size_t n);
CBF_KATCP_HIDDEN void cbf_katcp_buf_argf(cbf_katcp_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The start of a message: type, name and "[id]" when id >= 0. */
CBF_KATCP_HIDDEN void cbf_katcp_buf_start(cbf_katcp_buf *b, char type, const char *name, long long id);
/* A whole message: type, name, [id], each of args, the line end. */
CBF_KATCP_HIDDEN void cbf_katcp_buf_msg(cbf_katcp_buf *b, char type, const char *name, long long id, size_t n,
                                        const char *const *args);
CBF_KATCP_HIDDEN void cbf_katcp_buf_free(cbf_katcp_buf *b);

#endif
