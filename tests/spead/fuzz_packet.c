/* libFuzzer entry: every input is one UDP payload. */
#include <stdlib.h>
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cbf_spead_assembler *a;
    if (!a && spead_fuzz_assembler(&a))
        abort();
    const char *why;
    if (spead_fuzz_one(a, data, size, &why))
        abort();   /* a broken promise is a finding: libFuzzer keeps the input */
    return 0;
}
