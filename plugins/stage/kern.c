/* kern.c: see kern.h. The asserts are why this file exists: kernels return
 * core's codes without including core, so the two lists are compared here,
 * the one place that sees both. */
#include "stage/kern.h"

#include "status.h"

_Static_assert((int)CBF_KERN_OK == (int)CBF_OK, "kernel OK differs from core's");
_Static_assert((int)CBF_KERN_EINVAL == (int)CBF_EINVAL, "kernel EINVAL differs from core's");
_Static_assert((int)CBF_KERN_ENOMEM == (int)CBF_ENOMEM, "kernel ENOMEM differs from core's");
_Static_assert((int)CBF_KERN_ENOTSUP == (int)CBF_ENOTSUP, "kernel ENOTSUP differs from core's");
_Static_assert((int)CBF_KERN_ECUDA == (int)CBF_ECUDA, "kernel ECUDA differs from core's");

int cbf_stage_kern(int rc, const char *msg, cbf_error *err)
{
    if (!rc)
        return 0;
    return cbf_error_set(err, rc, "%s", msg && *msg ? msg : cbf_error_name(rc));
}
