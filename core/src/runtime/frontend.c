/* frontend.c: the registry of control front ends (frontend.h). Filled by
 * constructors while libcbf loads, in whatever order the linker chose, and
 * kept sorted by each front end's order, so the engine's order is the
 * documented one whatever the link order. Read-only once main runs. */
#include <stddef.h>

#include "frontend.h"

static const cbf_frontend *fe_list[CBF_MAX_FRONTENDS];
static size_t fe_n;
static const char *fe_refused;   /* the first front end that could not be registered */
static const char *fe_why;

void cbf_rt_frontend_register(const cbf_frontend *f)
{
    if (fe_refused)
        return;
    for (size_t i = 0; i < fe_n; i++)
        if (fe_list[i]->order == f->order) {
            fe_refused = f->name;
            fe_why = "its order is another front end's";
            return;
        }
    if (fe_n == CBF_MAX_FRONTENDS) {
        fe_refused = f->name;
        fe_why = "more front ends than CBF_MAX_FRONTENDS";
        return;
    }
    size_t at = fe_n++;
    for (; at > 0 && fe_list[at - 1]->order > f->order; at--)
        fe_list[at] = fe_list[at - 1];
    fe_list[at] = f;
}

int cbf_rt_frontends(const cbf_frontend *const **list, size_t *n, cbf_error *err)
{
    *list = fe_list;
    *n = fe_n;
    if (fe_refused)
        return cbf_error_set(err, CBF_EINTERNAL, "engine: front end '%s' is not registered: %s",
                             fe_refused, fe_why);
    return CBF_OK;
}
