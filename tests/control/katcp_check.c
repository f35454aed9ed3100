#include <string.h>

#include "katcp/katcp_line.h"
#include "katcp_check.h"

int katcp_check_line(const char *line, size_t len, const char **why)
{
    cbf_katcp_msg m, m2;
    cbf_error err;
    cbf_error_clear(&err);
    int rc = cbf_katcp_parse(line, len, &m, &err);
    if (rc) {
        cbf_katcp_msg_free(&m);
        if (!err.msg[0]) {
            *why = "refused without a message";
            return -1;
        }
        return 0;
    }
    cbf_katcp_buf b = {0};
    cbf_katcp_buf_start(&b, m.type, m.name, m.id);
    for (size_t i = 0; i < m.n_args; i++)
        cbf_katcp_buf_arg(&b, m.args[i], m.lens[i]);
    int out = 0;
    if (b.oom) {
        out = 0;   /* nothing to compare */
    } else if (memchr(b.p, '\n', b.len) || memchr(b.p, '\r', b.len) || memchr(b.p, '\0', b.len)) {
        *why = "a written line holds a raw line end or NUL";
        out = -1;
    } else if (cbf_katcp_parse(b.p, b.len, &m2, &err)) {
        *why = "a written line does not parse";
        out = -1;
    } else {
        if (m2.type != m.type || strcmp(m2.name, m.name) || m2.id != m.id || m2.n_args != m.n_args) {
            *why = "written and read again: type, name, id or argument count differ";
            out = -1;
        }
        for (size_t i = 0; !out && i < m.n_args; i++)
            if (m2.lens[i] != m.lens[i] || memcmp(m2.args[i], m.args[i], m.lens[i])) {
                *why = "written and read again: an argument differs";
                out = -1;
            }
    }
    if (!b.oom)
        cbf_katcp_msg_free(&m2);
    cbf_katcp_buf_free(&b);
    cbf_katcp_msg_free(&m);
    return out;
}
